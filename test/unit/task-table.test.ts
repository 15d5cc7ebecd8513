/** The daemon's task table, fed by a real router: statuses follow the stream, TTL and cap hold. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { keptSummary, TaskTable, type TaskTableOptions } from '../../src/daemon/task-table.js';
import { mcpTask, taskToolResult } from '../../src/mcp/tasks.js';
import type { StreamSummary } from '../../src/protocol/frames.js';
import type { TaskRecord } from '../../src/protocol/tasks.js';

const OPTIONS: TaskTableOptions = {
  defaultTtlMs: 10_000,
  maxTtlMs: 60_000,
  maxTasks: 3,
  pollIntervalMs: 1000,
  expiryCheckMs: 1000,
};

/** Pages bounded by count only. */
const everything = { after: undefined, limit: 10, maxBytes: Number.POSITIVE_INFINITY };
const twoAtATime = { limit: 2, maxBytes: Number.POSITIVE_INFINITY };

function setup(options: Partial<TaskTableOptions> = {}) {
  const router = new Router({ ...DEFAULT_ROUTER_OPTIONS, retentionMs: 1000 }, () => {});
  let ids = 0;
  const tasks = new TaskTable({ ...OPTIONS, ...options }, () => `task-${++ids}`);
  router.observeEnds((ended, now) => tasks.streamEnded(ended, now));
  const streamOf = (token: string | number) => router.get(token);
  const create = (token: string, now: number, ttlMs?: number) => {
    const outcome = tasks.create(token, ttlMs, streamOf, now);
    if (!outcome.ok || outcome.task === undefined) throw new Error('not created');
    return outcome.task;
  };
  return { router, tasks, streamOf, create };
}

