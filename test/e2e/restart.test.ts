/** A daemon restart under a Node and a Python worker: both reconnect, and their next update arrives. */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import type { Notification } from '../../src/protocol/notifications.js';
import { cleanupAll, eventually, startDaemon, tempDir } from '../helpers/daemon.js';
import { killWorkers, nodeWorker, pythonWorker } from '../helpers/driven-worker.js';

afterEach(() => killWorkers());
afterAll(() => cleanupAll());
// Each test starts several real processes; on a machine shared with other test runs that can take long.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

describe('a daemon restart while clients publish', () => {
  it('the Node and Python clients reconnect, and their next update reaches the new daemon', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const seen = new Map<string, number[]>();
    const states: string[] = [];
    const gateway = await GatewayClient.connect({ runtimeDir, onState: (s) => states.push(s) });
    const tokens = { node: `restart-node-${process.pid}`, python: `restart-py-${process.pid}` };
    for (const token of Object.values(tokens)) {
      seen.set(token, []);
      await gateway.subscribe({ progressToken: token, minIntervalMs: 0 }, (n: Notification) => {
        if (n.method === 'notifications/progress') seen.get(token)?.push(n.params.progress);
      });
    }
    const env = (token: string) => ({
      MCP_PROGRESS_SOCKET: first.info.socket,
      MCP_PROGRESS_TOKEN: token,
    });
    const workers = [nodeWorker(env(tokens.node)), pythonWorker(env(tokens.python))];
    for (const worker of workers) await worker.next((e) => e.event === 'ready', 'ready');
    const reached = (token: string, value: number) =>
      eventually(
        () => (seen.get(token)?.includes(value) ? true : undefined),
        60_000,
        `${token} at ${value}`,
      );

    // Omitted progress counts 1, 2 on the first daemon.
    for (const worker of workers) worker.send({ update: { total: 10 } });
    for (const token of Object.values(tokens)) await reached(token, 1);
    for (const worker of workers) worker.send({ update: { total: 10 } });
    for (const token of Object.values(tokens)) await reached(token, 2);

    await first.stop('SIGKILL');
    const second = await startDaemon([], runtimeDir);
    for (const worker of workers)
      await worker.next((e) => e.event === 'error', 'the lost-daemon report');
    await eventually(
      () => (states.at(-1) === 'connected' && states.length >= 3 ? true : undefined),
      60_000,
      'gateway back',
    );

    // The next update arrives, and counts on from the worker's own last value (3, not 1).
    for (const worker of workers) worker.send({ update: { total: 10, message: 'after restart' } });
    for (const token of Object.values(tokens)) await reached(token, 3);
    for (const worker of workers) worker.send({ done: 'ok' });
    for (const worker of workers)
      expect(await worker.next((e) => e.event === 'done', 'done outcome')).toMatchObject({
        delivered: true,
      });
    for (const token of Object.values(tokens)) expect(seen.get(token)).toEqual([1, 2, 3]);
    expect(
      (await gateway.list()).streams
        .filter((s) => s.state === 'done')
        .map((s) => s.progressToken)
        .sort(),
    ).toEqual(Object.values(tokens).sort());
    await gateway.close();
    await second.stop();
  });
});
