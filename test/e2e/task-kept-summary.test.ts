/**
 * What a finished task keeps, in a real daemon: its stream's summary without the last value's
 * `_meta`. A task is kept for its TTL (up to 24 h) after the stream table forgot its stream
 * (--retention-ms), so each of up to MAX_LIVE_TASKS finished tasks kept a whole last frame:
 * 10000 tasks of 60 KB `_meta` held about 1.2 GiB (test/reliability/memory-caps.ts), where the
 * docs said 60 MiB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import type { TaskRecord } from '../../src/protocol/tasks.js';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const TASKS = 200;
/** A last value near the frame limit (64 KiB): its `_meta` is 60 KB. */
const META = { pad: 'x'.repeat(60_000) };

let daemon: RunningDaemon;
let client: GatewayClient;
let worker: RawWorker;

beforeAll(async () => {
  // The stream table forgets a done stream at once: what a task answers then is what it kept.
  daemon = await startDaemon(['--retention-ms', '0']);
  client = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
  worker = await rawWorker(daemon.info.socket);
});
afterAll(async () => {
  worker?.destroy();
  await client?.close();
  await daemon?.stop();
  cleanupAll();
});

/** Every task the daemon keeps, page by page. */
async function allTasks(): Promise<{ tasks: TaskRecord[]; pages: number }> {
  const tasks: TaskRecord[] = [];
  let pages = 0;
  let cursor: string | undefined;
  do {
    const page = await client.listTasks(cursor === undefined ? {} : { cursor });
    pages++;
    tasks.push(...page.tasks);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { tasks, pages };
}

describe('a finished task keeps a bounded summary of its stream', () => {
  it("keeps everything but the last value's _meta, for many tasks whose last frames were full-size", async () => {
    const tokens = Array.from({ length: TASKS }, (_, i) => `kept-${i}`);
    const created: string[] = [];
    for (const progressToken of tokens) {
      created.push((await client.createTask({ progressToken, ttlMs: 600_000 })).taskId);
    }
    // While its job runs, a task shows the stream as it is: the _meta too.
    const first = tokens[0] as string;
    worker.send('progress', {
      v: 1,
      progressToken: first,
      progress: 5,
      total: 10,
      message: 'step 5',
      _meta: META,
    });
    const running = await eventually(async () => {
      const task = await client.getTask(created[0] as string);
      return task?.stream?.last === undefined ? undefined : task;
    });
    expect(running).toMatchObject({ status: 'working', stream: { last: { _meta: META } } });
    for (const [i, progressToken] of tokens.entries()) {
      if (i > 0) {
        worker.send('progress', {
          v: 1,
          progressToken,
          progress: 5,
          total: 10,
          message: 'step 5',
          _meta: META,
        });
      }
      worker.send('done', { v: 1, progressToken, status: 'ok', message: 'finished', seq: i });
    }
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === TASKS - 1);
    // Every stream ended and was forgotten by the stream table: the tasks alone answer.
    await eventually(async () => {
      const status = await client.request('progress/status');
      const streams = (status as { streams: { active: number; done: number } }).streams;
      return streams.active + streams.done === 0 ? true : undefined;
    }, 30_000);
    const { tasks, pages } = await allTasks();
    expect(tasks.map((task) => task.taskId)).toEqual(created);
    const kept = (progressToken: string) => ({
      progressToken,
      status: 'completed',
      stream: {
        progressToken,
        state: 'done',
        status: 'ok',
        message: 'finished',
        last: { progressToken, progress: 5, total: 10, message: 'step 5' },
      },
    });
    for (const [i, task] of tasks.entries()) {
      const progressToken = tokens[i] as string;
      expect(task).toMatchObject(kept(progressToken));
      expect(task.stream?.last, progressToken).not.toHaveProperty('_meta');
      // The summary without _meta: a few hundred bytes here (at most the token and message limits).
      expect(JSON.stringify(task).length, progressToken).toBeLessThan(1024);
      expect(await client.getTask(task.taskId)).toEqual(task);
    }
    // 200 tasks of under 1 KiB fit one page (with 60 KB each they took over a dozen).
    expect(pages).toBe(1);
  }, 120_000);
});
