/**
 * A gateway client the daemon closes as a slow consumer (4008, past --max-session-buffer-bytes):
 * it is told why (the code `slow_consumer`, on tail's stderr too), it backs off while it stays
 * slow rather than reconnecting at once each time, and it gets the newest value once it reads
 * again. The client is real and reaches a real daemon through a relay on its local link that
 * stops reading on command: to the daemon, a client that does not read.
 */
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import { CLOSE_CODES } from '../../src/protocol/errors.js';
import { MIN_SESSION_BUFFER_BYTES } from '../../src/protocol/limits.js';
import { PROGRESS_METHOD } from '../../src/protocol/notifications.js';
import { encodeFrame } from '../../src/protocol/wire.js';
import type { BridgeError } from '../../src/shared/errors.js';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  startDaemon,
  waitForExit,
} from '../helpers/daemon.js';
import { type RelayedConnection, startLinkRelay } from '../helpers/link-relay.js';
import { connectStdio } from '../helpers/mcp.js';
import { type RawWorker, rawWorker, workerStatus } from '../helpers/worker.js';

afterAll(() => cleanupAll());

const TOKEN = 'flood';
/** About 3 KB a notification: a few hundred fill the smallest buffer cap. */
const PADDING = 'x'.repeat(3000);

/**
 * Publishes values after `from` on TOKEN, a batch at a time, until the daemon has closed
 * `closes` sessions as slow consumers in all; returns the last value published.
 */
async function publishUntilClosedSlow(
  worker: RawWorker,
  from: number,
  closes: number,
): Promise<number> {
  let value = from;
  for (;;) {
    const status = await workerStatus<{ counters: { slowSessionsClosed: number } }>(worker);
    if (status.counters.slowSessionsClosed >= closes) return value;
    const batch: string[] = [];
    for (let i = 0; i < 100; i++) {
      value++;
      batch.push(
        encodeFrame('progress', { v: 1, progressToken: TOKEN, progress: value, message: PADDING }),
      );
    }
    worker.write(batch.join(''));
  }
}

/** Stalls `connection` until the daemon closed it as slow, then lets the client read it all. */
async function closeSlow(
  connection: RelayedConnection,
  worker: RawWorker,
  from: number,
  closes: number,
): Promise<number> {
  connection.stall();
  const last = await publishUntilClosedSlow(worker, from, closes);
  connection.resume();
  await eventually(() => connection.closeCode, 10_000, 'the close frame to pass the relay');
  expect(connection.closeCode).toBe(CLOSE_CODES.slow_consumer.code);
  return last;
}

/**
 * A daemon at the smallest session buffer, a relay on its local link for the session to stall,
 * and a worker that has sent the value 'first'.
 */
async function slowConsumerSetup() {
  const daemon = await startDaemon([
    '--max-session-buffer-bytes',
    String(MIN_SESSION_BUFFER_BYTES),
  ]);
  const relay = await startLinkRelay(daemon.info);
  onTestFinished(() => relay.close());
  const worker = await rawWorker(daemon.info.socket);
  onTestFinished(() => worker.destroy());
  worker.send('progress', { v: 1, progressToken: TOKEN, progress: 0, message: 'first' });
  return { daemon, relay, worker };
}

