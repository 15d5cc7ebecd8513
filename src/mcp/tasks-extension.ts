/**
 * watch_progress as a task on the 2026-07-28 revision, through the tasks extension
 * (`io.modelcontextprotocol/tasks`, SEP-2663), on the @modelcontextprotocol/server 2.x server,
 * which has the extension's method names but no task runtime. As for 2025-11-25 (tasks.ts),
 * the task is the daemon's: any `mcp-progress mcp` process, or /mcp, answers for any task.
 *
 * What the spec asks and what is done here (README, docs/COMPATIBILITY.md):
 * - server/discover lists the extension; a tools/call of watch_progress answers a task
 *   (`resultType: "task"`) only when that request's client capabilities list it;
 * - tasks/get answers the detailed task: the plain call's result inlined once completed,
 *   the reason as a JSON-RPC error once failed; tasks/cancel cancels in the daemon (which
 *   tells the worker) before it answers; tasks/update has nothing to take (never input_required);
 * - no progress notification is sent for a task: its statusMessage is the progress;
 * - `subscriptions/listen` with `notifications.taskIds` gets `notifications/tasks` until each
 *   task is terminal, then the listen's result ends it (the 2.x entries serve the listen method
 *   themselves, so the transports hand such a listen here); a task that can no longer be told of
 *   (the daemon forgot it, or is gone) ends it with an error naming it instead; one the daemon
 *   forgot while the listen follows others is also told at once, as failed with that error.
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  type McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  type ServerContext,
  SUBSCRIPTION_ID_META_KEY,
} from '@modelcontextprotocol/server';
import * as z from 'zod';
import { MCP_ERRORS, RPC_ERRORS } from '../protocol/errors.js';
import { type TaskRecord, TERMINAL_TASK_STATUSES } from '../protocol/tasks.js';
import {
  MAX_LISTENED_TASKS,
  MAX_STDIO_TASK_LISTENS,
  TASK_POLL_INTERVAL_MS,
  TASK_STATUS_MIN_INTERVAL_MS,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { fitStatusMessage } from './describe.js';
import { type Forwarding, forwardOnOwnSession, outsideRequest } from './forward.js';
import {
  type ProgressTool,
  sdkRequestHandlers,
  WATCH_TOOL,
  watchTaskArguments,
} from './mcp-server.js';
import { HANDED_ON } from './progress-sends.js';
import type { ProgressSource } from './progress-source.js';
import { SharedSessions } from './shared-sessions.js';
import {
  mcpTask,
  TaskCancelHearing,
  TaskLook,
  taskChangedAt,
  taskToolResult,
  unknownTask,
} from './tasks.js';

/** The extension's identifier, in server/discover and in a request's client capabilities. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** What a subscriptions/listen stream is told when a task changes (SEP-2663; not 2025's .../status). */
export const TASK_STATUS_NOTIFICATION = 'notifications/tasks';
const LISTEN_METHOD = 'subscriptions/listen';
const LISTEN_ACKNOWLEDGED = 'notifications/subscriptions/acknowledged';

/** The capabilities server/discover shows for the extension (an empty object: no settings). */
export const TASKS_EXTENSION_CAPABILITIES = { extensions: { [TASKS_EXTENSION]: {} } };

type RequestId = string | number;

/** A JSON-RPC message this module writes to a listen stream. */
export type ListenMessage = {
  jsonrpc: '2.0';
  method?: string;
  id?: RequestId;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
};

/** Whether a request's `_meta` envelope (or its lifted form) lists the tasks extension. */
function declaresTasks(meta: unknown): boolean {
  if (typeof meta !== 'object' || meta === null) return false;
  const capabilities = (meta as Record<string, unknown>)[CLIENT_CAPABILITIES_META_KEY];
  const extensions = (capabilities as { extensions?: unknown } | undefined)?.extensions;
  return typeof extensions === 'object' && extensions !== null && TASKS_EXTENSION in extensions;
}

