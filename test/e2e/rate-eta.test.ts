/**
 * The daemon's rate and ETA of a running job, end to end: a real worker on the real
 * socket, read back through progress/get and progress/list on a real WebSocket, and
 * through watch_progress by an MCP client that sends no progress token (as hosts that
 * render no progress do): its result says in one line how far, the pace and the ETA.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { StreamSummary } from '../../src/protocol/index.js';
import { eventually } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { connectStdio, textOf } from '../helpers/mcp.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const daemon = daemonForFile();
const workers: RawWorker[] = [];
afterAll(() => {
  for (const worker of workers) worker.destroy();
});

let seq = 0;
async function publish(worker: RawWorker, data: Record<string, unknown>): Promise<void> {
  const mine = ++seq;
  worker.send('progress', { v: 1, ...data, seq: mine });
  const reply = await worker.reply((r) => (r.data as { seq?: number } | undefined)?.seq === mine);
  expect(reply.type).toBe('ack');
}

async function summary(gateway: GatewayClient, token: string): Promise<StreamSummary> {
  const reply = await gateway.request('progress/get', { progressToken: token });
  return (reply.result as { stream: StreamSummary }).stream;
}

/** Publishes the next value until the daemon reports a rate (values at two different instants). */
async function runUntilRated(worker: RawWorker, gateway: GatewayClient, token: string) {
  let progress = 0;
  const rated = await eventually(
    async () => {
      progress++;
      await publish(worker, {
        progressToken: token,
        progress,
        total: 1000,
        message: `frame ${progress}`,
      });
      const stream = await summary(gateway, token);
      return typeof stream.rate === 'number' ? stream : undefined;
    },
    30_000,
    'a rate',
  );
  return { rated, progress };
}

describe('rate and ETA of a running job', () => {
  it('progress/get and progress/list give rate and etaMs for an active stream only', async () => {
    const worker = await rawWorker(daemon.info.socket);
    workers.push(worker);
    const gateway = await connectGateway(daemon.info);
    const token = `eta-${process.pid}`;
    await publish(worker, { progressToken: token, progress: 0, total: 1000 });
    const first = await summary(gateway, token);
    expect(first).toMatchObject({ state: 'active', rate: null, etaMs: null });
    const { rated, progress } = await runUntilRated(worker, gateway, token);
    expect(rated.rate).toBeGreaterThan(0);
    expect(Number.isInteger(rated.etaMs)).toBe(true);
    expect(rated.etaMs).toBeGreaterThan(0);
    // The same in the list.
    const listed = (
      (await gateway.request('progress/list')).result as { streams: StreamSummary[] }
    ).streams.find((s) => s.progressToken === token);
    expect(typeof listed?.rate).toBe('number');
    // Without a total there is a rate but no ETA.
    const open = `${token}-open`;
    await publish(worker, { progressToken: open, progress: 1 });
    await eventually(
      async () => {
        await publish(worker, { progressToken: open });
        const stream = await summary(gateway, open);
        return typeof stream.rate === 'number' ? stream : undefined;
      },
      30_000,
      'a rate without a total',
    ).then((stream) => expect(stream.etaMs).toBeNull());
    // Done: neither.
    const mine = ++seq;
    worker.send('done', { v: 1, progressToken: token, status: 'ok', seq: mine });
    await worker.reply((r) => (r.data as { seq?: number } | undefined)?.seq === mine);
    const done = await summary(gateway, token);
    expect(done.state).toBe('done');
    expect(done).not.toHaveProperty('rate');
    expect(done).not.toHaveProperty('etaMs');
    expect(progress).toBeGreaterThan(0);
    await gateway.close();
  });

  it('watch_progress without a progress token: one line with how far, the pace, the ETA, and to call again', async () => {
    const worker = await rawWorker(daemon.info.socket);
    workers.push(worker);
    const gateway = await connectGateway(daemon.info);
    const token = `eta-watch-${process.pid}`;
    await publish(worker, { progressToken: token, progress: 0, total: 1000, message: 'frame 0' });
    const { progress } = await runUntilRated(worker, gateway, token);
    await gateway.close();
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    try {
      // No onprogress: the SDK sends no progressToken, as Claude Desktop does.
      const result = await mcp.client.callTool({
        name: 'watch_progress',
        arguments: { progressToken: token, timeoutMs: 200 },
      });
      const text = textOf(result);
      expect(text).toMatch(
        new RegExp(
          `^Job "${token}" is still running at ${progress}/1000 \\(\\d+%\\), [0-9.]+/s, about \\d+ (s|min|h)[^:]* left: frame ${progress}\\. Stopped watching at the timeout; call watch_progress again to keep watching\\.$`,
        ),
      );
      expect(text.split('\n')).toHaveLength(1);
      expect(result.structuredContent).toMatchObject({
        progressToken: token,
        state: 'active',
        timedOut: true,
        progress,
        total: 1000,
      });
      const structured = result.structuredContent as { rate?: number; etaMs?: number };
      expect(structured.rate).toBeGreaterThan(0);
      expect(structured.etaMs).toBeGreaterThan(0);
      expect(
        mcp.received.filter((m) => 'method' in m && m.method === 'notifications/progress'),
      ).toEqual([]);
    } finally {
      await mcp.close();
    }
  });
});
