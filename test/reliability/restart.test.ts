/**
 * kill -9 the daemon in the middle of streams and start it again. The stale
 * socket is replaced; the Node and Python clients reconnect; the relay helper
 * inside someone's MCP server and `mcp-progress mcp` reconnect and
 * resubscribe; each MCP client sees progress go on strictly increasing, with
 * no repeat and no regress, and nothing after its result.
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { relayProgress } from '../../src/mcp/index.js';
import { cleanupAll, eventually, startDaemon, tempDir } from '../helpers/daemon.js';
import {
  type DrivenWorker,
  killWorkers,
  nodeWorker,
  pythonWorker,
} from '../helpers/driven-worker.js';
import {
  connectStdio,
  connectUrl,
  progressParams,
  responseIndex,
  waitForSubscribers,
} from '../helpers/mcp.js';
import { hostV1 } from '../helpers/relay-servers.js';

afterEach(() => killWorkers());
afterAll(() => cleanupAll());
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

/** The progress values a client received before its result, and whether anything came after it. */
function beforeAndAfterResult(
  received: JSONRPCMessage[],
  id: number,
): { before: unknown[]; after: number } {
  const at = responseIndex(received, id);
  expect(at, 'the result arrived').toBeGreaterThanOrEqual(0);
  return {
    before: progressParams(received.slice(0, at)).map((p) => p.progress),
    after: progressParams(received.slice(at + 1)).length,
  };
}

describe('kill -9 mid-stream, then a new daemon', () => {
  it('workers, the relay helper and mcp-progress mcp all carry on: strictly increasing, no repeat', async () => {
    const runtimeDir = tempDir();
    // A long grace: the streams must survive the outage on their own merits, not by luck of timing.
    const args = ['--abandon-grace-ms', '120000'];
    let daemon = await startDaemon(args, runtimeDir);

    // Someone else's MCP server whose tool relays a Node worker's progress.
    let relayed: { worker: DrivenWorker; routeKey: string } | undefined;
    const server = await hostV1(async (_args, extra) => {
      await using relay = await relayProgress(extra, { runtimeDir, minIntervalMs: 0 });
      relayed = { worker: nodeWorker(relay.env), routeKey: relay.routeKey };
      await relay.done;
      return 'rendered';
    });
    const relayClient = await connectUrl(server.url);
    const relaySeen: number[] = [];
    const relayCall = relayClient.client.callTool(
      { name: 'render', arguments: { steps: 4 } },
      undefined,
      {
        onprogress: (p) => relaySeen.push(p.progress),
        timeout: 170_000,
      },
    );

    // A host watching a Python worker's stream through `mcp-progress mcp`.
    const watcher = await connectStdio(['--runtime-dir', runtimeDir]);
    const watchSeen: number[] = [];
    const watchCall = watcher.client.callTool(
      {
        name: 'watch_progress',
        arguments: { progressToken: 'watched', minIntervalMs: 0, timeoutMs: 160_000 },
      },
      undefined,
      { onprogress: (p) => watchSeen.push(p.progress), timeout: 170_000 },
    );
    const python = pythonWorker({
      MCP_PROGRESS_SOCKET: daemon.info.socket,
      MCP_PROGRESS_TOKEN: 'watched',
    });

    const { worker: node, routeKey } = await eventually(
      () => relayed,
      60_000,
      'the tool to start its worker',
    );
    for (const worker of [node, python]) await worker.next((e) => e.event === 'ready', 'ready');
    const subscribed = async () => {
      await waitForSubscribers(daemon.info, routeKey, 1, 60_000);
      await waitForSubscribers(daemon.info, 'watched', 1, 60_000);
    };
    const step = async (value: number) => {
      for (const worker of [node, python])
        worker.send({ update: { total: 4, message: `step ${value}` } });
      await eventually(
        () => (relaySeen.includes(value) && watchSeen.includes(value) ? true : undefined),
        60_000,
        `step ${value}`,
      );
    };

    await subscribed();
    await step(1);
    await step(2);

    await daemon.stop('SIGKILL');
    daemon = await startDaemon(args, runtimeDir);
    // Both gateways come back on their own (a new secret, read again from daemon.json).
    await subscribed();
    await step(3);
    await step(4);
    for (const worker of [node, python]) worker.send({ done: 'ok' });
    for (const worker of [node, python]) {
      expect(await worker.next((e) => e.event === 'done', 'done')).toMatchObject({
        delivered: true,
      });
    }

    const watched = await watchCall;
    expect(watched.structuredContent).toMatchObject({
      state: 'done',
      status: 'ok',
      progress: 4,
      total: 4,
    });
    expect(await relayCall).toMatchObject({ content: [{ type: 'text', text: 'rendered' }] });

    expect(relaySeen).toEqual([1, 2, 3, 4]);
    expect(watchSeen).toEqual([1, 2, 3, 4]);
    // On the wire too: exactly one of each value before the result, and nothing after it.
    const relayWire = beforeAndAfterResult(relayClient.received, 1);
    const watchWire = beforeAndAfterResult(watcher.received, 1);
    expect(relayWire).toEqual({ before: [1, 2, 3, 4], after: 0 });
    expect(watchWire).toEqual({ before: [1, 2, 3, 4], after: 0 });

    await relayClient.close();
    await watcher.close();
    await server.close();
    expect(await daemon.stop()).toBe(0);
  });
});