/** The daemon's task as the extension's Task (a task-creation result is this, and resultType). */
function extensionTask(record: TaskRecord): Record<string, unknown> {
  const { ttl, pollInterval, ...task } = mcpTask(record);
  return { ...task, ttlMs: ttl, pollIntervalMs: pollInterval };
}

/**
 * The daemon's task as the extension's detailed task (tasks/get, notifications/tasks): the
 * plain watch_progress result inlined once completed; once failed, the reason as a JSON-RPC
 * error whose data still carries that result (a plain call would have returned it).
 */
export function detailedTask(record: TaskRecord): Record<string, unknown> {
  const detailed = extensionTask(record);
  if (record.status === 'completed') return { ...detailed, result: taskToolResult(record) };
  if (record.status === 'failed') {
    return {
      ...detailed,
      error: {
        code: ProtocolErrorCode.InternalError,
        message: record.reason ?? 'the job failed',
        data: { result: taskToolResult(record) },
      },
    };
  }
  return detailed;
}

function missingTasksCapability(): MissingRequiredClientCapabilityError {
  return new MissingRequiredClientCapabilityError(
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    `declare the ${TASKS_EXTENSION} extension in the request's client capabilities to listen for tasks`,
  );
}

/** A BridgeError of the daemon's task table, as the invalid-params error the client is answered. */
function invalidParams(error: BridgeError): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, error.message);
}

const taskIdParams = z.object({ taskId: z.string().min(1) });

type RawHandler = (request: { params?: unknown }, ctx: ServerContext) => Promise<unknown>;

/**
 * Serves the extension on one 2.x server: lists it for server/discover (the caller passes
 * TASKS_EXTENSION_CAPABILITIES to the server), answers watch_progress with a task when asked,
 * and the extension's methods. `listens` hears of cancels made here.
 */
export function serveTasksExtension(
  server: McpServer,
  source: ProgressSource,
  tools: readonly ProgressTool[],
  listens: TaskListens,
): void {
  const watchArguments = watchTaskArguments(tools);
  const handlers = sdkRequestHandlers<RawHandler>(server.server, '@modelcontextprotocol/server');
  const call = handlers.get('tools/call');
  handlers.set('tools/call', async (request, ctx) => {
    const params = request.params as { name?: unknown; arguments?: unknown } | undefined;
    // The server decides; a client that did not declare the extension never gets a task.
    if (params?.name !== WATCH_TOOL || !declaresTasks(ctx.mcpReq.envelope)) {
      return call(request, ctx);
    }
    const input = watchArguments(params.arguments);
    if (typeof input === 'string') throw new ProtocolError(ProtocolErrorCode.InvalidParams, input);
    // Answered once the daemon holds the task: a tasks/get for it resolves from now on.
    const record = await source.createTask({ progressToken: input.progressToken });
    return { ...extensionTask(record), resultType: 'task' };
  });
  const known = async (taskId: string): Promise<TaskRecord> => {
    const record = await source.getTask(taskId);
    if (record === undefined) throw invalidParams(unknownTask(taskId));
    return record;
  };
  server.server.setRequestHandler('tasks/get', { params: taskIdParams }, async ({ taskId }) =>
    detailedTask(await known(taskId)),
  );
  server.server.setRequestHandler('tasks/cancel', { params: taskIdParams }, async ({ taskId }) => {
    // The daemon marks the task cancelled and tells its workers before this answers.
    const { task } = await source.cancelTask(taskId);
    if (task === undefined) throw invalidParams(unknownTask(taskId));
    listens.changed(task);
    return {};
  });
  // Never input_required, so no input is outstanding: an update of a known task is acknowledged
  // (its inputResponses, which the SDK lifts out of the params, are ignored, as the spec says).
  server.server.setRequestHandler('tasks/update', { params: taskIdParams }, async ({ taskId }) => {
    await known(taskId);
    return {};
  });
}

/** A subscriptions/listen request that asks for task notifications, as read off the wire. */
export interface TaskListenRequest {
  readonly id: RequestId;
  readonly taskIds: readonly string[];
  /** Whether its client capabilities list the tasks extension (else it is refused, -32021). */
  readonly declared: boolean;
}

