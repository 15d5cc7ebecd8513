/**
 * A gateway client for Node: JSON-RPC over the daemon's WebSocket, with
 * reconnect and resubscribe when the daemon restarts. Used by the relay
 * helper, the MCP server and `tail`. What a subscriber sees stays strictly
 * increasing across reconnects: a replayed snapshot is filtered out here.
 * A daemon found through daemon.json is reached on its local link (a Unix
 * socket) when it publishes one; an explicit URL is always TCP.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect as connectUnix } from 'node:net';
import type WebSocketType from 'ws';
import * as z from 'zod';
import { CLOSE_CODES } from '../protocol/errors.js';
import {
  cancelResultSchema,
  doneParamsSchema,
  emptyResultSchema,
  getResultSchema,
  httpRefusalSchema,
  type ListParams,
  type ListResult,
  listResultSchema,
  type ProgressToken,
  progressParamsSchema,
  type StreamSummary,
  type SubscribeAllParams,
  type SubscribeParams,
} from '../protocol/frames.js';
import { WS_SUBPROTOCOL } from '../protocol/limits.js';
import { isDoneParams, isProgressParams } from '../protocol/notification-guards.js';
import {
  DONE_METHOD,
  type Notification,
  type NotificationHandler,
  PROGRESS_METHOD,
} from '../protocol/notifications.js';
import {
  type TaskCreateParams,
  type TaskListParams,
  type TaskListResult,
  type TaskRecord,
  taskCancelResultSchema,
  taskCreateResultSchema,
  taskGetResultSchema,
  taskListResultSchema,
} from '../protocol/tasks.js';
import {
  backoffDelayMs,
  CLOSE_LINGER_MS,
  DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_RECONNECT_TIMEOUT_MS,
  MAX_TIMER_MS,
  RECONNECT_BACKOFF,
} from '../shared/defaults.js';
import { answeredCode, BridgeError, type BridgeErrorCode } from '../shared/errors.js';
import {
  type DaemonInfo,
  plantedByAnotherUser,
  readDaemonInfo,
  resolveRuntimeDir,
} from '../shared/locate.js';
import {
  EveryStream,
  type LabelledSubscription,
  SubscriptionLabels,
} from '../shared/subscription-labels.js';
import { progressFlows } from '../shared/tiering.js';

// Required, not imported: ws's ESM wrapper costs about 10 MiB of resident memory more than its
// CommonJS entry, in every process that talks to the daemon.
const WebSocket = createRequire(import.meta.url)('ws') as typeof WebSocketType;
type WebSocket = WebSocketType;

export interface GatewayClientOptions {
  /** WebSocket URL and secret; both default to the running daemon's daemon.json. */
  readonly url?: string | undefined;
  readonly secret?: string | undefined;
  /** Where to find daemon.json when url and secret are not given. */
  readonly runtimeDir?: string | undefined;
  /** Reconnect and resubscribe after the connection drops (default true). */
  readonly reconnect?: boolean | undefined;
  /**
   * How long to keep reconnecting once the connection dropped (default
   * {@link DEFAULT_RECONNECT_TIMEOUT_MS}): past it the client gives up, ends every subscription through its
   * `onError` with `gateway_lost`, and rejects requests with that code.
   * Infinity: never give up (`tail` waits for a daemon as long as it runs).
   */
  readonly reconnectTimeoutMs?: number | undefined;
  /**
   * How long one request may wait for its answer before it rejects with
   * `request_timeout` (default {@link DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS}): a daemon that stops answering (stopped,
   * wedged) must not hold a caller forever. The connection stays open: a
   * daemon that resumes answers the next request.
   */
  readonly requestTimeoutMs?: number | undefined;
  /**
   * How long each connect, and each reconnect attempt, may take to complete
   * the WebSocket handshake (default {@link DEFAULT_HANDSHAKE_TIMEOUT_MS}). A port that accepted the TCP
   * connection and did not answer in time (a stopped or hung daemon, another
   * program) rejects with `gateway_timeout`; one that did not even accept it,
   * with `gateway_unreachable`. A reconnect attempt that times out is retried
   * like any other failed one, until `reconnectTimeoutMs`.
   */
  readonly handshakeTimeoutMs?: number | undefined;
  /**
   * The connection's state: 'connected' once a connection is up and has resubscribed
   * (the first before connect() resolves), 'disconnected' when that connection drops.
   * The two strictly alternate, starting with 'connected': a reconnect that drops
   * again before it has resubscribed is reported by neither. Nothing is reported
   * once close() is called (close() itself reports nothing). With 'disconnected' comes
   * why: `slow_consumer` when the daemon closed the connection for leaving its
   * notifications unread (close 4008), else `disconnected`.
   */
  readonly onState?: ((state: 'connected' | 'disconnected', why?: BridgeError) => void) | undefined;
}

