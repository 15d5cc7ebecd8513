/**
 * WebSocket keepalive: the daemon pings a session it has heard nothing from
 * and closes one that does not answer, so a half-open gateway is noticed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cuttableLink } from '../helpers/cuttable-link.js';
import { cleanupAll, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { stopWhileIdle, wakeAfterTimers } from '../helpers/stand-still.js';
import { rawWorker, workerStatus } from '../helpers/worker.js';

afterAll(() => cleanupAll());

/**
 * The answering session must pong within the deadline, on a machine that may stall a process
 * for a second: the deadline is far beyond that, and the test waits for events, not for it.
 */
const PONG_TIMEOUT_MS = 5000;

describe('WebSocket keepalive', () => {
  it('closes a session that stops answering pings; one that answers stays', async () => {
    const daemon = await startDaemon([
      '--ping-interval-ms',
      '200',
      '--pong-timeout-ms',
      String(PONG_TIMEOUT_MS),
    ]);
    const answering = await connectGateway(daemon.info);
    let pingsAnswered = 0;
    answering.ws.on('ping', () => pingsAnswered++);
    const silent = new WebSocket(daemon.info.url, 'mcp-progress.v1', {
      headers: { authorization: `Bearer ${daemon.info.secret}` },
      autoPong: false,
    });
    let pingsIgnored = 0;
    silent.on('ping', () => pingsIgnored++);
    await new Promise<void>((resolve, reject) => {
      silent.once('open', () => resolve());
      silent.once('error', reject);
    });
    const closedWith = await new Promise<number>((resolve) =>
      silent.once('close', (code) => resolve(code)),
    );
    // Cut off without a close frame: a peer that does not pong would not read one either.
    expect(closedWith).toBe(1006);
    expect(pingsIgnored).toBeGreaterThanOrEqual(1);
    // The daemon's check has passed the silent session's deadline; the answering one, pinged
    // all along (every 200 ms while idle), is still open, and answers.
    expect(pingsAnswered).toBeGreaterThanOrEqual(2);
    expect(answering.ws.readyState).toBe(WebSocket.OPEN);
    expect((await answering.request('progress/list')).result).toEqual({ streams: [] });
    const worker = await rawWorker(daemon.info.socket);
    expect(await workerStatus(worker)).toMatchObject({
      sessions: 1,
      counters: { keepaliveTimeouts: 1 },
    });
    worker.destroy();
    await answering.close();
    await daemon.stop();
  });
});

describe('WebSocket keepalive across a pause of the daemon', () => {
  it('a daemon that stood still (SIGSTOP) past the pong deadline keeps the session whose pong came meanwhile', async () => {
    const pongTimeoutMs = 1000;
    const daemon = await startDaemon([
      '--ping-interval-ms',
      '200',
      '--pong-timeout-ms',
      String(pongTimeoutMs),
    ]);
    // The session reaches the daemon through a relay that can hold what it sends, unread.
    const daemonPort = Number(new URL(daemon.info.url).port);
    const link = await cuttableLink(daemonPort, { daemonIs: 'target' });
    const ws = new WebSocket(`ws://127.0.0.1:${link.port}/ws`, 'mcp-progress.v1', {
      headers: {
        authorization: `Bearer ${daemon.info.secret}`,
        host: `127.0.0.1:${daemonPort}`,
      },
      autoPong: false,
    });
    const pinged = new Promise<void>((resolve) => ws.once('ping', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    // The daemon's ping is out; its answer waits, unread, while the daemon stands still.
    await pinged;
    link.hold();
    ws.pong();
    await stopWhileIdle(daemon);
    try {
      // The pause under test: longer than the deadline, as a host asleep or swapped out.
      await new Promise((resolve) => setTimeout(resolve, pongTimeoutMs * 2));
    } finally {
      // Its keepalive check runs before it reads the pong.
      await wakeAfterTimers(daemon, link);
    }
    ws.on('ping', () => ws.pong());
    // The session must still be there, and answer.
    const answer = Promise.race([
      new Promise<unknown>((resolve) =>
        ws.once('message', (data) => resolve(JSON.parse(String(data)))),
      ),
      closed.then((code) => {
        throw new Error(`session closed (${code}) instead of answering`);
      }),
    ]);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'progress/list' }));
    expect(await answer).toMatchObject({ id: 1, result: { streams: [] } });
    const worker = await rawWorker(daemon.info.socket);
    expect(await workerStatus(worker)).toMatchObject({ counters: { keepaliveTimeouts: 0 } });
    worker.destroy();
    ws.close();
    await link.close();
    await daemon.stop();
  });
});
