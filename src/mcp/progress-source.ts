/**
 * Where the MCP tools get progress from: a running daemon over its WebSocket
 * (GatewayClient), or the daemon in this very process (in-process sessions).
 * Each watch opens its own session, because a session holds one subscription
 * per stream and two watchers of one stream need their own labels.
 */

import type {
  GatewayClient,
  GatewayClientOptions,
  NotificationHandler,
} from '../gateway-client/gateway-client.js';
import type {
  ListParams,
  ListResult,
  ProgressToken,
  StreamSummary,
  SubscribeParams,
} from '../protocol/frames.js';
import type {
  TaskCreateParams,
  TaskListParams,
  TaskListResult,
  TaskRecord,
} from '../protocol/tasks.js';
import { BridgeError } from '../shared/errors.js';
import { NO_LIVE_DAEMON } from '../shared/no-daemon.js';

export interface ProgressSubscription {
  unsubscribe(): Promise<void>;
}

/**
 * One gateway session: subscriptions that end at done, unsubscribe or close,
 * or through `onError` when the daemon went away for good (gateway_lost).
 */
export interface ProgressSession {
  subscribe(
    params: SubscribeParams,
    handler: NotificationHandler,
    onError?: (error: BridgeError) => void,
  ): Promise<ProgressSubscription>;
  close(): Promise<void>;
}

export interface ProgressSource {
  openSession(): Promise<ProgressSession>;
  /** One page of the streams: from `cursor` (a nextCursor; none: the first), at most `limit`. */
  list(params?: ListParams): Promise<ListResult>;
  /** One stream by its token, without listing the others; undefined when the daemon has none. */
  get(token: ProgressToken): Promise<StreamSummary | undefined>;
  /** Sends `cancel` to the stream's workers; returns how many were told. */
  cancel(token: ProgressToken, reason?: string): Promise<number>;
  /** The daemon's task table (task/create, task/get, task/cancel, task/list). */
  createTask(params: TaskCreateParams): Promise<TaskRecord>;
  getTask(taskId: string): Promise<TaskRecord | undefined>;
  cancelTask(taskId: string, reason?: string): Promise<TaskCancelled>;
  listTasks(params?: TaskListParams): Promise<TaskListResult>;
  close(): Promise<void>;
  /** True when the daemon this source reads from is gone (not connected); a source in-process never is. */
  readonly lost?: boolean;
  /**
   * Calls `listener` with each task cancelled in the daemon, by anyone, as it happens; returns
   * how to stop. Only a source in the daemon's own process has it: a daemon across a socket
   * tells no one of a cancel, which is then seen at the next look at the task.
   */
  onTaskCancelled?(listener: (task: TaskRecord) => void): () => void;
}

/** What task/cancel answers: the task (absent when the daemon has none) and the workers told. */
export interface TaskCancelled {
  task?: TaskRecord | undefined;
  workers: number;
}

/** A running daemon, reached over its WebSocket; daemon.json is re-read at every reconnect. */
export class RemoteProgressSource implements ProgressSource {
  readonly #options: GatewayClientOptions;
  readonly #shared: GatewayClient;
  readonly #sessions = new Set<GatewayClient>();

  private constructor(options: GatewayClientOptions, shared: GatewayClient) {
    this.#options = options;
    this.#shared = shared;
  }

  /**
   * Rejects when no daemon answers (daemon_not_running, gateway_unreachable), it refuses
   * (gateway_refused), or it is stopping (daemon_stopping).
   */
  static async connect(options: GatewayClientOptions): Promise<RemoteProgressSource> {
    return new RemoteProgressSource(options, await (await gatewayClient()).connect(options));
  }

