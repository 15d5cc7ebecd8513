/**
 * Issue 15: a `progress/list` reply larger than the session buffer closed
 * its own caller (4008), and `mcp-progress mcp` listed on every tool call.
 * Here the buffer cap is its minimum (MIN_SESSION_BUFFER_BYTES, 439 KiB) and
 * the streams' JSON is about five times that: the list comes in pages, the session stays open, and
 * get_progress reads one stream through `progress/get`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ListResult } from '../../src/protocol/frames.js';
import { MIN_SESSION_BUFFER_BYTES } from '../../src/protocol/limits.js';
import { DEFAULT_LIST_TOOL_LIMIT } from '../../src/shared/defaults.js';
import { cleanupAll, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio } from '../helpers/mcp.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const STREAMS = 560;
const MESSAGE = 'm'.repeat(4000);
let daemon: RunningDaemon;
let worker: RawWorker;

beforeAll(async () => {
  daemon = await startDaemon(['--max-session-buffer-bytes', String(MIN_SESSION_BUFFER_BYTES)]);
  worker = await rawWorker(daemon.info.socket);
  for (let i = 0; i < STREAMS; i++)
    worker.send('progress', {
      v: 1,
      progressToken: `big-${i}`,
      progress: 1,
      message: MESSAGE,
      seq: i,
    });
  await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === STREAMS - 1);
});
afterAll(async () => {
  worker.destroy();
  await daemon.stop();
  cleanupAll();
});

describe('a stream table larger than the session buffer', () => {
  it('progress/list answers in pages within the budget, and the session stays open', async () => {
    const gateway = await connectGateway(daemon.info);
    let closedWith: number | undefined;
    gateway.ws.once('close', (code) => {
      closedWith = code;
    });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const reply = await gateway.request('progress/list', cursor === undefined ? {} : { cursor });
      const page = reply.result as ListResult;
      pages++;
      expect(Buffer.byteLength(JSON.stringify(reply))).toBeLessThan(MIN_SESSION_BUFFER_BYTES);
      seen.push(...page.streams.map((s) => String(s.progressToken)));
      cursor = page.nextCursor;
    } while (cursor !== undefined && pages < STREAMS);
    expect(pages).toBeGreaterThan(1);
    expect(seen.toSorted()).toEqual(
      Array.from({ length: STREAMS }, (_, i) => `big-${i}`).toSorted(),
    );
    // Still the same, open session.
    const status = await gateway.request('progress/status');
    expect(status.result).toMatchObject({ streams: { active: STREAMS } });
    expect(closedWith).toBeUndefined();
    expect(
      (status.result as { counters: { slowSessionsClosed: number } }).counters.slowSessionsClosed,
    ).toBe(0);
    await gateway.close();
  });

  it('get_progress of `mcp-progress mcp` reads one stream, and list_progress all of them', async () => {
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    try {
      const one = await mcp.client.callTool({
        name: 'get_progress',
        arguments: { progressToken: 'big-7' },
      });
      expect(one.structuredContent).toMatchObject({
        found: true,
        stream: { progressToken: 'big-7', progress: 1, message: MESSAGE },
      });
      // list_progress comes in pages too (issue 23: 45k streams were one 9.1 MB tool result).
      const listed: string[] = [];
      let cursor: string | undefined;
      let calls = 0;
      do {
        const page = await mcp.client.callTool({
          name: 'list_progress',
          arguments: cursor === undefined ? {} : { cursor },
        });
        calls++;
        const content = page.structuredContent as {
          streams: Array<{ progressToken: string }>;
          nextCursor?: string;
        };
        expect(content.streams.length).toBeLessThanOrEqual(DEFAULT_LIST_TOOL_LIMIT);
        expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThan(2 * 1024 * 1024);
        listed.push(...content.streams.map((s) => s.progressToken));
        cursor = content.nextCursor;
        if (cursor !== undefined) expect(JSON.stringify(page.content)).toContain(cursor);
      } while (cursor !== undefined && calls <= STREAMS);
      expect(calls).toBeGreaterThanOrEqual(Math.ceil(STREAMS / DEFAULT_LIST_TOOL_LIMIT));
      expect(listed.toSorted()).toEqual(
        Array.from({ length: STREAMS }, (_, i) => `big-${i}`).toSorted(),
      );
      const status = await connectGateway(daemon.info);
      const figures = (await status.request('progress/status')).result as {
        counters: { slowSessionsClosed: number };
      };
      expect(figures.counters.slowSessionsClosed).toBe(0);
      await status.close();
    } finally {
      await mcp.close();
    }
  });
});