/**
 * The listen request in `message` when it asks for `notifications.taskIds`; any other message
 * (a listen for list changes included) is the 2.x entry's to serve.
 */
export function taskListenRequest(message: unknown): TaskListenRequest | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const { method, id, params } = message as { method?: unknown; id?: unknown; params?: unknown };
  if (method !== LISTEN_METHOD || (typeof id !== 'string' && typeof id !== 'number'))
    return undefined;
  const { notifications, _meta } = (params ?? {}) as { notifications?: unknown; _meta?: unknown };
  const taskIds = (notifications as { taskIds?: unknown } | undefined)?.taskIds;
  if (!Array.isArray(taskIds)) return undefined;
  return {
    id,
    taskIds: taskIds.filter((taskId): taskId is string => typeof taskId === 'string'),
    declared: declaresTasks(_meta),
  };
}

/** The error a listen request without the extension declared is answered with (-32021). */
export function refusedListen(request: TaskListenRequest): ListenMessage {
  const error = missingTasksCapability();
  return {
    jsonrpc: '2.0',
    id: request.id,
    error: { code: error.code, message: error.message, data: error.data },
  };
}

/**
 * The error a listen past the cap of a stdio connection is answered with (MCP_ERRORS.refused):
 * which limit, and how to get under it.
 */
export function tooManyListens(request: TaskListenRequest): ListenMessage {
  return {
    jsonrpc: '2.0',
    id: request.id,
    error: {
      code: MCP_ERRORS.refused.code,
      message: `too many task listens: this connection has ${MAX_STDIO_TASK_LISTENS} open, the most one stdio connection of mcp-progress mcp holds (MAX_STDIO_TASK_LISTENS); end an earlier listen first (notifications/cancelled with its request id), or name several tasks in one listen (up to ${MAX_LISTENED_TASKS} taskIds)`,
    },
  };
}

/**
 * The error a listen is answered with when its tasks could not be asked about (no daemon
 * answered, MCP_ERRORS.daemon_lost): nothing was acknowledged, and the client may listen again.
 */
function unaskedListen(request: TaskListenRequest, error: unknown): ListenMessage {
  const cause = error instanceof BridgeError ? error.code : 'internal_error';
  return {
    jsonrpc: '2.0',
    id: request.id,
    error: {
      code: MCP_ERRORS.daemon_lost.code,
      message: `could not ask the daemon about the tasks of this listen (${(error as Error).message}): listen again once the daemon answers`,
      data: { code: cause, taskIds: request.taskIds.slice(0, MAX_LISTENED_TASKS) },
    },
  };
}

/** Writes one message to a listen stream; a rejection ends that listen. */
export type WriteListen = (message: ListenMessage) => Promise<void>;

/** How one listen is served, besides where it is written. */
export interface ListenOptions {
  /** Aborted when the client closed the stream (HTTP). */
  readonly ended?: AbortSignal;
  /**
   * Where the listen's progress sessions are opened (its follows share them: SharedSessions);
   * by default the source of these listens. /mcp passes the listen's own place in the daemon's
   * session hub, so that the hub's caps hold for it.
   */
  readonly sessions?: Pick<ProgressSource, 'openSession'>;
}

/** Why a listened task can no longer be told of, as the error that ends its listen says it. */
interface Gone {
  readonly code: number;
  readonly message: string;
  /**
   * Its stable name, the error's data.code: invalid_params, the loss's (gateway_lost), or the
   * refusal's (followRefused).
   */
  readonly cause: string;
  /** The daemon is gone: the graver cause, which the listen's error gives first. */
  readonly lost?: true;
  /**
   * The task is no more (the daemon forgot it): while the listen follows other tasks, it is told
   * at once as failed, with this error (SEP-2663 lets a server mark a task failed past its TTL).
   */
  readonly failed?: true;
}

