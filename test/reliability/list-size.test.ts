/**
 * Issue 15: a `progress/list` reply larger than the session buffer closed
 * its own caller (4008), and `mcp-progress mcp` listed on every tool call.
 * Here the buffer cap is its minimum (MIN_SESSION_BUFFER_BYTES, 573 KiB) and
 * the streams' JSON is about four times that: the list comes in pages, the session stays open, and
 * get_progress reads one stream through `progress/get`. task/list, whose tasks carry their streams'
 * summaries, was bounded by count alone (1000 tasks a page): it pages within the same budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ListResult } from '../../src/protocol/frames.js';
import { MIN_SESSION_BUFFER_BYTES } from '../../src/protocol/limits.js';
import type { TaskListResult, TaskRecord } from '../../src/protocol/tasks.js';
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

  it('task/list answers in pages within the budget: every task once, each reply under it', async () => {
    const gateway = await connectGateway(daemon.info);
    let closedWith: number | undefined;
    gateway.ws.once('close', (code) => {
      closedWith = code;
    });
    // Tasks of failed jobs carry the message three times: the last value's, the done's, the reason.
    const failing = 40;
    const failer = await rawWorker(daemon.info.socket);
    for (let i = 0; i < failing; i++) {
      const progressToken = `failed-${i}`;
      failer.send('progress', { v: 1, progressToken, progress: 1, message: MESSAGE });
      failer.send('done', { v: 1, progressToken, status: 'error', message: MESSAGE, seq: i });
    }
    await failer.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === failing - 1);
    const tokens = [
      ...Array.from({ length: 120 }, (_, i) => `big-${i}`),
      ...Array.from({ length: failing }, (_, i) => `failed-${i}`),
    ];
    const created: string[] = [];
    for (const progressToken of tokens) {
      const reply = await gateway.request('task/create', { progressToken });
      created.push((reply.result as { task: TaskRecord }).task.taskId);
    }
    // Each reply as it came over the WebSocket.
    const sizes: number[] = [];
    gateway.ws.on('message', (data: Buffer) => sizes.push(data.length));
    const budget = Math.floor(MIN_SESSION_BUFFER_BYTES / 4);
    const listed: TaskRecord[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const reply = await gateway.request('task/list', cursor === undefined ? {} : { cursor });
      const page = reply.result as TaskListResult;
      pages++;
      expect(page.tasks.length).toBeGreaterThan(0);
      listed.push(...page.tasks);
      cursor = page.nextCursor;
    } while (cursor !== undefined && pages <= tokens.length);
    expect(sizes).toHaveLength(pages);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(budget);
    // Enough tasks for several pages, all of them listed, each exactly once.
    expect(sizes.reduce((sum, size) => sum + size, 0)).toBeGreaterThan(4 * budget);
    expect(listed.map((task) => task.taskId)).toEqual(created);
    expect(listed.filter((task) => task.reason === MESSAGE)).toHaveLength(failing);
    const status = await gateway.request('progress/status');
    expect(
      (status.result as { counters: { slowSessionsClosed: number } }).counters.slowSessionsClosed,
    ).toBe(0);
    expect(closedWith).toBeUndefined();
    failer.destroy();
    await gateway.close();
  });
});
