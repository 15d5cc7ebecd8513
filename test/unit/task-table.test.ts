/** The daemon's task table, fed by a real router: statuses follow the stream, TTL and cap hold. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { TaskTable, type TaskTableOptions } from '../../src/daemon/task-table.js';

const OPTIONS: TaskTableOptions = {
  defaultTtlMs: 10_000,
  maxTtlMs: 60_000,
  maxTasks: 3,
  pollIntervalMs: 1000,
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