/** The error of tasks that went (`gone`, each with why): a listen's end, or a task's when told alone. */
function goneError(gone: ReadonlyMap<string, Gone>): NonNullable<ListenMessage['error']> {
  const whys = [...gone.values()];
  // The daemon's loss is the graver cause: with it, no task of the listen can be asked about.
  const why = whys.find((one) => one.lost === true) ?? (whys[0] as Gone);
  return {
    code: why.code,
    message: whys.map((one) => one.message).join('; '),
    data: { code: why.cause, taskIds: [...gone.keys()] },
  };
}

/**
 * A task the daemon forgot, as a listen that goes on is told of it: as last told, now failed,
 * with the error a listen of it alone would have ended with.
 */
function failedTask(last: TaskRecord, why: Gone): Record<string, unknown> {
  return {
    ...extensionTask(last),
    status: 'failed',
    statusMessage: fitStatusMessage(why.message),
    lastUpdatedAt: new Date().toISOString(),
    error: goneError(new Map([[last.taskId, why]])),
  };
}

/** The daemon answers it has no such task: it forgot it at its TTL, or restarted. */
function forgotten(taskId: string): Gone {
  return {
    code: RPC_ERRORS.invalid_params.code,
    cause: 'invalid_params',
    message: `the daemon no longer has task ${JSON.stringify(taskId)}: its TTL passed before its job started (no worker published on its token), or the daemon restarted (tasks are in its memory only)`,
    failed: true,
  };
}

/** The daemon this server reads from went away for good (gateway_lost) under the follow. */
function daemonLost(taskId: string, error: BridgeError | undefined): Gone {
  return {
    code: MCP_ERRORS.daemon_lost.code,
    message: `nothing more can be told of task ${JSON.stringify(taskId)}: ${error?.message ?? 'the daemon went away'}`,
    cause: error?.code ?? 'gateway_lost',
    lost: true,
  };
}

/**
 * The task's follow could not be opened: the daemon refused its session (at --max-sessions) or
 * its subscription. Nothing would tell the task's changes, so the listen is told why, and how
 * to fix it.
 */
function followRefused(taskId: string, error: unknown): Gone {
  const reason = error instanceof Error ? error.message : String(error);
  return {
    code: MCP_ERRORS.follow_refused.code,
    message: `task ${JSON.stringify(taskId)} cannot be followed: the daemon refused what its follow needs (${reason}); end idle sessions or raise that limit of the daemon, then listen for the task again (tasks/get answers it meanwhile)`,
    cause: error instanceof BridgeError ? error.code : 'follow_refused',
  };
}

/** What one listened task has had: the last status and statusMessage told, and its follow. */
interface Followed {
  told: string | undefined;
  /** The task as last told. */
  last: TaskRecord | undefined;
  /** When the task told last had changed (ms): an older look, answered late, is not told. */
  toldChangedAt: number;
  ended: boolean;
  /** Stops following the task (its stream, and the look every poll interval). */
  stop: (() => Promise<void>) | undefined;
}

/** One subscriptions/listen stream for tasks: its tasks, each told until its end, then nothing. */
class TaskListener {
  readonly subscriptionId: RequestId;
  /** Where its follows subscribe: a few sessions they share, not one each. */
  readonly sessions: Pick<ProgressSource, 'openSession'>;
  readonly #write: WriteListen;
  /** Called once every task of this listen has been told its end: nothing more can be told. */
  readonly #finished: () => void;
  /** Called once when the listen ends, however it ends (its place is given back). */
  readonly #left: () => void;
  readonly #tasks = new Map<string, Followed>();
  /** The tasks it can no longer tell of, and why: the listen's end is then an error. */
  readonly #gone = new Map<string, Gone>();
  #closed = false;

  constructor(
    subscriptionId: RequestId,
    sessions: Pick<ProgressSource, 'openSession'>,
    write: WriteListen,
    finished: () => void,
    left: () => void,
  ) {
    this.subscriptionId = subscriptionId;
    this.sessions = sessions;
    this.#write = write;
    this.#finished = finished;
    this.#left = left;
  }

  /** Ended: nothing more is written to it. */
  get closed(): boolean {
    return this.#closed;
  }