describe('TaskTable', () => {
  it('is working while the stream runs and completed on done ok, with the final summary', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('job', 0);
    expect(task).toMatchObject({ status: 'working', ttlMs: 10_000, pollIntervalMs: 1000 });
    expect(task.stream).toBeUndefined();
    router.publish(1, { v: 1, progressToken: 'job', progress: 5, total: 10 }, 10);
    expect(tasks.get(task.taskId, streamOf, 20)).toMatchObject({
      status: 'working',
      stream: { state: 'active', last: { progress: 5, total: 10 } },
    });
    router.finish(1, { v: 1, progressToken: 'job', status: 'ok', message: 'all done' }, 30);
    // Kept past the router's retention: the task holds the stream's last summary itself.
    router.tick(5000);
    expect(router.get('job')).toBeUndefined();
    expect(tasks.get(task.taskId, streamOf, 5000)).toMatchObject({
      status: 'completed',
      updatedAt: 30,
      stream: { state: 'done', status: 'ok', message: 'all done', last: { progress: 5 } },
    });
  });

  it("keeps of a finished job everything but its last value's _meta, from the answer that saw the end on", () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('meta', 0);
    const _meta = { pad: 'x'.repeat(60_000) };
    router.publish(
      1,
      { v: 1, progressToken: 'meta', progress: 9, total: 10, message: 'step 9', _meta },
      10,
    );
    // While the job runs the task shows the stream as the router has it, _meta included.
    expect(tasks.get(task.taskId, streamOf, 20)?.stream?.last?._meta).toEqual(_meta);
    router.finish(1, { v: 1, progressToken: 'meta', status: 'error', message: 'disk full' }, 30);
    const kept = {
      status: 'failed',
      reason: 'disk full',
      stream: {
        state: 'done',
        status: 'error',
        message: 'disk full',
        startedAt: 10,
        updatedAt: 30,
        last: { progressToken: 'meta', progress: 9, total: 10, message: 'step 9' },
      },
    };
    // The same answer while the router still holds the stream (its summary has the _meta) and
    // once it forgot it.
    for (const now of [40, 5000]) {
      router.tick(now);
      const got = tasks.get(task.taskId, streamOf, now);
      expect(got, `at ${now}`).toMatchObject(kept);
      expect(got?.stream?.last, `at ${now}`).not.toHaveProperty('_meta');
      const listed = tasks.list(everything, streamOf, now).tasks[0];
      expect(listed?.stream?.last, `at ${now}`).not.toHaveProperty('_meta');
    }
    expect(router.get('meta')).toBeUndefined();
    expect(JSON.stringify(tasks.get(task.taskId, streamOf, 5000)).length).toBeLessThan(1000);
  });

  it('the task that sees its job end (create, cancel) already answers with what it keeps', () => {
    const { router, tasks, streamOf, create } = setup();
    const _meta = { pad: 'y'.repeat(1000) };
    router.publish(1, { v: 1, progressToken: 'ended', progress: 1, _meta }, 1);
    router.finish(1, { v: 1, progressToken: 'ended', status: 'ok' }, 2);
    const created = create('ended', 3);
    expect(created).toMatchObject({ status: 'completed', stream: { last: { progress: 1 } } });
    expect(created.stream?.last).not.toHaveProperty('_meta');
    const running = create('running', 4);
    router.publish(2, { v: 1, progressToken: 'running', progress: 2, _meta }, 5);
    const cancelled = tasks.cancel(running.taskId, 'enough', streamOf, 6);
    expect(cancelled).toMatchObject({
      wasWorking: true,
      task: { status: 'cancelled', stream: { state: 'active', last: { progress: 2 } } },
    });
    expect(cancelled?.task.stream?.last).not.toHaveProperty('_meta');
  });

  it('fails on done error and on abandoned, with the reason', () => {
    const { router, tasks, streamOf, create } = setup();
    const failing = create('bad', 0);
    const left = create('left', 0);
    router.publish(1, { v: 1, progressToken: 'bad', progress: 1 }, 1);
    router.publish(2, { v: 1, progressToken: 'left', progress: 1 }, 1);
    router.finish(1, { v: 1, progressToken: 'bad', status: 'error', message: 'disk full' }, 2);
    router.abandon('left', 'the host went away', 3);
    expect(tasks.get(failing.taskId, streamOf, 4)).toMatchObject({
      status: 'failed',
      reason: 'disk full',
    });
    expect(tasks.get(left.taskId, streamOf, 4)).toMatchObject({
      status: 'failed',
      reason: 'the host went away',
    });
  });

  it('cancels a working task once, and a terminal task stays as it is', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('c', 0);
    router.publish(1, { v: 1, progressToken: 'c', progress: 1 }, 1);
    expect(tasks.cancel(task.taskId, 'enough', streamOf, 2)).toMatchObject({
      wasWorking: true,
      task: { status: 'cancelled', reason: 'enough' },
    });
    router.finish(1, { v: 1, progressToken: 'c', status: 'ok' }, 3);
    expect(tasks.get(task.taskId, streamOf, 4)).toMatchObject({ status: 'cancelled' });
    expect(tasks.cancel(task.taskId, undefined, streamOf, 5)?.wasWorking).toBe(false);
  });

  it('a task cancelled before its stream appeared keeps no stream: a later stream on its token is not its', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('later', 0);
    expect(tasks.cancel(task.taskId, 'not needed', streamOf, 1)).toMatchObject({
      wasWorking: true,
      task: { status: 'cancelled', reason: 'not needed' },
    });
    // A worker starts on the token afterwards (or another job reuses it), and ends.
    router.publish(1, { v: 1, progressToken: 'later', progress: 7, total: 10, message: 'x' }, 5);
    expect(router.get('later')).toBeDefined();
    const cancelled = { status: 'cancelled', reason: 'not needed', updatedAt: 1 };
    const got = tasks.get(task.taskId, streamOf, 6);
    expect(got).toMatchObject(cancelled);
    expect(got?.stream).toBeUndefined();
    const listed = tasks.list(everything, streamOf, 6).tasks[0];
    expect(listed).toMatchObject(cancelled);
    expect(listed?.stream).toBeUndefined();
    const again = tasks.cancel(task.taskId, undefined, streamOf, 7);
    expect(again).toMatchObject({ wasWorking: false, task: cancelled });
    expect(again?.task.stream).toBeUndefined();
    router.finish(1, { v: 1, progressToken: 'later', status: 'ok', message: 'all done' }, 8);
    const ended = tasks.get(task.taskId, streamOf, 9);
    expect(ended).toMatchObject(cancelled);
    expect(ended?.stream).toBeUndefined();
  });

  it('takes the outcome of a stream that ended before the task was created', () => {
    const { router, create } = setup();
    router.publish(1, { v: 1, progressToken: 'early', progress: 1 }, 1);
    router.finish(1, { v: 1, progressToken: 'early', status: 'cancelled' }, 2);
    expect(create('early', 3)).toMatchObject({ status: 'cancelled', updatedAt: 3 });
  });

  it('forgets a task whose job never started at its TTL, capped at the maximum', () => {
    const { tasks, streamOf, create } = setup();
    const short = create('a', 0, 500);
    const long = create('b', 0, 10_000_000);
    expect(long.ttlMs).toBe(60_000);
    expect(tasks.get(short.taskId, streamOf, 499)).toBeDefined();
    expect(tasks.get(short.taskId, streamOf, 500)).toBeUndefined();
    expect(tasks.get(long.taskId, streamOf, 59_999)).toBeDefined();
    expect(tasks.get(long.taskId, streamOf, 60_000)).toBeUndefined();
    expect(tasks.size).toBe(0);
  });

  it('keeps a task whose job runs past its TTL, reporting what it keeps, then its TTL after the end', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('long', 0, 500);
    expect(task.ttlMs).toBe(500);
    router.publish(1, { v: 1, progressToken: 'long', progress: 1 }, 100);
    // Asked about now and then: kept, and promised its TTL from each answer.
    expect(tasks.get(task.taskId, streamOf, 450)).toMatchObject({ status: 'working', ttlMs: 950 });
    router.publish(1, { v: 1, progressToken: 'long', progress: 2 }, 900);
    expect(tasks.get(task.taskId, streamOf, 1000)).toMatchObject({
      status: 'working',
      ttlMs: 1500,
    });
    // Not asked about for a long while (no update either): kept while the stream is active.
    expect(tasks.list(everything, streamOf, 5000).tasks).toHaveLength(1);
    expect(tasks.get(task.taskId, streamOf, 9000)).toMatchObject({ ttlMs: 9500 });
    router.finish(1, { v: 1, progressToken: 'long', status: 'ok' }, 10_000);
    expect(tasks.get(task.taskId, streamOf, 10_100)).toMatchObject({
      status: 'completed',
      updatedAt: 10_000,
      ttlMs: 10_500,
    });
    expect(tasks.get(task.taskId, streamOf, 10_499)).toBeDefined();
    expect(tasks.get(task.taskId, streamOf, 10_500)).toBeUndefined();
  });

  it('keeps a task whose job ended unasked past its TTL: its TTL counts from the end', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('quiet', 0, 500);
    router.publish(1, { v: 1, progressToken: 'quiet', progress: 1 }, 100);
    router.finish(1, { v: 1, progressToken: 'quiet', status: 'error', message: 'oom' }, 2000);
    expect(tasks.get(task.taskId, streamOf, 2400)).toMatchObject({
      status: 'failed',
      reason: 'oom',
      ttlMs: 2500,
    });
    expect(tasks.get(task.taskId, streamOf, 2500)).toBeUndefined();
  });

  it('forgets a task whose token only has subscribers waiting, and is not brought back by a job that starts after', () => {
    const { router, tasks, streamOf, create } = setup();
    const task = create('typo', 0, 500);
    router.subscribe(1, { progressToken: 'typo', minIntervalMs: 0 }, 10);
    expect(router.get('typo')?.state).toBe('waiting');
    expect(tasks.get(task.taskId, streamOf, 400)).toMatchObject({ status: 'working', ttlMs: 500 });
    // A worker starts on the token after the TTL passed, before anyone asked: not the task's.
    router.publish(2, { v: 1, progressToken: 'typo', progress: 1 }, 600);
    expect(tasks.get(task.taskId, streamOf, 700)).toBeUndefined();
    const other = create('typo-ended', 0, 500);
    router.publish(3, { v: 1, progressToken: 'typo-ended', progress: 1 }, 600);
    router.finish(3, { v: 1, progressToken: 'typo-ended', status: 'ok' }, 650);
    expect(tasks.get(other.taskId, streamOf, 651)).toBeUndefined();
    expect(tasks.size).toBe(0);
  });

  it('says when a TTL may first pass (none held: never), no sooner than expiryCheckMs after its last scan', () => {
    const { router, tasks, streamOf, create } = setup();
    expect(tasks.nextExpiryAt()).toBe(Number.POSITIVE_INFINITY);
    create('later', 0, 5000);
    create('sooner', 100, 500);
    expect(tasks.nextExpiryAt()).toBe(600);
    tasks.prune(streamOf, 600);
    expect(tasks.size).toBe(1);
    expect(tasks.nextExpiryAt()).toBe(5000);
    // A job that runs past its TTL keeps its task on, and each scan pushes the next one no
    // sooner than expiryCheckMs (1000) away.
    create('runs', 700, 1);
    router.publish(1, { v: 1, progressToken: 'runs', progress: 1 }, 700);
    expect(tasks.nextExpiryAt()).toBe(1600);
    tasks.prune(streamOf, 1600);
    expect(tasks.size).toBe(2);
    expect(tasks.nextExpiryAt()).toBe(2600);
  });

  it('at the cap, evicts the oldest terminal task, and refuses when every task is working', () => {
    const { router, tasks, streamOf, create } = setup();
    const first = create('x', 0);
    create('y', 0);
    create('z', 0);
    expect(tasks.create('w', undefined, streamOf, 1)).toMatchObject({
      ok: false,
      code: 'too_many_tasks',
    });
    router.publish(1, { v: 1, progressToken: 'x', progress: 1 }, 1);
    router.finish(1, { v: 1, progressToken: 'x', status: 'ok' }, 2);
    expect(tasks.create('w', undefined, streamOf, 3).ok).toBe(true);
    expect(tasks.get(first.taskId, streamOf, 3)).toBeUndefined();
    expect(tasks.size).toBe(3);
  });

  it('lists in creation order, page by page', () => {
    const { tasks, streamOf, create } = setup();
    const ids = ['p', 'q', 'r'].map((token) => create(token, 0).taskId);
    const first = tasks.list({ ...twoAtATime, after: undefined }, streamOf, 1);
    expect(first.tasks.map((task) => task.taskId)).toEqual(ids.slice(0, 2));
    const second = tasks.list({ ...twoAtATime, after: first.next }, streamOf, 1);
    expect(second.tasks.map((task) => task.taskId)).toEqual(ids.slice(2));
    expect(second.next).toBeUndefined();
  });
});

