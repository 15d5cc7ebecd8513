/**
 * WebSocket keepalive: the daemon pings a session it has heard nothing from
 * and closes one that does not answer, so a half-open gateway is noticed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cleanupAll, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
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
