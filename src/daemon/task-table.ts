/**
 * The daemon's MCP tasks: each watches one stream and follows it (working, then completed on
 * done ok, failed on done error or abandoned, cancelled), and keeps that outcome for its TTL
 * whichever MCP process asks. Pure and synchronous: stream summaries and a clock in.
 *
 * How long a task is kept (docs/PROTOCOL.md 4.2.3): its TTL counts from its creation while its
 * job has not started, and from its end once it is terminal; while its job runs (its token's
 * stream is active) it is kept however long that takes. So a job longer than the TTL never loses
 * its task under its client, and a task on a token no worker ever publishes (a typo) still goes.
 * The TTL a task reports is what is kept so far: it is kept at least until createdAt + ttlMs.
 */
import type { ProgressToken, StreamSummary } from '../protocol/frames.js';
import type { TaskRecord, TaskStatus } from '../protocol/tasks.js';
import { fillPage, type PageBounds } from './list-page.js';
import type { Outcome } from './router.js';

export interface TaskTableOptions {
  readonly defaultTtlMs: number;
  readonly maxTtlMs: number;
  readonly maxTasks: number;
  readonly pollIntervalMs: number;
  /** The least time between two scans for tasks past their TTL (nextExpiryAt). */
  readonly expiryCheckMs: number;
}

interface Task {
  readonly taskId: string;
  readonly progressToken: ProgressToken;
  readonly createdAt: number;
  /** The TTL asked for (capped): how long the task is kept after its creation or its end. */
  readonly ttlMs: number;
  readonly order: number;
  /**
   * The task may be forgotten from then on: createdAt + ttlMs at first, then later while its job
   * runs (each look at it), and ttlMs after its end. Never moved earlier: it is what was reported.
   */
  keptUntil: number;
  status: TaskStatus;
  reason: string | undefined;
  updatedAt: number;
  /**
   * What the task keeps of its stream's summary when it left working (the router forgets done
   * streams sooner): keptSummary's, bounded; undefined when it had none then, and reports none.
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

/**
 * What a task keeps of its stream once it leaves working, for its TTL (up to 24 h, after the
 * router forgot the stream): the summary without the last value's `_meta`. That `_meta` is the
 * one part a frame does not bound but by its own size (up to a whole frame: 10000 tasks would
 * keep gigabytes); everything an MCP answer reads (progress, total, messages, status, times) is
 * kept, so what a task keeps is bounded by the token and message limits (MAX_LIVE_TASKS).
 */
export function keptSummary(stream: StreamSummary): StreamSummary {
  if (stream.last?._meta === undefined) return stream;
  const { _meta, ...last } = stream.last;
  return { ...stream, last };
}

export class TaskTable {
  readonly #options: TaskTableOptions;
  readonly #newId: () => string;
  /** Oldest first (creation order, which is also expiry order only per TTL: pruning scans). */
  readonly #tasks = new Map<string, Task>();
  readonly #byToken = new Map<ProgressToken, Set<Task>>();
  #nextOrder = 0;
  /**
   * No task may be forgotten before this: the least keptUntil as of the last scan, and of each
   * task created since. A task's keptUntil only moves later, so this is never late, only early
   * (a scan then finds nothing due), and costs nothing as tasks change.
   */
  #earliestKeptUntil = Number.POSITIVE_INFINITY;
  /** When the last scan (prune) ran. */
  #scannedAt = Number.NEGATIVE_INFINITY;

  constructor(options: TaskTableOptions, newId: () => string) {
    this.#options = options;
    this.#newId = newId;
  }

  get size(): number {
    return this.#tasks.size;
  }

