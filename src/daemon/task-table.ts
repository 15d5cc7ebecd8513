/**
 * The daemon's MCP tasks: each watches one stream and follows it (working, then completed on
 * done ok, failed on done error or abandoned, cancelled), and keeps that outcome for its TTL
 * whichever MCP process asks. Pure and synchronous: stream summaries and a clock in.
 */
import type { ProgressToken, StreamSummary } from '../protocol/frames.js';
import type { TaskRecord, TaskStatus } from '../protocol/tasks.js';
import type { Outcome } from './router.js';

export interface TaskTableOptions {
  readonly defaultTtlMs: number;
  readonly maxTtlMs: number;
  readonly maxTasks: number;
  readonly pollIntervalMs: number;
}

interface Task {
  readonly taskId: string;
  readonly progressToken: ProgressToken;
  readonly createdAt: number;
  readonly ttlMs: number;
  readonly order: number;
  status: TaskStatus;
  reason: string | undefined;
  updatedAt: number;
  /**
   * The stream's summary when the task left working (the router forgets done streams sooner);
   * undefined once terminal: it had none then, and reports none.
   */
  final: StreamSummary | undefined;
}

export interface TaskPage {
  readonly tasks: TaskRecord[];
  /** The order to continue after, when more follow. */
  readonly next: number | undefined;
}

/** Where a task's status comes from: what the stream's end says. */
function statusOf(stream: StreamSummary): { status: TaskStatus; reason?: string } | undefined {
  if (stream.state !== 'done') return undefined;
  switch (stream.status) {
    case 'ok':
      return { status: 'completed' };
    case 'cancelled':
      return stream.message === undefined
        ? { status: 'cancelled' }
        : { status: 'cancelled', reason: stream.message };
    default:
      return {
        status: 'failed',
        reason:
          stream.message ??
          (stream.status === 'abandoned' ? 'the worker abandoned the stream' : 'the worker failed'),
      };
  }
}

export class TaskTable {
  readonly #options: TaskTableOptions;
  readonly #newId: () => string;
  /** Oldest first (creation order, which is also expiry order only per TTL: pruning scans). */
  readonly #tasks = new Map<string, Task>();
  readonly #byToken = new Map<ProgressToken, Set<Task>>();
  #nextOrder = 0;

  constructor(options: TaskTableOptions, newId: () => string) {
    this.#options = options;
    this.#newId = newId;
  }

  get size(): number {
    return this.#tasks.size;
  }