describe('a gateway client closed as a slow consumer', () => {
  it('is told why, backs off while it stays slow, and gets the newest value once it reads', async () => {
    const daemon = await startDaemon([
      '--max-session-buffer-bytes',
      String(MIN_SESSION_BUFFER_BYTES),
    ]);
    const relay = await startLinkRelay(daemon.info);
    onTestFinished(() => relay.close());
    const states: Array<{ state: string; why: BridgeError | undefined; at: number }> = [];
    const client = await GatewayClient.connect({
      runtimeDir: relay.runtimeDir,
      onState: (state, why) => states.push({ state, why, at: performance.now() }),
    });
    onTestFinished(() => client.close());
    const seen: number[] = [];
    await client.subscribe({ progressToken: TOKEN, minIntervalMs: 0 }, (notification) => {
      if (notification.method === PROGRESS_METHOD) seen.push(notification.params.progress);
    });
    const worker = await rawWorker(daemon.info.socket);
    onTestFinished(() => worker.destroy());
    const of = (state: string) => states.filter((s) => s.state === state);
    const closes = 6;
    let value = 0;
    for (let close = 1; close <= closes; close++) {
      // The client is connected and resubscribed on its `close`th connection: it stays slow there.
      await eventually(
        () => (of('connected').length >= close ? true : undefined),
        20_000,
        () => `connection ${close} (states: ${states.map((s) => s.state).join(', ')})`,
      );
      const connection = relay.connections.at(-1);
      if (connection === undefined) throw new Error('no connection through the relay');
      value = await closeSlow(connection, worker, value, close);
      await eventually(() => (of('disconnected').length >= close ? true : undefined));
    }
    // Each close named its reason, with its code.
    for (const { why } of of('disconnected')) {
      expect(why?.code).toBe('slow_consumer');
      expect(why?.message).toContain('--max-session-buffer-bytes');
    }
    // Back once more, reading: the newest value arrives, and what came was strictly increasing.
    await eventually(() => (of('connected').length > closes ? true : undefined), 20_000);
    const waits = of('disconnected').map((dropped, i) =>
      Math.round((of('connected')[i + 1]?.at ?? Number.NaN) - dropped.at),
    );
    console.log(
      `slow consumer: ${closes} closes in a row; from each close to the client back and resubscribed: ${waits.join(', ')} ms`,
    );
    // The 5th close in a row waits the 5th step of the reconnect backoff (800 ms, at most half
    // taken off), the 6th the 6th (1600 ms). Coming back at once, each took 25-50 ms.
    expect(waits[4]).toBeGreaterThanOrEqual(390);
    expect(waits[5]).toBeGreaterThanOrEqual(790);
    worker.write(
      encodeFrame('progress', { v: 1, progressToken: TOKEN, progress: value + 1, message: 'last' }),
    );
    await eventually(
      () => (seen.at(-1) === value + 1 ? true : undefined),
      10_000,
      () => `the newest value ${value + 1} (last seen ${seen.at(-1)})`,
    );
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1] ?? 0);
    await daemon.stop();
  }, 90_000);

  it('`mcp-progress tail` says on stderr that the daemon closed it as a slow consumer, and why', async () => {
    const { daemon, relay, worker } = await slowConsumerSetup();
    const child = spawn(
      process.execPath,
      [BIN, 'tail', '--runtime-dir', relay.runtimeDir, '--json', '--min-interval-ms', '0', TOKEN],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    onTestFinished(() => {
      child.kill();
    });
    const output = collectOutput(child);
    // Following: the first value is on tail's screen.
    await eventually(() => (output.stdout().includes('"first"') ? true : undefined), 20_000);
    const connection = relay.connections.at(-1);
    if (connection === undefined) throw new Error('no connection through the relay');
    const value = await closeSlow(connection, worker, 0, 1);
    await eventually(
      () => (output.stderr().includes('slow_consumer') ? true : undefined),
      10_000,
      () => `tail to name the slow-consumer close (stderr: ${output.stderr()})`,
    );
    expect(output.stderr()).toContain('slow consumer (close 4008)');
    expect(output.stderr()).toContain('--max-session-buffer-bytes');
    // Back and reading: the newest value is shown.
    worker.send('progress', { v: 1, progressToken: TOKEN, progress: value + 1, message: 'newest' });
    await eventually(
      () => (output.stdout().includes('"newest"') ? true : undefined),
      20_000,
      'tail to show the newest value after the reconnect',
    );
    child.kill('SIGINT');
    await waitForExit(child);
    await daemon.stop();
  }, 90_000);

  it('`mcp-progress mcp` logs on stderr that the daemon closed a watch as a slow consumer, and the watch goes on to the newest value', async () => {
    const { daemon, relay, worker } = await slowConsumerSetup();
    const mcp = await connectStdio(['--runtime-dir', relay.runtimeDir]);
    onTestFinished(() => mcp.close());
    const messages: Array<string | undefined> = [];
    const watched = mcp.client.callTool(
      {
        name: 'watch_progress',
        arguments: { progressToken: TOKEN, minIntervalMs: 0, timeoutMs: 60_000 },
      },
      undefined,
      { onprogress: (p) => messages.push(p.message), timeout: 60_000 },
    );
    // Awaited at the end; a test that fails before then closes the server under it.
    watched.catch(() => {});
    await eventually(() => (messages.includes('first') ? true : undefined), 20_000);
    // The watch's own connection, opened after the one for the server's other calls.
    const connection = relay.connections.at(-1);
    if (connection === undefined) throw new Error('no connection through the relay');
    const value = await closeSlow(connection, worker, 0, 1);
    await eventually(
      () => (mcp.stderr().includes('slow_consumer') ? true : undefined),
      10_000,
      () => `mcp to log the slow-consumer close (stderr: ${mcp.stderr()})`,
    );
    expect(mcp.stderr()).toContain('slow consumer (close 4008)');
    // Back and reading: the newest value reaches the MCP client, then the done ends the call.
    await eventually(() => (relay.connections.length > connection.index ? true : undefined));
    await eventually(() =>
      relay.connections.at(-1)?.sent.some((text) => text.includes('progress/subscribe'))
        ? true
        : undefined,
    );
    worker.send('progress', { v: 1, progressToken: TOKEN, progress: value + 1, message: 'newest' });
    await eventually(
      () => (messages.includes('newest') ? true : undefined),
      20_000,
      'the newest value after the reconnect',
    );
    worker.send('done', { v: 1, progressToken: TOKEN, status: 'ok' });
    expect((await watched).isError).toBeFalsy();
    await daemon.stop();
  }, 90_000);
});
