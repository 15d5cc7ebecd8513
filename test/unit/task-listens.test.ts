/**
 * The task listen streams of the tasks extension (subscriptions/listen with taskIds) over a
 * source that stands in for the daemon, on fake timers: what a listen holds for a client that
 * stopped reading while its task keeps changing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NotificationHandler } from '../../src/gateway-client/gateway-client.js';
import type { ProgressSource } from '../../src/mcp/progress-source.js';
import {
  detailedTask,
  type ListenMessage,
  TASK_STATUS_NOTIFICATION,
  TaskListens,
} from '../../src/mcp/tasks-extension.js';
import { DONE_METHOD, PROGRESS_METHOD } from '../../src/protocol/notifications.js';
import type { TaskRecord } from '../../src/protocol/tasks.js';
import { MAX_STDIO_TASK_LISTENS, TASK_POLL_INTERVAL_MS } from '../../src/shared/defaults.js';
import { BridgeError } from '../../src/shared/errors.js';

/** One job and its task, as the daemon would answer for them; advance() is one more update. */
function job() {
  let progress = 0;
  let status: TaskRecord['status'] = 'working';
  let notify: NotificationHandler | undefined;
  let onLost: ((error: BridgeError) => void) | undefined;
  let lost = false;
  const record = (): TaskRecord => ({
    taskId: 'task-1',
    progressToken: 'job',
    status,
    createdAt: 0,
    updatedAt: status === 'working' ? 0 : progress,
    ttlMs: 600_000,
    pollIntervalMs: TASK_POLL_INTERVAL_MS,
    stream: {
      progressToken: 'job',
      last: { progressToken: 'job', progress, total: 1_000_000 },
      state: status === 'working' ? 'active' : 'done',
      ...(status === 'working' ? {} : { status: 'ok' as const }),
      subscribers: 1,
      startedAt: 0,
      updatedAt: progress,
    },
  });
  const unused = () => Promise.reject(new Error('not used by task listens'));
  const source: ProgressSource = {
    openSession: async () => ({
      subscribe: async (_params, handler, onError) => {
        notify = handler;
        onLost = onError;
        return { unsubscribe: async () => {} };
      },
      close: async () => {},
    }),
    getTask: async (taskId) => {
      if (lost) throw new BridgeError('disconnected', 'the gateway connection dropped');
      return taskId === 'task-1' ? record() : undefined;
    },
    list: unused,
    get: unused,
    cancel: unused,
    createTask: unused,
    cancelTask: unused,
    listTasks: unused,
    close: async () => {},
  };
  return {
    source,
    record,
    advance(): void {
      progress++;
      notify?.({
        jsonrpc: '2.0',
        method: PROGRESS_METHOD,
        params: { progressToken: 'job', progress, total: 1_000_000 },
      });
    },
    /** The daemon went away and did not come back: the subscription ends with gateway_lost. */
    lose(): void {
      lost = true;
      onLost?.(new BridgeError('gateway_lost', 'no daemon came back within 30000 ms'));
    },
    finish(): void {
      status = 'completed';
      notify?.({
        jsonrpc: '2.0',
        method: DONE_METHOD,
        params: { progressToken: 'job', status: 'ok' },
      });
    },
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('TaskListens', () => {
  it('holds one message per task for a client that stopped reading, however often the task changes, then tells the newest state and ends', async () => {
    const task = job();
    const listens = new TaskListens(task.source);
    const written: ListenMessage[] = [];
    const waiting: Array<() => void> = [];
    let reading = true;
    // A client that stops reading: each write then waits, as for 'drain' that does not come.
    const write = (message: ListenMessage): Promise<void> => {
      written.push(message);
      return reading ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve));
    };
    await listens.listen({ id: 7, taskIds: ['task-1'], declared: true }, write);
    expect(written.map((message) => message.method)).toEqual([
      'notifications/subscriptions/acknowledged',
      TASK_STATUS_NOTIFICATION,
    ]);

    reading = false;
    // 1000 updates of the stream and 100 poll intervals, every one a new statusMessage.
    for (let update = 1; update <= 1000; update++) {
      task.advance();
      if (update % 10 === 0) await vi.advanceTimersByTimeAsync(TASK_POLL_INTERVAL_MS);
    }
    expect(written.length - 2).toBe(1);
    expect(waiting).toHaveLength(1);

    // Reading again: the one that waited, then the newest state, not each one in between.
    reading = true;
    waiting.shift()?.();
    await vi.waitFor(() => expect(written).toHaveLength(4));
    const newest = detailedTask(task.record()).statusMessage;
    expect(written[3]?.params).toMatchObject({ statusMessage: newest });

    task.finish();
    await vi.waitFor(() => expect(written.at(-1)?.result).toBeDefined());
    expect(written.at(-2)?.params).toMatchObject({ status: 'completed' });
    expect(written).toHaveLength(6);
    expect(waiting).toHaveLength(0);
  });

  it('writes a cancel made in this process to a listen whose client stopped reading before changed() returns, and waits for no write', async () => {
    const { task, listens, written } = await stalledListen(7);

    const cancelled: TaskRecord = { ...task.record(), status: 'cancelled', updatedAt: 1 };
    // Nothing to await: the cancel's answer follows at once, after what was written here.
    const returned: unknown = listens.changed(cancelled);
    expect(returned).toBeUndefined();
    expect(written).toHaveLength(4);
    expect(written[3]?.params).toMatchObject({ taskId: 'task-1', status: 'cancelled' });
  });

  it('ends a listen with an error naming the task and gateway_lost when its daemon is gone for good', async () => {
    const task = job();
    const listens = new TaskListens(task.source);
    const written: ListenMessage[] = [];
    await listens.listen({ id: 9, taskIds: ['task-1'], declared: true }, async (message) => {
      written.push(message);
    });
    expect(written).toHaveLength(2);
    task.lose();
    await vi.waitFor(() => expect(written).toHaveLength(3));
    expect(written[2]).toMatchObject({
      id: 9,
      error: {
        code: -32000,
        message: expect.stringContaining('"task-1"'),
        data: { code: 'gateway_lost', taskIds: ['task-1'] },
      },
    });
    expect(written[2]?.error?.message).toContain('no daemon came back');
    // Nothing after, however long: the poll stopped with the follow.
    await vi.advanceTimersByTimeAsync(10 * TASK_POLL_INTERVAL_MS);
    expect(written).toHaveLength(3);
  });

  it('answers a listen whose tasks cannot be asked about (no daemon) with an error naming why, and holds no place for it', async () => {
    const task = job();
    task.lose();
    const listens = new TaskListens(task.source, true);
    const written: ListenMessage[] = [];
    await listens.listen({ id: 4, taskIds: ['task-1'], declared: true }, async (message) => {
      written.push(message);
    });
    expect(written).toEqual([
      {
        jsonrpc: '2.0',
        id: 4,
        error: {
          code: -32000,
          message: expect.stringContaining('the gateway connection dropped'),
          data: { code: 'disconnected', taskIds: ['task-1'] },
        },
      },
    ]);
    // Its place was given back: as many more as the cap allows, and one over, are answered the same.
    for (let id = 5; id <= 5 + MAX_STDIO_TASK_LISTENS; id++) {
      await listens.listen({ id, taskIds: ['task-1'], declared: true }, async (message) => {
        written.push(message);
      });
    }
    expect(written.map((message) => message.error?.data)).toEqual(
      written.map(() => ({ code: 'disconnected', taskIds: ['task-1'] })),
    );
  });

  it('close() writes each listen its result, that of a client that stopped reading too, and waits for none to be read', async () => {
    const { listens, written } = await stalledListen('stalled');
    // Settles though the client reads nothing more (a hang fails the test).
    await listens.close();
    expect(written).toHaveLength(4);
    expect(written[3]).toMatchObject({ id: 'stalled', result: { resultType: 'complete' } });
  });
});

/**
 * A listen of one task whose client read what it was told at first (the task, then a change),
 * then stopped reading: each later write waits for a 'drain' that does not come.
 */
async function stalledListen(id: string | number) {
  const task = job();
  const listens = new TaskListens(task.source);
  const written: ListenMessage[] = [];
  let reading = true;
  const write = (message: ListenMessage): Promise<void> => {
    written.push(message);
    return reading ? Promise.resolve() : new Promise(() => {});
  };
  await listens.listen({ id, taskIds: ['task-1'], declared: true }, write);
  reading = false;
  task.advance();
  await vi.waitFor(() => expect(written).toHaveLength(3));
  return { task, listens, written };
}