  async openSession(): Promise<ProgressSession> {
    const client = await (await gatewayClient()).connect(this.#options);
    this.#sessions.add(client);
    return {
      subscribe: (params, handler, onError) => client.subscribe(params, handler, onError),
      close: async () => {
        this.#sessions.delete(client);
        await client.close();
      },
    };
  }

  get lost(): boolean {
    return !this.#shared.connected;
  }

  list(params: ListParams = {}): Promise<ListResult> {
    return this.#shared.list(params);
  }

  get(token: ProgressToken): Promise<StreamSummary | undefined> {
    return this.#shared.get(token);
  }

  cancel(token: ProgressToken, reason?: string): Promise<number> {
    return this.#shared.cancel(token, reason);
  }

  createTask(params: TaskCreateParams): Promise<TaskRecord> {
    return this.#shared.createTask(params);
  }

  getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.#shared.getTask(taskId);
  }

  cancelTask(taskId: string, reason?: string): Promise<TaskCancelled> {
    return this.#shared.cancelTask(taskId, reason);
  }

  listTasks(params?: TaskListParams): Promise<TaskListResult> {
    return this.#shared.listTasks(params);
  }

  /**
   * Stops using this daemon for new calls; watches still open keep their own
   * connections (which follow daemon.json to whichever daemon comes next) until they end.
   */
  async retire(): Promise<void> {
    await this.#shared.close();
  }