/** A JSON-RPC error from the daemon, with its stable code. */
export class GatewayRpcError extends BridgeError {
  readonly rpcCode: number;
  constructor(rpcCode: number, code: BridgeErrorCode, message: string) {
    super(code, message);
    this.name = 'GatewayRpcError';
    this.rpcCode = rpcCode;
  }
}

export type { NotificationHandler } from '../protocol/notifications.js';

interface Pending {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

export class GatewayClient {
  readonly #options: GatewayClientOptions;
  #ws: WebSocket | undefined;
  readonly #pending = new Map<number, Pending>();
  /** Subscriptions by delivered token (the `as` label, or the token itself). */
  readonly #watches = new SubscriptionLabels();
  /** The subscription to every stream, if any: it takes what no label does. */
  #everyStream: { params: SubscribeAllParams; stream: EveryStream } | undefined;
  #onEveryStreamError: ((error: BridgeError) => void) | undefined;
  #nextId = 1;
  /** Where the open connection goes (secret masked), for messages. */
  #url = '';
  #closed = false;
  #attempt = 0;
  /** Connections in a row the daemon closed as a slow consumer; any other end starts it again. */
  #slowCloses = 0;
  #connecting: Promise<void> | undefined;
  /** The connection of the attempt in progress, until its handshake ends either way. */
  #handshaking: WebSocket | undefined;
  /** The connection last reported 'connected', until it is reported 'disconnected'. */
  #reported: WebSocket | undefined;
  /** Why the client gave up reconnecting, once it did. */
  #lost: BridgeError | undefined;
  #giveUpTimer: NodeJS.Timeout | undefined;
  readonly #onError = new WeakMap<LabelledSubscription, (error: BridgeError) => void>();

  private constructor(options: GatewayClientOptions) {
    this.#options = options;
  }

  /**
   * Connects (reading daemon.json unless url and secret are given); rejects if the daemon is not
   * there, or with `daemon_stopping` if it is stopping (connect again once a daemon is back).
   */
  static async connect(options: GatewayClientOptions = {}): Promise<GatewayClient> {
    checkOptions(options);
    const client = new GatewayClient(options);
    await client.#open();
    return client;
  }

  get connected(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN;
  }