describe('keptSummary', () => {
  const summary: StreamSummary = {
    progressToken: 't',
    state: 'done',
    status: 'ok',
    message: 'finished',
    subscribers: 2,
    startedAt: 1,
    updatedAt: 2,
    last: { progressToken: 't', progress: 3, total: 4, message: 'm', _meta: { big: [1, 2, 3] } },
  };

  it("is the summary without its last value's _meta, leaving the summary it was given as it was", () => {
    const { _meta, ...last } = summary.last ?? { progressToken: 't', progress: 0 };
    expect(keptSummary(summary)).toEqual({ ...summary, last });
    expect(summary.last?._meta).toEqual({ big: [1, 2, 3] });
  });

  it("leaves every MCP answer about the task as it was: tasks/get's Task, tasks/result's result", () => {
    for (const status of ['completed', 'failed', 'cancelled'] as const) {
      const record: TaskRecord = {
        taskId: 'id',
        progressToken: 't',
        status,
        ...(status === 'completed' ? {} : { reason: 'why' }),
        createdAt: 0,
        updatedAt: 2,
        ttlMs: 1000,
        pollIntervalMs: 1000,
        stream: summary,
      };
      const kept = { ...record, stream: keptSummary(summary) };
      expect(mcpTask(kept), status).toEqual(mcpTask(record));
      expect(taskToolResult(kept), status).toEqual(taskToolResult(record));
    }
  });

  it('is the summary itself when there is no _meta to leave out', () => {
    const plain: StreamSummary = { ...summary, last: { progressToken: 't', progress: 3 } };
    expect(keptSummary(plain)).toBe(plain);
    const none: StreamSummary = {
      progressToken: 't',
      state: 'done',
      subscribers: 0,
      startedAt: 1,
      updatedAt: 1,
    };
    expect(keptSummary(none)).toBe(none);
  });
});