  /**
   * When prune() may next have a task to forget (Infinity: none held): the earliest a TTL can
   * pass, but no sooner than options.expiryCheckMs after the last scan. The daemon prunes then, so
   * a task past its TTL leaves its memory within that bound however idle the daemon is.
   */
  nextExpiryAt(): number {
    if (this.#tasks.size === 0) return Number.POSITIVE_INFINITY;
    return Math.max(this.#earliestKeptUntil, this.#scannedAt + this.#options.expiryCheckMs);
  }

  /**
   * A task watching `token`, whose stream is `streamOf(token)` now (undefined: none yet). At the
   * cap the oldest terminal task makes room; with none, too_many_tasks.
   */
  create(
    token: ProgressToken,
    requestedTtlMs: number | undefined,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): Outcome<'too_many_tasks'> & { task?: TaskRecord } {
    // Tasks past their TTL make room first: the expiry timer may not have run yet.
    if (this.#tasks.size >= this.#options.maxTasks) this.prune(streamOf, now);
    if (this.#tasks.size >= this.#options.maxTasks && !this.#evictOldestTerminal()) {
      return {
        ok: false,
        code: 'too_many_tasks',
        message: `the daemon holds ${this.#tasks.size} tasks that are still working, its cap: wait for some to finish or cancel them (tasks/cancel)`,
      };
    }
    const ttlMs = Math.min(requestedTtlMs ?? this.#options.defaultTtlMs, this.#options.maxTtlMs);
    // Whole milliseconds, as reported: createdAt + ttlMs is then exactly when a new task may go.
    const createdAt = Math.round(now);
    const task: Task = {
      taskId: this.#newId(),
      progressToken: token,
      createdAt,
      ttlMs,
      keptUntil: createdAt + ttlMs,
      order: this.#nextOrder++,
      status: 'working',
      reason: undefined,
      updatedAt: now,
      final: undefined,
    };
    this.#tasks.set(task.taskId, task);
    this.#earliestKeptUntil = Math.min(this.#earliestKeptUntil, task.keptUntil);
    let watching = this.#byToken.get(token);
    if (watching === undefined) {
      watching = new Set();
      this.#byToken.set(token, watching);
    }
    watching.add(task);
    const stream = streamOf(token);
    if (stream !== undefined) this.#follow(task, stream, now);
    return { ok: true, task: this.#record(task, stream, now) };
  }

  /** The task now, with `stream` the router's summary of its token (if it holds one). */
  get(
    taskId: string,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): TaskRecord | undefined {
    const task = this.#live(taskId, streamOf, now);
    if (task === undefined) return undefined;
    const stream = this.#streamOf(task, streamOf);
    if (stream !== undefined) this.#follow(task, stream, now);
    return this.#record(task, stream, now);
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
    const task = this.#live(taskId, streamOf, now);
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
    return { task: this.#record(task, stream, now), wasWorking };
  }

  /**
   * A stream ended: its tasks that are still working take its outcome (a task whose TTL passed
   * before the stream started is gone: the job was not its).
   */
  streamEnded(stream: StreamSummary, now: number): void {
    for (const task of this.#byToken.get(stream.progressToken) ?? []) {
      if (this.#kept(task, () => stream, now)) this.#follow(task, stream, now);
      else this.#remove(task);
    }
  }

  /**
   * One page of tasks in creation order: after `bounds.after`, at most `bounds.limit`, and past
   * the first at most `bounds.maxBytes` of JSON (list-page.ts): a task carries its stream's summary,
   * up to a full-size frame written again, so a count alone would let a page reach hundreds of MB.
   */
  list(
    bounds: PageBounds,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): TaskPage {
    this.prune(streamOf, now);
    const page = fillPage(
      this.#tasks.values(),
      (task) => task.order,
      bounds,
      (task) => {
        const stream = this.#streamOf(task, streamOf);
        if (stream !== undefined) this.#follow(task, stream, now);
        return this.#record(task, stream, now);
      },
    );
    return { tasks: page.items, next: page.next };
  }

  /**
   * Forgets the tasks whose TTL has passed (a task whose job runs is kept), and learns when the
   * next may pass (nextExpiryAt).
   */
  prune(streamOf: (token: ProgressToken) => StreamSummary | undefined, now: number): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const task of this.#tasks.values()) {
      if (!this.#kept(task, streamOf, now)) this.#remove(task);
      else earliest = Math.min(earliest, task.keptUntil);
    }
    this.#earliestKeptUntil = earliest;
    this.#scannedAt = now;
  }

  #live(
    taskId: string,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): Task | undefined {
    const task = this.#tasks.get(taskId);
    if (task === undefined) return undefined;
    if (this.#kept(task, streamOf, now)) return task;
    this.#remove(task);
    return undefined;
  }

  /**
   * Whether the task is still kept at `now`. Past its keptUntil, a working task whose job started
   * before then (its token's stream is active, or has just ended) is kept on; the stream is only
   * asked for then, so a prune costs no stream lookup per task that is not due.
   */
  #kept(
    task: Task,
    streamOf: (token: ProgressToken) => StreamSummary | undefined,
    now: number,
  ): boolean {
    if (task.keptUntil > now) return true;
    if (task.status !== 'working' || !this.#runs(task, streamOf(task.progressToken))) return false;
    task.keptUntil = now + task.ttlMs;
    return true;
  }

  /** Whether `stream` is the task's job, started while the task was kept. */
  #runs(task: Task, stream: StreamSummary | undefined): stream is StreamSummary {
    return stream !== undefined && stream.state !== 'waiting' && stream.startedAt < task.keptUntil;
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
    task.final = stream === undefined ? undefined : keptSummary(stream);
    // Its TTL counts from its end: a client that waited out a long job still reads its outcome.
    task.keptUntil = Math.max(task.keptUntil, now + task.ttlMs);
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

  /**
   * The task as reported at `now`, with `stream` the router's summary of its token: a terminal
   * task reports what it kept instead, from the answer that saw it end on, so every answer after
   * its end is the same. A working task whose job runs is promised its TTL from now
   * (were the job to end now, it would be kept that long), and keeps that promise: the reported
   * ttlMs is honest, the task is kept at least until createdAt + ttlMs.
   */
  #record(task: Task, routerStream: StreamSummary | undefined, now: number): TaskRecord {
    const stream = task.status === 'working' ? routerStream : task.final;
    if (task.status === 'working' && this.#runs(task, stream)) {
      task.keptUntil = Math.max(task.keptUntil, now + task.ttlMs);
    }
    const createdAt = task.createdAt;
    const record: TaskRecord = {
      taskId: task.taskId,
      progressToken: task.progressToken,
      status: task.status,
      createdAt,
      updatedAt: Math.round(task.updatedAt),
      // Rounded down: createdAt + ttlMs is never later than what is kept.
      ttlMs: Math.max(1, Math.floor(task.keptUntil) - createdAt),
      pollIntervalMs: this.#options.pollIntervalMs,
    };
    if (task.reason !== undefined) record.reason = task.reason;
    if (stream !== undefined) record.stream = stream;
    return record;
  }
}
