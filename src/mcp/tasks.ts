/**
 * watch_progress as an MCP task (2025-11-25, SEP-1686) on the SDK 1.x server. The task's state
 * is the daemon's (task/create, task/get, task/cancel, task/list), so the SDK's TaskStore here
 * is only a view of it: any `mcp-progress mcp` process, or /mcp session, answers for any task.
 * The session that created a task also follows it: it forwards the stream's progress on the
 * caller's token until the task is terminal, and then sends one notifications/tasks/status; it
 * lets go once the daemon no longer has the task (its TTL passed), wherever the task ended.
 */
import type {
  CreateTaskOptions,
  TaskStore,
} from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import {
  McpError,
  type Request,
  type RequestId,
  type Result,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import { MCP_ERRORS } from '../protocol/errors.js';
import type { ProgressToken } from '../protocol/frames.js';
import { type TaskRecord, TERMINAL_TASK_STATUSES } from '../protocol/tasks.js';
import { MAX_FOLLOWED_TASKS, MAX_TASK_TTL_MS } from '../shared/defaults.js';
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

/** How the session that created a task follows it: the stream's forwarding, and the look at the task. */
interface Follower {
  readonly forwarding: Forwarding;
  /** Looks at the task every poll interval: what the stream does not show (a cancel made elsewhere, the task forgotten). */
  readonly look: TaskLook;
  /** Settles once the call's answer (the task) was handed to the transport: nothing of the task goes out before. */
  readonly answered: Promise<void>;
  /** Drops the progress not yet sent, and any after: the task was cancelled or forgotten. */
  readonly silence: () => void;
}

/**
 * Looks at one task in the daemon, for a follower of it (a 2025 task's creating session, a 2026
 * task listen): one look at a time, at each prompt and, once polling, every poll interval. A
 * prompt during a look asks for one more after it, so the newest state is seen, and a look that
 * waits (on a client that does not read) never piles up. `seen` gets the task as the daemon has
 * it (undefined: it no longer has it); a daemon out of reach is left to the next look.
 */
export class TaskLook {
  readonly #source: Pick<ProgressSource, 'getTask'>;
  readonly #taskId: string;
  readonly #seen: (record: TaskRecord | undefined) => unknown;
  #looking = false;
  #again = false;
  #poll: NodeJS.Timeout | undefined;

  constructor(
    source: Pick<ProgressSource, 'getTask'>,
    taskId: string,
    seen: (record: TaskRecord | undefined) => unknown,
  ) {
    this.#source = source;
    this.#taskId = taskId;
    this.#seen = seen;
  }

  look(): void {
    if (this.#looking) {
      this.#again = true;
      return;
    }
    this.#looking = true;
    this.#again = false;
    this.#source
      .getTask(this.#taskId)
      .then(this.#seen)
      .catch(() => {})
      .finally(() => {
        this.#looking = false;
        if (this.#again) this.look();
      });
  }

  /** Looks every `intervalMs` as well, until stop(). */
  poll(intervalMs: number): void {
    clearInterval(this.#poll);
    this.#poll = setInterval(() => this.look(), intervalMs);
    this.#poll.unref();
  }

  /** No more polling; a look asked for after still looks. */
  stop(): void {
    clearInterval(this.#poll);
  }
}

/**
 * Hears of each task cancelled in the daemon, by anyone, as it happens, while someone here
 * follows tasks: one registration with the source (a source in the daemon's process has
 * onTaskCancelled; a daemon across a socket tells no one, and its cancels are seen at the next
 * look), taken by the first follow and let go with the last, so an idle server holds nothing in
 * the daemon. The one way both followers of tasks hear a cancel made elsewhere: a 2025 task's
 * creating session (DaemonTaskStore) and a 2026 task listen (TaskListens).
 */
export class TaskCancelHearing {
  readonly #source: Pick<ProgressSource, 'onTaskCancelled'>;
  readonly #heard: (task: TaskRecord) => void;
  #unhear: (() => void) | undefined;

  constructor(source: Pick<ProgressSource, 'onTaskCancelled'>, heard: (task: TaskRecord) => void) {
    this.#source = source;
    this.#heard = heard;
  }

  /** Someone follows a task: hear from now on (once, however many follow). */
  hear(): void {
    this.#unhear ??= this.#source.onTaskCancelled?.(this.#heard);
  }

  /** No one follows any more. */
  stop(): void {
    this.#unhear?.();
    this.#unhear = undefined;
  }
}

/** How the created task's progress is forwarded: on `token`'s stream, under the caller's `label`. */
export interface FollowOptions {
  readonly token: ProgressToken;
  /** The caller's progressToken; none: progress is not sent. */
  readonly label: ProgressToken | undefined;
  readonly minIntervalMs: number;
  /**
   * Settles once the call's answer has been handed to the transport, or once none will be (the
   * call was cancelled, the transport closed): a client is told nothing of a task it does not
   * know yet.
   */
  readonly answered: Promise<void>;
}

/** A task call past MAX_FOLLOWED_TASKS (MCP_ERRORS.refused): which limit, and how to get under it. */
function tooManyFollowed(): McpError {
  return new McpError(
    MCP_ERRORS.refused.code,
    `too many tasks followed: this MCP session follows ${MAX_FOLLOWED_TASKS} working tasks, the most one session of mcp-progress mcp or /mcp follows (MAX_FOLLOWED_TASKS); wait for one to end or cancel one (tasks/cancel), or call watch_progress without a task`,
  );
}

/**
 * The SDK's TaskStore over the daemon's task table, for one MCP server (one client session).
 * storeTaskResult is not needed: a task's result is its stream's outcome, which the daemon keeps.
 */
export class DaemonTaskStore implements TaskStore {
  readonly #source: ProgressSource;
  readonly #send: SendTaskNotification;
  /** How this session follows each task it created, while the task works. */
  readonly #followers = new Map<string, Follower>();
  /** Tasks being started (their follow opened, the task not yet created): they count toward the cap. */
  #starting = 0;
  /** Cancels made anywhere in the daemon (a source in its process), heard while any task is followed. */
  readonly #cancels: TaskCancelHearing;

  constructor(source: ProgressSource, send: SendTaskNotification) {
    this.#source = source;
    this.#send = send;
    this.#cancels = new TaskCancelHearing(source, (task) => this.#saw(task));
  }

  /** Creates the task only; a watch_progress call as a task is start()'s, which also follows it. */
  async createTask(
    params: CreateTaskOptions,
    _requestId: RequestId,
    request: Request,
  ): Promise<Task> {
    return mcpTask(await this.#source.createTask(this.#createParams(params, request)));
  }

  #createParams(params: CreateTaskOptions, request: Request) {
    const ttl = params.ttl === null || params.ttl === undefined ? undefined : params.ttl;
    return {
      progressToken: watchedToken(request),
      ...(ttl === undefined
        ? {}
        : { ttlMs: Math.max(1, Math.min(Math.round(ttl), MAX_TASK_TTL_MS)) }),
    };
  }

  async getTask(taskId: string): Promise<Task | null> {
    const record = await this.#source.getTask(taskId);
    if (record === undefined) return null;
    this.#saw(record);
    return mcpTask(record);
  }

  async storeTaskResult(): Promise<void> {}

  async getTaskResult(taskId: string): Promise<Result> {
    const record = await this.#source.getTask(taskId);
    if (record === undefined) throw unknownTask(taskId);
    this.#saw(record);
    return taskToolResult(record);
  }

  /**
   * Only a cancel changes a task from outside: the daemon derives every other status from the
   * stream. Its status is told once: here when this cancel ends this session's follow of it;
   * else by whichever end of the follow came first (a look that saw it cancelled elsewhere just
   * before), or by none, for a task this session does not follow (the cancel's answer is the task).
   */
  async updateTaskStatus(taskId: string, status: Task['status'], message?: string): Promise<void> {
    if (status !== 'cancelled') return;
    // Forwarding stops first: no progress goes out for a task once it is cancelled.
    const followed = await this.#unfollow(taskId, true);
    const { task } = await this.#source.cancelTask(taskId, message);
    if (task === undefined) throw unknownTask(taskId);
    if (followed !== undefined) await this.#sendStatus(task, followed);
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await this.#source.listTasks(cursor === undefined ? {} : { cursor });
    for (const record of page.tasks) this.#saw(record);
    const tasks = page.tasks.map(mcpTask);
    return page.nextCursor === undefined ? { tasks } : { tasks, nextCursor: page.nextCursor };
  }

  /**
   * Creates the task of a watch_progress call and follows it (at most MAX_FOLLOWED_TASKS at once).
   * The follow is opened first, its daemon session and its subscription: when that fails (at
   * --max-sessions, --max-streams) the call fails and no task is created, so none is left
   * working that no client knows of. Progress the subscription brings before the task exists
   * goes out once its id is known and the call's answer has been handed to the transport (a
   * client is told nothing of a task it does not know yet); none goes out for a task that was not
   * created, or that was terminal at once (its result says so).
   */
  async start(options: CreateTaskOptions, request: Request, follow: FollowOptions): Promise<Task> {
    if (this.#followers.size + this.#starting >= MAX_FOLLOWED_TASKS) throw tooManyFollowed();
    this.#starting++;
    try {
      return await this.#start(options, request, follow);
    } finally {
      this.#starting--;
    }
  }

  async #start(options: CreateTaskOptions, request: Request, follow: FollowOptions): Promise<Task> {
    let created: (taskId: string | undefined) => void = () => {};
    const taskId = new Promise<string | undefined>((resolve) => {
      created = resolve;
    });
    // Progress waits for the task's id and for the answer that tells the client of it.
    const ready = Promise.all([taskId, follow.answered]).then(([id]) => id);
    let silenced = false;
    const send: SendProgress = (notification) =>
      ready.then((id) =>
        id === undefined || silenced
          ? undefined
          : this.#send(notification as { method: string; params: Record<string, unknown> }, id),
      );
    const forwarding = await forwardOnOwnSession(
      this.#source,
      { progressToken: follow.token, minIntervalMs: follow.minIntervalMs },
      outsideRequest(follow.label, follow.label === undefined ? undefined : send),
    );
    let record: TaskRecord;
    try {
      record = await this.#source.createTask(this.#createParams(options, request));
    } catch (error) {
      created(undefined);
      await forwarding.stop();
      throw error;
    }
    if (TERMINAL_TASK_STATUSES.has(record.status)) {
      created(undefined);
      await forwarding.stop();
    } else {
      created(record.taskId);
      this.#follow(record.taskId, record.pollIntervalMs, forwarding, follow.answered, () => {
        silenced = true;
      });
    }
    return mcpTask(record);
  }

  /**
   * Follows a working task until it is terminal, then tells its final status; or until the
   * daemon no longer has it (its TTL passed), then tells nothing. The stream's done shows the
   * end at once; a cancel made through another session or process is seen at the next look at
   * the task, one every poll interval (the pace a polling client sees it at), or when this
   * session reads the task (tasks/get, tasks/result, tasks/list), or at once when the daemon is
   * in this process (/mcp, an embedded daemon), and no progress goes out after it. Each end lets
   * go of the follow's daemon session.
   */
  #follow(
    taskId: string,
    pollIntervalMs: number,
    forwarding: Forwarding,
    answered: Promise<void>,
    silence: () => void,
  ): void {
    const look = new TaskLook(this.#source, taskId, (now) => {
      // Gone: forgotten by the daemon. Whether a working task outlives its TTL is the daemon's to
      // say, not computed here. The daemon out of reach: the stream's end (lost) ends the
      // follow, or the next look does.
      if (now === undefined) return this.#end(taskId, follower, undefined);
      if (TERMINAL_TASK_STATUSES.has(now.status)) return this.#end(taskId, follower, now);
      return undefined;
    });
    look.poll(pollIntervalMs);
    const follower: Follower = { forwarding, look, answered, silence };
    this.#followers.set(taskId, follower);
    // A daemon in this process tells of a cancel made anywhere as it happens: no wait for a look.
    this.#cancels.hear();
    forwarding.ended
      .then(async (end) => {
        if (end !== 'done') return this.#end(taskId, follower, undefined);
        return this.#end(taskId, follower, await this.#source.getTask(taskId));
      })
      .catch(() => this.#end(taskId, follower, undefined))
      .catch(() => {});
  }

  /** Stops following every task of this session; the tasks go on in the daemon. */
  async close(): Promise<void> {
    await Promise.all([...this.#followers.keys()].map((taskId) => this.#unfollow(taskId, true)));
  }

  /**
   * A task as this session just read it (tasks/get, tasks/result, tasks/list), or as the daemon
   * in this process told its cancel: once terminal, its follow ends now, not at its next look, so
   * no progress goes out once this server knows.
   */
  #saw(record: TaskRecord): void {
    const follower = this.#followers.get(record.taskId);
    if (follower !== undefined && TERMINAL_TASK_STATUSES.has(record.status))
      this.#end(record.taskId, follower, record).catch(() => {});
  }

  /**
   * Ends `follower` (once: the first of its ends, the stream, a look, a cancel here or close,
   * wins), and then tells `final`, the task's status: no progress is sent after it. Progress not
   * yet sent goes first when the job ended (completed, failed: it came before the end), and is
   * dropped when the task was cancelled or forgotten (nothing of it goes out once that is known).
   */
  async #end(taskId: string, follower: Follower, final: TaskRecord | undefined): Promise<void> {
    if (this.#followers.get(taskId) !== follower) return;
    await this.#unfollow(taskId, final === undefined || final.status === 'cancelled');
    if (final !== undefined) await this.#sendStatus(final, follower);
  }

  /** Stops following `taskId`, dropping the progress not yet sent when `silence`; the follow ended, if any. */
  async #unfollow(taskId: string, silence: boolean): Promise<Follower | undefined> {
    const follower = this.#followers.get(taskId);
    if (follower === undefined) return undefined;
    this.#followers.delete(taskId);
    if (this.#followers.size === 0) this.#cancels.stop();
    if (silence) follower.silence();
    follower.look.stop();
    await follower.forwarding.stop();
    return follower;
  }

  /**
   * The one notifications/tasks/status of a followed task: a task changes once, when it ends. Sent
   * after the call's answer, so that the client knows the task.
   */
  async #sendStatus(record: TaskRecord, follower: Follower): Promise<void> {
    await follower.answered;
    await this.#send(
      { method: 'notifications/tasks/status', params: { ...mcpTask(record) } },
      undefined,
    ).catch(() => {});
  }
}