  async close(): Promise<void> {
    await Promise.all([...this.#sessions].map((client) => client.close()));
    this.#sessions.clear();
    await this.#shared.close();
  }
}

/**
 * The gateway client's class, loaded at the first connect: ws and the client cost a process
 * that has not called a tool yet (a host starts every MCP server at its own start) about
 * 40 ms and 9 MiB.
 */
async function gatewayClient(): Promise<typeof GatewayClient> {
  return (await import('../gateway-client/gateway-client.js')).GatewayClient;
}

/**
 * Errors that mean the daemon a source reads from is gone, so a new source should be established:
 * none answers, or the connection to it dropped. A refusal (gateway_refused: at --max-sessions,
 * a wrong secret) is not one: the daemon is there and said no, and connecting again or embedding
 * would only meet the same answer, so the call fails at once with the daemon's reason.
 */
const LOSS_CODES: ReadonlySet<string> = new Set<string>([
  ...NO_LIVE_DAEMON,
  'disconnected',
  'gateway_lost',
]);

function isLoss(error: unknown): boolean {
  return error instanceof BridgeError && LOSS_CODES.has(error.code);
}

/**
 * A source that outlives its daemon: when the daemon it reads from goes away
 * (another `mcp-progress mcp` embedded it and exited, or it was stopped) and
 * cannot be reached again, the next call establishes a new source, for
 * `mcp-progress mcp` by connect-or-embed again, and is served by it. A daemon
 * that refuses (gateway_refused) has not gone away: the call fails with its reason.
 */
export class RecoveringProgressSource implements ProgressSource {
  readonly #establish: () => Promise<ProgressSource>;
  /** Undefined until establishNow or the first call established one. */
  #current: ProgressSource | undefined;
  /** The first establish while it runs; a failed one is tried again at the next call. */
  #starting: Promise<ProgressSource> | undefined;
  readonly #retired: ProgressSource[] = [];
  #recovering: Promise<ProgressSource> | undefined;
  #closed = false;
  /** Who hears of the tasks cancelled in the daemon (onTaskCancelled), whichever source is current. */
  readonly #cancelListeners = new Set<(task: TaskRecord) => void>();
  /** The source they hear from now, and how to stop; a new current source is heard from instead. */
  #heard: { source: ProgressSource; unhear: () => void } | undefined;

  /** Nothing is connected before establishNow or the first call, which establishes the source. */
  constructor(establish: () => Promise<ProgressSource>) {
    this.#establish = establish;
  }

  /** Whether a source was established (by establishNow or a call). */
  get established(): boolean {
    return this.#current !== undefined;
  }

  get lost(): boolean {
    return false;
  }

  /**
   * Hears of the tasks cancelled in the daemon of the current source when it is in this process
   * (an embedded daemon), and of the next one's after a recovery; from a daemon across a socket,
   * of none (seen at the next look at the task).
   */
  onTaskCancelled(listener: (task: TaskRecord) => void): () => void {
    this.#cancelListeners.add(listener);
    this.#hearFrom(this.#current);
    return () => {
      this.#cancelListeners.delete(listener);
      if (this.#cancelListeners.size > 0) return;
      this.#heard?.unhear();
      this.#heard = undefined;
    };
  }

  /** Hears of cancels from `source`, the current one, while anyone listens. */
  #hearFrom(source: ProgressSource | undefined): void {
    if (source === undefined || this.#cancelListeners.size === 0) return;
    if (this.#heard?.source === source) return;
    this.#heard?.unhear();
    this.#heard = undefined;
    const unhear = source.onTaskCancelled?.((task) => {
      for (const listener of this.#cancelListeners) listener(task);
    });
    if (unhear !== undefined) this.#heard = { source, unhear };
  }

  openSession(): Promise<ProgressSession> {
    return this.#run((source) => source.openSession());
  }

  list(params?: ListParams): Promise<ListResult> {
    return this.#run((source) => source.list(params));
  }

  get(token: ProgressToken): Promise<StreamSummary | undefined> {
    return this.#run((source) => source.get(token));
  }

  cancel(token: ProgressToken, reason?: string): Promise<number> {
    return this.#run((source) => source.cancel(token, reason));
  }

  createTask(params: TaskCreateParams): Promise<TaskRecord> {
    return this.#run((source) => source.createTask(params));
  }

  getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.#run((source) => source.getTask(taskId));
  }

  cancelTask(taskId: string, reason?: string): Promise<TaskCancelled> {
    return this.#run((source) => source.cancelTask(taskId, reason));
  }

  listTasks(params?: TaskListParams): Promise<TaskListResult> {
    return this.#run((source) => source.listTasks(params));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#heard?.unhear();
    this.#heard = undefined;
    await this.#starting?.catch(() => {});
    await this.#recovering?.catch(() => {});
    const all = [
      ...(this.#current === undefined ? [] : [this.#current]),
      ...this.#retired.splice(0),
    ];
    await Promise.all(all.map((source) => source.close().catch(() => {})));
  }

  /**
   * Starts establishing the source now, with `first` instead of the establish function: calls
   * wait for it. If it fails, the next call establishes one; the failure is returned for the log.
   */
  establishNow(first: () => Promise<ProgressSource>): Promise<void> {
    return this.#source(first).then(() => {});
  }

  #source(establish = this.#establish): Promise<ProgressSource> {
    if (this.#current !== undefined) return Promise.resolve(this.#current);
    if (this.#closed) {
      return Promise.reject(new BridgeError('closed', 'the progress source was closed'));
    }
    this.#starting ??= establish()
      .then((fresh) => {
        this.#current = fresh;
        this.#hearFrom(fresh);
        return fresh;
      })
      .finally(() => {
        this.#starting = undefined;
      });
    return this.#starting;
  }

  async #run<T>(call: (source: ProgressSource) => Promise<T>): Promise<T> {
    let source = await this.#source();
    if (source.lost === true) source = await this.#recover(source);
    try {
      return await call(source);
    } catch (error) {
      // The daemon went away under this very call: once more, on a new source.
      if (!isLoss(error) || this.#closed) throw error;
      return call(await this.#recover(source));
    }
  }

  /** One recovery at a time; callers that saw the same lost source share it. */
  #recover(lost: ProgressSource): Promise<ProgressSource> {
    const current = this.#current;
    if (current !== undefined && current !== lost) return Promise.resolve(current);
    if (this.#closed) {
      return Promise.reject(new BridgeError('closed', 'the progress source was closed'));
    }
    this.#recovering ??= this.#establish()
      .then((fresh) => {
        this.#retired.push(lost);
        if (lost instanceof RemoteProgressSource) lost.retire().catch(() => {});
        this.#current = fresh;
        this.#hearFrom(fresh);
        return fresh;
      })
      .finally(() => {
        this.#recovering = undefined;
      });
    return this.#recovering;
  }
}