  /**
   * A task watching `token`, whose stream is `stream` now (undefined: none yet). At the cap
   * the oldest terminal task makes room; with none, too_many_tasks.
   */
  create(
    token: ProgressToken,
    requestedTtlMs: number | undefined,
    stream: StreamSummary | undefined,
    now: number,
  ): Outcome<'too_many_tasks'> & { task?: TaskRecord } {
    this.prune(now);
    if (this.#tasks.size >= this.#options.maxTasks && !this.#evictOldestTerminal()) {
      return {
        ok: false,
        code: 'too_many_tasks',
        message: `the daemon holds ${this.#tasks.size} tasks that are still working, its cap: wait for some to finish or cancel them (tasks/cancel)`,
      };
    }
    const task: Task = {
      taskId: this.#newId(),
      progressToken: token,
      createdAt: now,
      ttlMs: Math.min(requestedTtlMs ?? this.#options.defaultTtlMs, this.#options.maxTtlMs),
      order: this.#nextOrder++,
      status: 'working',
      reason: undefined,
      updatedAt: now,
      final: undefined,
    };
    this.#tasks.set(task.taskId, task);
    let watching = this.#byToken.get(token);
    if (watching === undefined) {
      watching = new Set();
      this.#byToken.set(token, watching);
    }
    watching.add(task);
    if (stream !== undefined) this.#follow(task, stream, now);
    return { ok: true, task: this.#record(task, stream) };
  }

  /** The task now, with `stream` the router's summary of its token (if it holds one). */
  get(
    taskId: string,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): TaskRecord | undefined {
    const task = this.#live(taskId, now);
    if (task === undefined) return undefined;
    const stream = this.#streamOf(task, streamOf);
    if (stream !== undefined) this.#follow(task, stream, now);
    return this.#record(task, stream);
  }

  /**
   * Marks a working task cancelled; returns it and whether it was working (then the caller tells
   * the workers). A terminal task stays as it is.
   */
  cancel(
    taskId: string,
    reason: string | undefined,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): { task: TaskRecord; wasWorking: boolean } | undefined {
    const task = this.#live(taskId, now);
    if (task === undefined) return undefined;
    const stream = this.#streamOf(task, streamOf);
    if (stream !== undefined) this.#follow(task, stream, now);
    const wasWorking = task.status === 'working';
    if (wasWorking) {
      this.#settle(
        task,
        'cancelled',
        reason ?? 'cancelled by the client (tasks/cancel)',
        now,
        stream,
      );
    }
    return { task: this.#record(task, stream), wasWorking };
  }

  /** A stream ended: its tasks that are still working take its outcome. */
  streamEnded(stream: StreamSummary, now: number): void {
    for (const task of this.#byToken.get(stream.progressToken) ?? [])
      this.#follow(task, stream, now);
  }

  /** Tasks in creation order after `after`, at most `limit`. */
  list(
    after: number | undefined,
    limit: number,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): TaskPage {
    this.prune(now);
    const tasks: TaskRecord[] = [];
    for (const task of this.#tasks.values()) {
      if (after !== undefined && task.order <= after) continue;
      if (tasks.length === limit) return { tasks, next: after };
      const stream = this.#streamOf(task, streamOf);
      if (stream !== undefined) this.#follow(task, stream, now);
      tasks.push(this.#record(task, stream));
      after = task.order;
    }
    return { tasks, next: undefined };
  }

  /** Forgets the tasks whose TTL has passed. */
  prune(now: number): void {
    for (const task of this.#tasks.values()) {
      if (task.createdAt + task.ttlMs <= now) this.#remove(task);
    }
  }

  #live(taskId: string, now: number): Task | undefined {
    const task = this.#tasks.get(taskId);
    if (task === undefined) return undefined;
    if (task.createdAt + task.ttlMs > now) return task;
    this.#remove(task);
    return undefined;
  }

  #follow(task: Task, stream: StreamSummary, now: number): void {
    if (task.status !== 'working') return;
    const outcome = statusOf(stream);
    if (outcome !== undefined) this.#settle(task, outcome.status, outcome.reason, now, stream);
  }

  #settle(
    task: Task,
    status: TaskStatus,
    reason: string | undefined,
    now: number,
    stream: StreamSummary | undefined,
  ): void {
    task.status = status;
    task.reason = reason;
    task.updatedAt = now;
    task.final = stream;
  }

  /**
   * The stream a task reports: the token's while it is working, and from then on only what it
   * kept (none, when it left working before a stream appeared): a stream that starts on its token
   * afterwards, a reuse of the token included, is another job's.
   */
  #streamOf(
    task: Task,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
  ): StreamSummary | undefined {
    return task.status === 'working' ? streamOf(task.progressToken) : task.final;
  }

  #evictOldestTerminal(): boolean {
    for (const task of this.#tasks.values()) {
      if (task.status !== 'working') {
        this.#remove(task);
        return true;
      }
    }
    return false;
  }

  #remove(task: Task): void {
    this.#tasks.delete(task.taskId);
    const watching = this.#byToken.get(task.progressToken);
    watching?.delete(task);
    if (watching?.size === 0) this.#byToken.delete(task.progressToken);
  }

  #record(task: Task, stream: StreamSummary | undefined): TaskRecord {
    const record: TaskRecord = {
      taskId: task.taskId,
      progressToken: task.progressToken,
      status: task.status,
      createdAt: Math.round(task.createdAt),
      updatedAt: Math.round(task.updatedAt),
      ttlMs: task.ttlMs,
      pollIntervalMs: this.#options.pollIntervalMs,
    };
    if (task.reason !== undefined) record.reason = task.reason;
    if (stream !== undefined) record.stream = stream;
    return record;
  }
}