  /**
   * Subscribes and calls `handler` with each notification for the token
   * (under `as` when given) until done, unsubscribe or close; `onError`
   * once if it ends otherwise: its daemon went away for good (gateway_lost),
   * or the daemon reconnected to refused its resubscribe (with the daemon's code).
   */
  async subscribe(
    params: SubscribeParams,
    handler: NotificationHandler,
    onError?: (error: BridgeError) => void,
  ): Promise<{ unsubscribe(): Promise<void> }> {
    const entry = this.#watches.add(params, handler);
    if (onError !== undefined) this.#onError.set(entry, onError);
    try {
      await this.#call('progress/subscribe', params, emptyResultSchema);
    } catch (error) {
      this.#watches.remove(entry);
      throw error;
    }
    return {
      unsubscribe: async () => {
        if (!this.#watches.remove(entry)) return;
        if (this.connected)
          await this.request('progress/unsubscribe', { progressToken: params.progressToken }).catch(
            () => {},
          );
      },
    };
  }

  /**
   * Subscribes to every stream (progress/subscribeAll): `handler` gets each active stream's
   * newest value now, then every value of every stream, those that start later from their
   * first, until unsubscribe or close. Streams subscribed to by token go to their own handler.
   * `onError` once if it ends otherwise (as for subscribe). One per client.
   */
  async subscribeAll(
    params: SubscribeAllParams,
    handler: NotificationHandler,
    onError?: (error: BridgeError) => void,
  ): Promise<{ unsubscribe(): Promise<void> }> {
    if (this.#everyStream !== undefined)
      throw new BridgeError(
        'duplicate_subscription',
        'already subscribed to every stream: unsubscribe that one first',
      );
    const entry = { params, stream: new EveryStream(handler) };
    this.#everyStream = entry;
    this.#onEveryStreamError = onError;
    try {
      await this.#call('progress/subscribeAll', params, emptyResultSchema);
    } catch (error) {
      if (this.#everyStream === entry) this.#everyStream = undefined;
      throw error;
    }
    return {
      unsubscribe: async () => {
        if (this.#everyStream !== entry) return;
        this.#everyStream = undefined;
        if (this.connected) await this.request('progress/unsubscribeAll', {}).catch(() => {});
      },
    };
  }

  /** One page of the daemon's streams (all of them when they fit one reply); see `nextCursor`. */
  list(params: ListParams = {}): Promise<ListResult> {
    return this.#call('progress/list', params, listResultSchema);
  }

  /** Every stream, page after page. */
  async listAll(): Promise<StreamSummary[]> {
    const streams: StreamSummary[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.list(cursor === undefined ? {} : { cursor });
      streams.push(...page.streams);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return streams;
  }

  /** One stream by its token, or undefined when the daemon has none. */
  async get(progressToken: ProgressToken): Promise<StreamSummary | undefined> {
    const result = await this.#call('progress/get', { progressToken }, getResultSchema);
    return result.stream;
  }

  /** Asks the daemon to send `cancel` to the stream's workers; returns how many were told. */
  async cancel(progressToken: ProgressToken, reason?: string): Promise<number> {
    const result = await this.#call(
      'progress/cancel',
      reason === undefined ? { progressToken } : { progressToken, reason },
      cancelResultSchema,
    );
    return result.workers;
  }

  /** A task in the daemon's table watching a stream (task/create). */
  async createTask(params: TaskCreateParams): Promise<TaskRecord> {
    return (await this.#call('task/create', params, taskCreateResultSchema)).task;
  }

  /** A task by its id, or undefined when the daemon has none (never created, or expired). */
  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return (await this.#call('task/get', { taskId }, taskGetResultSchema)).task;
  }

  /** Cancels a working task: the daemon tells its stream's workers. */
  cancelTask(
    taskId: string,
    reason?: string,
  ): Promise<{ task?: TaskRecord | undefined; workers: number }> {
    return this.#call(
      'task/cancel',
      reason === undefined ? { taskId } : { taskId, reason },
      taskCancelResultSchema,
    );
  }

  /** One page of the daemon's tasks, oldest first. */
  listTasks(params: TaskListParams = {}): Promise<TaskListResult> {
    return this.#call('task/list', params, taskListResultSchema);
  }

  /** A request whose result is checked against its schema: a mismatch is a bad_reply, never a cast. */
  async #call<S extends z.ZodType>(
    method: string,
    params: unknown,
    schema: S,
  ): Promise<z.infer<S>> {
    const result = await this.request(method, params);
    const parsed = schema.safeParse(result);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const where =
      issue === undefined || issue.path.length === 0 ? 'result' : `result.${issue.path.join('.')}`;
    throw new BridgeError(
      'bad_reply',
      `the daemon answered ${method} with a result that does not match its schema (${where}: ${issue?.message ?? 'invalid'}): is it a different version of mcp-progress-bridge? Restart it with this version`,
    );
  }

  request(method: string, params?: unknown): Promise<unknown> {
    const ws = this.#ws;
    if (ws === undefined || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(
        this.#lost ?? new BridgeError('disconnected', 'not connected to the daemon'),
      );
    }
    const id = this.#nextId++;
    const timeoutMs = this.#options.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(
          new BridgeError(
            'request_timeout',
            `the daemon at ${this.#url} did not answer ${method} within ${timeoutMs} ms (requestTimeoutMs): it may be stopped or overloaded. Check it with "mcp-progress status", and restart it if it does not answer`,
          ),
        );
      }, timeoutMs);
      timer.unref();
      this.#pending.set(id, {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      ws.send(
        JSON.stringify(
          params === undefined
            ? { jsonrpc: '2.0', id, method }
            : { jsonrpc: '2.0', id, method, params },
        ),
      );
    });
  }

  /**
   * Ends the connection and any reconnect under way: from the call on, no handler or onState is
   * called, and no new connection is made.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#giveUpTimer);
    // An attempt still in its handshake ends now, not when its handshake timeout comes.
    this.#handshaking?.terminate();
    const ws = this.#ws;
    this.#ws = undefined;
    this.#failPending(new BridgeError('closed', 'the gateway client was closed'));
    if (ws === undefined || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      ws.once('close', () => resolve());
      ws.close();
      setTimeout(() => {
        ws.terminate();
        resolve();
      }, CLOSE_LINGER_MS).unref();
    });
  }

  async #target(): Promise<Target> {
    const { url, secret } = this.#options;
    if (url !== undefined && secret !== undefined)
      return { url, secret, pid: undefined, socketPath: undefined };
    const info: DaemonInfo = await readDaemonInfo(resolveRuntimeDir(this.#options.runtimeDir));
    const named = url === undefined ? info.gatewaySocket : undefined;
    // A local link whose file is gone (a /tmp cleaner, a hand) leaves the daemon's TCP port.
    const local = named !== undefined && existsSync(named) ? named : undefined;
    // daemon.json is checked as ours; the socket beside it must be too.
    const planted = local === undefined ? undefined : plantedByAnotherUser(local);
    if (planted !== undefined) throw planted;
    return {
      url: local === undefined ? (url ?? info.url) : LOCAL_LINK_URL,
      secret: secret ?? info.secret,
      pid: info.pid,
      socketPath: local,
    };
  }

  #open(): Promise<void> {
    this.#connecting ??= this.#connectOnce().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connectOnce(): Promise<void> {
    const { url, secret, pid, socketPath } = await this.#target();
    // close() came while daemon.json was read: nothing of it may connect after close() returned.
    if (this.#closed) return;
    const where = socketPath === undefined ? withoutSecret(url) : `the local link ${socketPath}`;
    const handshakeTimeoutMs = this.#options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    // Whether the port accepted the TCP connection tells a silent daemon from an unreachable one.
    let accepted = false;
    const ws = new WebSocket(url, WS_SUBPROTOCOL, {
      headers: { authorization: `Bearer ${secret}` },
      perMessageDeflate: false,
      // What the daemon sends is its own JSON.stringify; a byte that is not UTF-8 would still
      // only become U+FFFD in a string the guards then check: not worth a pass over each message.
      skipUTF8Validation: true,
      ...(socketPath !== undefined && {
        createConnection: () => connectUnix({ path: socketPath }),
      }),
      finishRequest: (request) => {
        request.once('socket', (socket) => {
          if (!socket.connecting) accepted = true;
          else
            socket.once('connect', () => {
              accepted = true;
            });
        });
        request.end();
      },
    });
    let handshakeTimer: NodeJS.Timeout | undefined;
    this.#handshaking = ws;
    try {
      await new Promise<void>((resolve, reject) => {
        handshakeTimer = setTimeout(() => {
          reject(
            handshakeTimedOut(where, handshakeTimeoutMs, accepted, pid, socketPath !== undefined),
          );
          ws.terminate();
        }, handshakeTimeoutMs);
        handshakeTimer.unref();
        ws.once('open', () => resolve());
        ws.once('unexpected-response', (_request, response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (text: string) => {
            body += text;
          });
          response.on('end', () => reject(upgradeRefused(where, response.statusCode, body)));
        });
        ws.once('error', (error) =>
          reject(
            new BridgeError(
              'gateway_unreachable',
              `cannot reach the daemon at ${where}: ${error.message}`,
              { cause: error },
            ),
          ),
        );
      });
    } finally {
      clearTimeout(handshakeTimer);
      this.#handshaking = undefined;
    }
    if (this.#closed) {
      ws.close();
      return;
    }
    this.#ws = ws;
    this.#url = where;
    this.#attempt = 0;
    clearTimeout(this.#giveUpTimer);
    this.#giveUpTimer = undefined;
    // A Buffer (binaryType nodebuffer): its own toString, not String(), which looks it up first.
    // A connection no longer current (close() lingering on it) must not reach a handler.
    ws.on('message', (data) => {
      if (this.#ws === ws) this.#message(Buffer.isBuffer(data) ? data.toString() : String(data));
    });
    ws.on('error', () => {});
    ws.on('close', (code: number) => this.#dropped(ws, code));
    // Resubscribe whatever was live before a reconnect.
    for (const watch of this.#watches.live()) {
      await this.request('progress/subscribe', watch.params).catch((error: unknown) =>
        this.#resubscribeFailed(
          JSON.stringify(watch.label),
          () => this.#watches.remove(watch),
          this.#onError.get(watch),
          error,
        ),
      );
    }
    const every = this.#everyStream;
    if (every !== undefined) {
      await this.request('progress/subscribeAll', every.params).catch((error: unknown) =>
        this.#resubscribeFailed(
          'every stream',
          () => {
            if (this.#everyStream !== every) return false;
            this.#everyStream = undefined;
            return true;
          },
          this.#onEveryStreamError,
          error,
        ),
      );
    }
    // Not for a connection that dropped while it resubscribed (its drop already started the
    // next attempt), nor after close(): either would report a connection that is gone.
    if (this.#closed || this.#ws !== ws) return;
    this.#reported = ws;
    this.#options.onState?.('connected');
  }

  /**
   * A resubscribe the new daemon refused (at its subscription cap, a token it no longer takes)
   * or did not answer ends that subscription through its onError, as a loss does: it would
   * otherwise look live and receive nothing. One dropped by the connection dropping again
   * (disconnected) or by close() stays, for the next reconnect to resubscribe or close to end.
   */
  #resubscribeFailed(
    what: string,
    end: () => boolean,
    onError: ((error: BridgeError) => void) | undefined,
    error: unknown,
  ): void {
    const code: BridgeErrorCode = error instanceof BridgeError ? error.code : 'bad_reply';
    if (code === 'disconnected' || code === 'closed' || this.#closed) return;
    if (!end()) return;
    const reason = error instanceof Error ? error.message : String(error);
    onError?.(
      new BridgeError(
        code,
        `resubscribing to ${what} after a reconnect to ${this.#url} failed, so the subscription ended: ${reason}`,
        { cause: error },
      ),
    );
  }

  #dropped(ws: WebSocket, closeCode: number): void {
    if (this.#ws !== ws) return;
    this.#ws = undefined;
    this.#failPending(new BridgeError('disconnected', 'the connection to the daemon dropped'));
    const slow = closeCode === CLOSE_CODES.slow_consumer.code;
    this.#slowCloses = slow ? this.#slowCloses + 1 : 0;
    // A consumer still slow when it is back is closed again once its backlog passes the cap:
    // each repeat waits one step more of the backoff rather than coming back at once.
    if (slow) this.#attempt = this.#slowCloses - 1;
    if (this.#reported === ws) {
      this.#reported = undefined;
      this.#options.onState?.(
        'disconnected',
        slow
          ? slowConsumer(this.#url)
          : new BridgeError(
              'disconnected',
              `the connection to the daemon at ${this.#url} dropped (close ${closeCode})`,
            ),
      );
    }
    if (this.#closed || this.#options.reconnect === false) return;
    const timeoutMs = this.#options.reconnectTimeoutMs ?? DEFAULT_RECONNECT_TIMEOUT_MS;
    if (Number.isFinite(timeoutMs)) {
      this.#giveUpTimer = setTimeout(() => this.#giveUp(timeoutMs), timeoutMs);
      this.#giveUpTimer.unref();
    }
    this.#retry();
  }

  /** No daemon came back in time: stop reconnecting and end every subscription with gateway_lost. */
  #giveUp(timeoutMs: number): void {
    if (this.#closed || this.#ws !== undefined) return;
    this.#closed = true;
    // The URL last connected to (a daemon found through daemon.json has none in the options).
    const given = this.#options.url;
    const url =
      this.#url !== '' ? this.#url : given === undefined ? undefined : withoutSecret(given);
    const lost = new BridgeError(
      'gateway_lost',
      `the daemon${url === undefined ? '' : ` at ${url}`} went away and none came back within ${timeoutMs} ms (reconnectTimeoutMs), so its subscriptions ended: start the daemon (mcp-progress daemon) and subscribe again`,
    );
    this.#lost = lost;
    this.#failPending(lost);
    const ended = this.#watches.live();
    this.#watches.clear();
    for (const entry of ended) this.#onError.get(entry)?.(lost);
    if (this.#everyStream !== undefined) {
      this.#everyStream = undefined;
      this.#onEveryStreamError?.(lost);
    }
  }

  #retry(): void {
    const delay = backoffDelayMs(RECONNECT_BACKOFF, this.#attempt);
    this.#attempt++;
    setTimeout(() => {
      if (this.#closed) return;
      this.#open().catch(() => this.#retry());
    }, delay).unref();
  }

  #failPending(error: Error): void {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  #message(text: string): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    // The hot path: a notification, checked by hand (the same rules as its schema).
    const notification = knownNotification(message);
    if (notification !== undefined) {
      progressFlows();
      if (this.#watches.has(notification.params.progressToken)) this.#watches.deliver(notification);
      else this.#everyStream?.stream.deliver(notification);
      return;
    }
    const incoming = incomingSchema.safeParse(message);
    // Anything else (a newer daemon's notification, garbage) is not for this version: skipped.
    if (!incoming.success) return;
    const data = incoming.data;
    if ('id' in data) {
      const pending = this.#pending.get(data.id);
      if (pending === undefined) return;
      this.#pending.delete(data.id);
      if ('error' in data) {
        pending.reject(
          new GatewayRpcError(
            data.error.code,
            answeredCode(data.error.data?.code),
            data.error.message,
          ),
        );
      } else {
        pending.resolve(data.result);
      }
      return;
    }
    this.#watches.deliver(
      data.method === PROGRESS_METHOD
        ? { jsonrpc: '2.0', method: PROGRESS_METHOD, params: data.params }
        : { jsonrpc: '2.0', method: DONE_METHOD, params: data.params },
    );
  }
}

/**
 * What the daemon sends a gateway client: a reply to one of its requests
 * (ids are the client's own integers), or a notification it knows. A
 * notification's params are checked against the schema; a reply's result
 * is checked by the request that waits for it.
 */
const incomingSchema = z.union([
  z.object({
    jsonrpc: z.literal('2.0'),
    id: z.int(),
    error: z.object({
      code: z.int(),
      message: z.string(),
      data: z.object({ code: z.string().optional() }).optional(),
    }),
  }),
  z.object({ jsonrpc: z.literal('2.0'), id: z.int(), result: z.unknown() }),
  z.object({
    jsonrpc: z.literal('2.0'),
    method: z.literal(PROGRESS_METHOD),
    params: progressParamsSchema,
  }),
  z.object({ jsonrpc: z.literal('2.0'), method: z.literal(DONE_METHOD), params: doneParamsSchema }),
]);

/** Where a gateway client connects, and how: `socketPath` set, over the local link. */
interface Target {
  url: string;
  secret: string;
  pid: number | undefined;
  socketPath: string | undefined;
}

/**
 * The URL of a connection on the local link: ws sends its host as `Host` (the daemon accepts
 * only `localhost` there) and its path as the request target; the socket comes from createConnection.
 */
const LOCAL_LINK_URL = 'ws://localhost/ws';

/**
 * The notification `message` is when it is one this version knows, checked without zod; else
 * undefined, and `incomingSchema` decides (a reply, or something skipped). A message with an
 * `id` always goes there, as the schema's reply branches come first.
 */
function knownNotification(message: unknown): Notification | undefined {
  if (typeof message !== 'object' || message === null || 'id' in message) return undefined;
  const { jsonrpc, method, params } = message as Record<string, unknown>;
  if (jsonrpc !== '2.0') return undefined;
  if (method === PROGRESS_METHOD && isProgressParams(params))
    return { jsonrpc: '2.0', method: PROGRESS_METHOD, params };
  if (method === DONE_METHOD && isDoneParams(params))
    return { jsonrpc: '2.0', method: DONE_METHOD, params };
  return undefined;
}

/** Why the daemon at `where` closed the connection with 4008, and what to do. */
function slowConsumer(where: string): BridgeError {
  return new BridgeError(
    'slow_consumer',
    `the daemon at ${where} closed the connection as a slow consumer (close ${CLOSE_CODES.slow_consumer.code}): it left more than the daemon's --max-session-buffer-bytes of notifications unread, so the values published from then until the reconnect are not delivered; each subscription gets its stream's newest value when it is back, and the reconnect waits longer each time in a row this happens. Handle notifications faster, or start the daemon with a higher --max-session-buffer-bytes`,
  );
}

/**
 * The error of an upgrade the daemon answered with a refusal: `daemon_stopping` when it said it is
 * stopping (a daemon takes sessions again once one is back, so this is a connect-again-later,
 * which a reconnect does by itself), else `gateway_refused` with the daemon's code and reason.
 */
function upgradeRefused(where: string, status: number | undefined, body: string): BridgeError {
  let answer: unknown;
  try {
    answer = JSON.parse(body);
  } catch {
    // Not JSON: not this daemon's refusal (another server on the port, a proxy).
  }
  const refusal = httpRefusalSchema.safeParse(answer);
  if (!refusal.success) {
    return new BridgeError(
      'gateway_refused',
      `the daemon refused the connection (HTTP ${status}): ${body.trim()}`,
    );
  }
  const { message, data } = refusal.data.error;
  if (data.code === 'daemon_stopping') {
    return new BridgeError(
      'daemon_stopping',
      `the daemon at ${where} refused a new session (HTTP ${status}): ${message}`,
    );
  }
  return new BridgeError(
    'gateway_refused',
    `the daemon refused the connection (HTTP ${status}): ${message} (${data.code})`,
  );
}

/**
 * The error of a connect that did not complete its handshake in time: `gateway_timeout` when the
 * port (or the local link's socket) accepted the connection (something there, not answering),
 * else `gateway_unreachable`.
 */
function handshakeTimedOut(
  url: string,
  timeoutMs: number,
  accepted: boolean,
  pid: number | undefined,
  localLink: boolean,
): BridgeError {
  if (!accepted) {
    return new BridgeError(
      'gateway_unreachable',
      `cannot reach the daemon at ${url}: no connection within ${timeoutMs} ms (handshakeTimeoutMs); is the host reachable and the URL right?`,
    );
  }
  const which = pid === undefined ? 'it' : `it (pid ${pid}, from daemon.json)`;
  return new BridgeError(
    'gateway_timeout',
    `the daemon at ${url} accepted the connection but did not answer within ${timeoutMs} ms (handshakeTimeoutMs): it is stopped or hung, or another program listens on its ${localLink ? 'socket' : 'port'}. Check it with "mcp-progress status"; if it does not answer, stop ${which} and start it again with "mcp-progress daemon"`,
  );
}

/** Rejects a timeout the client cannot honour (not a number, not positive, past a timer's range) before it connects. */
function checkOptions(options: GatewayClientOptions): void {
  const bounded = [
    ['requestTimeoutMs', options.requestTimeoutMs],
    ['handshakeTimeoutMs', options.handshakeTimeoutMs],
  ] as const;
  for (const [name, value] of bounded) {
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS)
      throw invalidOption(name, value, `a number of ms above 0 and at most ${MAX_TIMER_MS}`);
  }
  const reconnect = options.reconnectTimeoutMs;
  if (
    reconnect !== undefined &&
    reconnect !== Number.POSITIVE_INFINITY &&
    (typeof reconnect !== 'number' ||
      !Number.isFinite(reconnect) ||
      reconnect < 0 ||
      reconnect > MAX_TIMER_MS)
  )
    throw invalidOption(
      'reconnectTimeoutMs',
      reconnect,
      `a number of ms from 0 to ${MAX_TIMER_MS}, or Infinity (never give up)`,
    );
}

function invalidOption(name: string, value: unknown, expected: string): BridgeError {
  return new BridgeError(
    'invalid_option',
    `GatewayClient option ${name}: expected ${expected}, got ${typeof value === 'number' ? value : JSON.stringify(value)}`,
  );
}

/** A URL fit for a message or a log line: an `access_token` in its query is masked. */
export function withoutSecret(url: string): string {
  return url.replace(/([?&]access_token=)[^&#]*/gi, '$1***');
}
