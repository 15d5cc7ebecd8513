/**
 * watch_progress as an MCP task (2025-11-25, SEP-1686) on the SDK 1.x server. The task's state
 * is the daemon's (task/create, task/get, task/cancel, task/list), so the SDK's TaskStore here
 * is only a view of it: any `mcp-progress mcp` process, or /mcp session, answers for any task.
 * The session that created a task also forwards the stream's progress on the caller's token
 * until the task is terminal, and then sends one notifications/tasks/status.
 */
import type {
  CreateTaskOptions,
  TaskStore,
} from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Request, RequestId, Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { ProgressToken } from '../protocol/frames.js';
import { type TaskRecord, TERMINAL_TASK_STATUSES } from '../protocol/tasks.js';
import { MAX_TASK_TTL_MS } from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import {
  describeStream,
  describeWatch,
  fitStatusMessage,
  show,
  view,
  watchResult,
} from './describe.js';
import { type Forwarding, forwardOnOwnSession, outsideRequest } from './forward.js';
import type { SendProgress } from './progress-sends.js';
import type { ProgressSource } from './progress-source.js';

/** The task's statusMessage: the job's state in the words of the tools, with the failure's reason. */
export function statusMessage(record: TaskRecord): string {
  const stream = record.stream;
  let text =
    stream === undefined || stream.state === 'waiting'
      ? `Job ${show(record.progressToken)} has not started yet`
      : describeStream(view(stream));
  if (record.status === 'cancelled' && stream?.state !== 'done') {
    text += `; cancelled${record.reason === undefined ? '' : `: ${record.reason}`}`;
  } else if (
    record.status === 'failed' &&
    stream?.state !== 'done' &&
    record.reason !== undefined
  ) {
    text += `; failed: ${record.reason}`;
  }
  return fitStatusMessage(text);
}

/** When the task last changed (ms since the epoch): its status, or its stream. */
export function taskChangedAt(record: TaskRecord): number {
  return Math.max(record.updatedAt, record.stream?.updatedAt ?? 0);
}

/** The daemon's task as MCP's Task. */
export function mcpTask(record: TaskRecord): Task {
  const changedAt = taskChangedAt(record);
  return {
    taskId: record.taskId,
    status: record.status,
    ttl: record.ttlMs,
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(changedAt).toISOString(),
    pollInterval: record.pollIntervalMs,
    statusMessage: statusMessage(record),
  };
}

/**
 * What tasks/result answers: the result a plain watch_progress call returns for the same
 * stream (one that ended; or, for a task cancelled while the job ran, the state at the cancel).
 */
export function taskToolResult(record: TaskRecord) {
  const stream = record.stream;
  const done =
    stream?.state === 'done' && stream.status !== undefined
      ? {
          progressToken: record.progressToken,
          status: stream.status,
          ...(stream.message === undefined ? {} : { message: stream.message }),
        }
      : undefined;
  const result = watchResult(record.progressToken, undefined, done, stream);
  return {
    content: [{ type: 'text' as const, text: describeWatch(result) }],
    structuredContent: result,
  };
}

export function unknownTask(taskId: string): BridgeError {
  return new BridgeError(
    'invalid_option',
    `no task ${JSON.stringify(taskId)}: it was never created or its TTL passed (tasks/list shows the tasks the daemon keeps)`,
  );
}

/** The progressToken argument of a watch_progress tools/call, as the SDK handed it over. */
function watchedToken(request: Request): ProgressToken {
  const args = (request.params as { arguments?: { progressToken?: unknown } } | undefined)
    ?.arguments;
  const token = args?.progressToken;
  if (typeof token === 'string' || (typeof token === 'number' && Number.isInteger(token)))
    return token;
  throw new BridgeError(
    'invalid_option',
    'watch_progress as a task needs arguments.progressToken: a string or an integer',
  );
}

/**
 * Sends one notification of this server, not within a request (the task outlives its call);
 * with `relatedTask`, its _meta names the task (io.modelcontextprotocol/related-task).
 */
export type SendTaskNotification = (
  notification: { method: string; params: Record<string, unknown> },
  relatedTask: string | undefined,
) => Promise<void>;