  get taskIds(): string[] {
    return [...this.#tasks.keys()];
  }

  add(taskId: string): void {
    this.#tasks.set(taskId, {
      told: undefined,
      last: undefined,
      toldChangedAt: 0,
      ended: false,
      stop: undefined,
    });
  }

  follows(taskId: string): boolean {
    return this.#tasks.has(taskId);
  }

  /** Keeps how to stop following `taskId`; false (stop now) when it is no longer followed. */
  setFollow(taskId: string, stop: () => Promise<void>): boolean {
    const followed = this.#tasks.get(taskId);
    if (followed === undefined || followed.ended || this.#closed) return false;
    followed.stop = stop;
    return true;
  }

  /**
   * Tells the task as it is now, once per change; after its end, nothing more of it. The write
   * starts before the first await (TaskListens.changed relies on it); the promise waits for it.
   */
  async tell(record: TaskRecord): Promise<void> {
    const followed = this.#tasks.get(record.taskId);
    if (followed === undefined || followed.ended || this.#closed) return;
    // The stream and the poll both look: the later answer may carry the earlier state.
    const changedAt = taskChangedAt(record);
    if (changedAt < followed.toldChangedAt) return;
    const params = detailedTask(record);
    const told = `${record.status}\n${String(params.statusMessage)}`;
    if (told === followed.told) return;
    followed.told = told;
    followed.last = record;
    followed.toldChangedAt = changedAt;
    const terminal = TERMINAL_TASK_STATUSES.has(record.status);
    if (terminal) {
      followed.ended = true;
      // Not awaited: the follow may be the caller (its send), and its stop waits for that send.
      followed.stop?.().catch(() => {});
    }
    await this.send(TASK_STATUS_NOTIFICATION, params);
    if (terminal && this.#allEnded()) this.#finished();
  }

  /**
   * Nothing more can be told of the task (`why`): the daemon forgot it, or is gone. It is not
   * followed any more, and once every task has ended so, or been told its end, the listen ends
   * with an error naming the ones that went this way. A task the daemon forgot while others are
   * still followed is told now (failed, with that error), not only at the listen's end.
   */
  gone(taskId: string, why: Gone): void {
    const followed = this.#tasks.get(taskId);
    if (followed === undefined || followed.ended || this.#closed) return;
    followed.ended = true;
    this.#gone.set(taskId, why);
    followed.stop?.().catch(() => {});
    if (this.#allEnded()) {
      this.#finished();
    } else if (why.failed === true && followed.last !== undefined) {
      this.send(TASK_STATUS_NOTIFICATION, failedTask(followed.last, why)).catch(() => {});
    }
  }

  #allEnded(): boolean {
    return [...this.#tasks.values()].every((one) => one.ended);
  }

  async send(method: string, params: Record<string, unknown>): Promise<void> {
    // Once the listen has ended (its result written, or the client gone) nothing more is written.
    if (this.#closed) return;
    await this.#write({
      jsonrpc: '2.0',
      method,
      params: { ...params, _meta: { [SUBSCRIPTION_ID_META_KEY]: this.subscriptionId } },
    }).catch(() => this.close());
  }

  /**
   * Ends the listen; `graceful`: with the empty listen result the spec ends a stream with, or,
   * when a task went without its end told (gone()), with an error naming each such task and why.
   * The answer is written before the first await, and not waited for: a client that stopped
   * reading would hold the caller up (the daemon's stop), and its transport bounds what it holds.
   * Settles once the tasks are no longer followed.
   */
  async close(graceful = false): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#left();
    if (graceful) this.#write(this.#answer()).catch(() => {});
    const follows = [...this.#tasks.values()].map((followed) => followed.stop?.());
    await Promise.all(follows).catch(() => {});
  }

  /** The listen's answer: its result, or the error of the tasks it could not tell the end of. */
  #answer(): ListenMessage {
    if (this.#gone.size === 0) {
      return {
        jsonrpc: '2.0',
        id: this.subscriptionId,
        result: {
          resultType: 'complete',
          _meta: { [SUBSCRIPTION_ID_META_KEY]: this.subscriptionId },
        },
      };
    }
    return { jsonrpc: '2.0', id: this.subscriptionId, error: goneError(this.#gone) };
  }
}

/**
 * The listen streams for tasks of one server process (a stdio connection, or /mcp): each task
 * listened to is told at once, then on each change of its statusMessage (coalesced) and of its
 * status, from its stream; a cancel made through this process is written to them before
 * tasks/cancel answers, which waits for none of them to be read.
 */
export class TaskListens {
  readonly #source: ProgressSource;
  /** Whether these are one stdio connection's, capped at MAX_STDIO_TASK_LISTENS. */
  readonly #capped: boolean;
  /** Every listen from its request on, until it ends: its place under the cap. */
  readonly #listeners = new Set<TaskListener>();
  /**
   * Cancels made anywhere in the daemon, heard while any listen is open when the daemon is in
   * this process (/mcp, an embedded daemon): told at once, as a cancel made here is.
   */
  readonly #cancels: TaskCancelHearing;
  #closed = false;

  /**
   * `capped`: the listens of one stdio connection, at most MAX_STDIO_TASK_LISTENS at once. /mcp
   * leaves it off: there each listen holds a place in the daemon's session hub instead.
   */
  constructor(source: ProgressSource, capped = false) {
    this.#source = source;
    this.#capped = capped;
    this.#cancels = new TaskCancelHearing(source, (task) => this.changed(task));
  }

  /**
   * Serves `request` on `write`: the acknowledgement (naming the tasks the daemon knows, at most
   * MAX_LISTENED_TASKS), then each task now, then its changes, until cancel(), `ended` (HTTP:
   * the client closed the stream), close(), or every task has been told its end (then the
   * listen's result ends it: over HTTP its stream closes) or can no longer be (the daemon forgot
   * it at its TTL, or the daemon is gone: then an error naming it ends the listen instead). When
   * capped, a listen past MAX_STDIO_TASK_LISTENS open ones is answered tooManyListens and nothing
   * more.
   */
  async listen(
    request: TaskListenRequest,
    write: WriteListen,
    { ended, sessions = this.#source }: ListenOptions = {},
  ): Promise<void> {
    if (!request.declared) {
      await write(refusedListen(request));
      return;
    }
    if (this.#capped && this.#listeners.size >= MAX_STDIO_TASK_LISTENS) {
      await write(tooManyListens(request));
      return;
    }
    // Once every task it listens to has ended, the listen ends too, gracefully (its result, as
    // the subscriptions pattern lets a server end one on its own): nothing can follow.
    const listener: TaskListener = new TaskListener(
      request.id,
      new SharedSessions(sessions),
      write,
      () => this.#end(listener, true),
      () => {
        this.#listeners.delete(listener);
        if (this.#listeners.size === 0) this.#cancels.stop();
      },
    );
    // Its place, taken before anything is awaited, so that admissions never overshoot the cap.
    this.#listeners.add(listener);
    // Before its tasks are asked about: a cancel made while they are is not missed.
    this.#cancels.hear();
    const records: TaskRecord[] = [];
    try {
      for (const taskId of new Set(request.taskIds)) {
        if (records.length >= MAX_LISTENED_TASKS) break;
        const record = await this.#source.getTask(taskId);
        if (record === undefined) continue;
        listener.add(taskId);
        records.push(record);
      }
    } catch (error) {
      // No daemon to ask: the listen gives its place back, and is answered why, not left hanging.
      this.#end(listener);
      await write(unaskedListen(request, error)).catch(() => {});
      return;
    }
    // Ended meanwhile (cancelled, the client gone, or close()): nothing is written to it.
    if (listener.closed || this.#closed || ended?.aborted === true) {
      this.#end(listener);
      return;
    }
    ended?.addEventListener('abort', () => this.#end(listener), { once: true });
    await listener.send(LISTEN_ACKNOWLEDGED, { notifications: { taskIds: listener.taskIds } });
    await Promise.all(records.map((record) => this.#follow(listener, record)));
    // No task the daemon knows: the acknowledgement said so, and nothing more will come.
    if (records.length === 0) this.#end(listener, true);
  }

  /**
   * The client ended the listen `id` (stdio: notifications/cancelled): nothing more is written
   * to it. False when `id` is no listen of these.
   */
  cancel(id: RequestId): boolean {
    const listener = [...this.#listeners].find((one) => one.subscriptionId === id);
    if (listener === undefined) return false;
    this.#end(listener);
    return true;
  }

  /** Ends `listener`; its close gives its place back. */
  #end(listener: TaskListener, graceful = false): void {
    listener.close(graceful).catch(() => {});
  }

  /**
   * A task was cancelled: through this process (tasks/cancel here), or anywhere when the daemon is
   * in this process (its notice). Every listener of it is told now. Each message is written
   * before this returns (tell writes before it first waits), so over stdio it comes before the
   * cancel's answer; the writes are not awaited, since one waits for its client to read, and a
   * listen whose client stopped reading must hold up no one's answer. Told twice (here, then by
   * the daemon's notice), a task is written once: tell writes only a change.
   */
  changed(record: TaskRecord): void {
    for (const listener of this.#listeners) {
      if (listener.follows(record.taskId)) listener.tell(record).catch(() => {});
    }
  }

  /**
   * Ends every listen gracefully (the server is going away): each is written its result before
   * this returns, and none is waited for to be read, so a client that stopped reading holds up no
   * stop (over /mcp the daemon's stop cuts its connection after the shutdown grace).
   */
  async close(): Promise<void> {
    this.#closed = true;
    // Each close takes its listener out of the set.
    const listeners = [...this.#listeners];
    await Promise.all(listeners.map((listener) => listener.close(true)));
  }

  /**
   * Tells the task now, then follows its stream: each update, its end and each poll interval
   * prompt a look at the task. One look at a time: a prompt while one is in flight (its write
   * waiting for a client that does not read) asks for one more after it, which tells the newest
   * state. So a stalled listen holds one message per task, never one per change.
   */
  async #follow(listener: TaskListener, record: TaskRecord): Promise<void> {
    await listener.tell(record);
    if (TERMINAL_TASK_STATUSES.has(record.status)) return;
    const look = new TaskLook(this.#source, record.taskId, (now) =>
      // The daemon forgot the task (its TTL passed before its job started, or it restarted):
      // nothing more can be told of it, and the listen is told why.
      now === undefined
        ? listener.gone(record.taskId, forgotten(record.taskId))
        : listener.tell(now),
    );
    let forwarding: Forwarding;
    try {
      forwarding = await forwardOnOwnSession(
        listener.sessions,
        { progressToken: record.progressToken, minIntervalMs: TASK_STATUS_MIN_INTERVAL_MS },
        // Nothing is forwarded as progress: each update only prompts a look (taken at once, so
        // the forward never queues updates behind a look).
        outsideRequest(undefined, () => {
          look.look();
          return HANDED_ON;
        }),
      );
    } catch (error) {
      // Not followed, the task would never be told again: the listen ends with why (once every
      // other task has ended), rather than stay open and silent about it.
      listener.gone(record.taskId, followRefused(record.taskId, error));
      return;
    }
    // What the stream does not show (a cancel made through another process, with the daemon
    // across a socket: one in this process tells it at once) is seen at the next look: one
    // every poll interval, the pace a polling client would see it at.
    look.poll(TASK_POLL_INTERVAL_MS);
    const stop = async () => {
      look.stop();
      await forwarding.stop();
    };
    if (!listener.setFollow(record.taskId, stop)) {
      await stop();
      return;
    }
    forwarding.ended
      .then(async (end) => {
        await stop();
        // The daemon went away for good: nothing can be asked of it. Else one last look (done).
        if (end === 'lost')
          listener.gone(record.taskId, daemonLost(record.taskId, forwarding.error));
        else look.look();
      })
      .catch(() => {});
  }
}