/**
 * The SDK's TaskStore over the daemon's task table, for one MCP server (one client session).
 * storeTaskResult is not needed: a task's result is its stream's outcome, which the daemon keeps.
 */
export class DaemonTaskStore implements TaskStore {
  readonly #source: ProgressSource;
  readonly #send: SendTaskNotification;
  /** The forwarding of each task this session created, while it runs. */
  readonly #followers = new Map<string, Forwarding>();

  constructor(source: ProgressSource, send: SendTaskNotification) {
    this.#source = source;
    this.#send = send;
  }

  async createTask(
    params: CreateTaskOptions,
    _requestId: RequestId,
    request: Request,
  ): Promise<Task> {
    const ttl = params.ttl === null || params.ttl === undefined ? undefined : params.ttl;
    const record = await this.#source.createTask({
      progressToken: watchedToken(request),
      ...(ttl === undefined
        ? {}
        : { ttlMs: Math.max(1, Math.min(Math.round(ttl), MAX_TASK_TTL_MS)) }),
    });
    return mcpTask(record);
  }

  async getTask(taskId: string): Promise<Task | null> {
    const record = await this.#source.getTask(taskId);
    return record === undefined ? null : mcpTask(record);
  }

  async storeTaskResult(): Promise<void> {}

  async getTaskResult(taskId: string): Promise<Result> {
    const record = await this.#source.getTask(taskId);
    if (record === undefined) throw unknownTask(taskId);
    return taskToolResult(record);
  }

  /** Only a cancel changes a task from outside: the daemon derives every other status from the stream. */
  async updateTaskStatus(taskId: string, status: Task['status'], message?: string): Promise<void> {
    if (status !== 'cancelled') return;
    // Forwarding stops first: no progress goes out for a task once it is cancelled.
    await this.#unfollow(taskId);
    const { task } = await this.#source.cancelTask(taskId, message);
    if (task === undefined) throw unknownTask(taskId);
    await this.#sendStatus(task);
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await this.#source.listTasks(cursor === undefined ? {} : { cursor });
    const tasks = page.tasks.map(mcpTask);
    return page.nextCursor === undefined ? { tasks } : { tasks, nextCursor: page.nextCursor };
  }

  /**
   * Forwards the task's stream on the caller's token (`label`; none: progress is not sent)
   * until the stream ends, then tells the client the task's final status.
   */
  async follow(
    task: Task,
    token: ProgressToken,
    label: ProgressToken | undefined,
    minIntervalMs: number,
  ): Promise<void> {
    if (TERMINAL_TASK_STATUSES.has(task.status as TaskRecord['status'])) return;
    const send: SendProgress = (notification) =>
      this.#send(notification as { method: string; params: Record<string, unknown> }, task.taskId);
    const forwarding = await forwardOnOwnSession(
      this.#source,
      { progressToken: token, minIntervalMs },
      outsideRequest(label, label === undefined ? undefined : send),
    );
    this.#followers.set(task.taskId, forwarding);
    forwarding.ended
      .then(async (end) => {
        if (this.#followers.get(task.taskId) !== forwarding) return;
        this.#followers.delete(task.taskId);
        await forwarding.stop();
        if (end !== 'done') return;
        const record = await this.#source.getTask(task.taskId);
        if (record !== undefined) await this.#sendStatus(record);
      })
      .catch(() => {});
  }

  /** Stops forwarding for every task of this session; the tasks go on in the daemon. */
  async close(): Promise<void> {
    await Promise.all([...this.#followers.keys()].map((taskId) => this.#unfollow(taskId)));
  }

  async #unfollow(taskId: string): Promise<void> {
    const forwarding = this.#followers.get(taskId);
    if (forwarding === undefined) return;
    this.#followers.delete(taskId);
    await forwarding.stop();
  }

  /** One notifications/tasks/status per change of status: a task changes once, when it ends. */
  async #sendStatus(record: TaskRecord): Promise<void> {
    await this.#send(
      { method: 'notifications/tasks/status', params: { ...mcpTask(record) } },
      undefined,
    ).catch(() => {});
  }
}
