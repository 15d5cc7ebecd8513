/**
 * A gateway client for Node: JSON-RPC over the daemon's WebSocket, with
 * reconnect and resubscribe when the daemon restarts. Used by the relay
 * helper, the MCP server and `tail`. What a subscriber sees stays strictly
 * increasing across reconnects: a replayed snapshot is filtered out here.
 */
import WebSocket from 'ws';
import type { ListResult, ProgressToken, SubscribeParams } from '../protocol/frames.js';
import { DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS, WS_SUBPROTOCOL } from '../protocol/limits.js';
import type { Notification, NotificationHandler } from '../protocol/notifications.js';
import { answeredCode, BridgeError, type BridgeErrorCode } from '../shared/errors.js';
import { type DaemonInfo, readDaemonInfo, resolveRuntimeDir } from '../shared/locate.js';

export interface GatewayClientOptions {
  /** WebSocket URL and secret; both default to the running daemon's daemon.json. */
  readonly url?: string | undefined;
  readonly secret?: string | undefined;
  /** Where to find daemon.json when url and secret are not given. */
  readonly runtimeDir?: string | undefined;
  /** Reconnect and resubscribe after the connection drops (default true). */
  readonly reconnect?: boolean | undefined;
  /**
   * How long one request may wait for its answer before it rejects with
   * `request_timeout` (default 10000): a daemon that stops answering (stopped,
   * wedged) must not hold a caller forever.
   */
  readonly requestTimeoutMs?: number | undefined;
  /** Called on each connect (after resubscribing) and each drop. */
  readonly onState?: ((state: 'connected' | 'disconnected') => void) | undefined;
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

interface Watch {
  readonly params: SubscribeParams;
  readonly handler: NotificationHandler;
  /** The last progress delivered, so a resubscribe snapshot is not repeated. */
  lastProgress: number | undefined;
  ended: boolean;
}

interface Pending {
  resolve(result: unknown): void;
  reject(error: Error): void;
}

const BACKOFF_MS = [50, 100, 200, 400, 800, 1600, 2000] as const;

export class GatewayClient {
  readonly #options: GatewayClientOptions;
  #ws: WebSocket | undefined;
  readonly #pending = new Map<number, Pending>();
  /** Subscriptions by delivered token (the `as` label, or the token itself). */
  readonly #watches = new Map<ProgressToken, Watch>();
  #nextId = 1;
  #closed = false;
  #attempt = 0;
  #connecting: Promise<void> | undefined;

  private constructor(options: GatewayClientOptions) {
    this.#options = options;
  }

  /** Connects (reading daemon.json unless url and secret are given); rejects if the daemon is not there. */
  static async connect(options: GatewayClientOptions = {}): Promise<GatewayClient> {
    const client = new GatewayClient(options);
    await client.#open();
    return client;
  }

  get connected(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN;
  }

  /**
   * Subscribes and calls `handler` with each notification for the token
   * (under `as` when given) until done, unsubscribe or close.
   */
  async subscribe(
    params: SubscribeParams,
    handler: NotificationHandler,
  ): Promise<{ unsubscribe(): Promise<void> }> {
    const label = params.as ?? params.progressToken;
    if (this.#watches.has(label)) {
      throw new BridgeError(
        'duplicate_subscription',
        `already subscribed under token ${JSON.stringify(label)}`,
      );
    }
    const watch: Watch = { params, handler, lastProgress: undefined, ended: false };
    this.#watches.set(label, watch);
    try {
      await this.request('progress/subscribe', params);
    } catch (error) {
      this.#watches.delete(label);
      throw error;
    }
    return {
      unsubscribe: async () => {
        if (this.#watches.get(label) !== watch) return;
        this.#watches.delete(label);
        watch.ended = true;
        if (this.connected)
          await this.request('progress/unsubscribe', { progressToken: params.progressToken }).catch(
            () => {},
          );
      },
    };
  }

  list(): Promise<ListResult> {
    return this.request('progress/list') as Promise<ListResult>;
  }

  /** Asks the daemon to send `cancel` to the stream's workers; returns how many were told. */
  async cancel(progressToken: ProgressToken, reason?: string): Promise<number> {
    const result = (await this.request(
      'progress/cancel',
      reason === undefined ? { progressToken } : { progressToken, reason },
    )) as {
      workers: number;
    };
    return result.workers;
  }

  request(method: string, params?: unknown): Promise<unknown> {
    const ws = this.#ws;
    if (ws === undefined || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new BridgeError('disconnected', 'not connected to the daemon'));
    }
    const id = this.#nextId++;
    const timeoutMs = this.#options.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(
          new BridgeError(
            'request_timeout',
            `the daemon did not answer ${method} within ${timeoutMs} ms: it may be stopped or overloaded`,
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

  async close(): Promise<void> {
    this.#closed = true;
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
      }, 1000).unref();
    });
  }

  async #target(): Promise<{ url: string; secret: string }> {
    const { url, secret } = this.#options;
    if (url !== undefined && secret !== undefined) return { url, secret };
    const info: DaemonInfo = await readDaemonInfo(resolveRuntimeDir(this.#options.runtimeDir));
    return { url: url ?? info.url, secret: secret ?? info.secret };
  }

  #open(): Promise<void> {
    this.#connecting ??= this.#connectOnce().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connectOnce(): Promise<void> {
    const { url, secret } = await this.#target();
    const ws = new WebSocket(url, WS_SUBPROTOCOL, {
      headers: { authorization: `Bearer ${secret}` },
      perMessageDeflate: false,
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_request, response) => {
        let body = '';
        response.setEncoding('utf8').on('data', (text: string) => {
          body += text;
        });
        response.on('end', () =>
          reject(
            new BridgeError(
              'gateway_refused',
              `the daemon refused the connection (HTTP ${response.statusCode}): ${body.trim()}`,
            ),
          ),
        );
      });
      ws.once('error', (error) =>
        reject(
          new BridgeError(
            'gateway_unreachable',
            `cannot reach the daemon at ${withoutSecret(url)}: ${error.message}`,
            { cause: error },
          ),
        ),
      );
    });
    if (this.#closed) {
      ws.close();
      return;
    }
    this.#ws = ws;
    this.#attempt = 0;
    ws.on('message', (data) => this.#message(String(data)));
    ws.on('error', () => {});
    ws.on('close', () => this.#dropped(ws));
    // Resubscribe whatever was live before a reconnect.
    for (const watch of this.#watches.values()) {
      if (!watch.ended) await this.request('progress/subscribe', watch.params).catch(() => {});
    }
    this.#options.onState?.('connected');
  }

  #dropped(ws: WebSocket): void {
    if (this.#ws !== ws) return;
    this.#ws = undefined;
    this.#failPending(new BridgeError('disconnected', 'the connection to the daemon dropped'));
    this.#options.onState?.('disconnected');
    if (!this.#closed && this.#options.reconnect !== false) this.#retry();
  }

  #retry(): void {
    const delay = BACKOFF_MS[Math.min(this.#attempt, BACKOFF_MS.length - 1)] ?? 2000;
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
    let message: {
      id?: number;
      result?: unknown;
      error?: { code: number; message: string; data?: { code?: string } };
      method?: string;
      params?: unknown;
    };
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof message.id === 'number') {
      const pending = this.#pending.get(message.id);
      if (pending === undefined) return;
      this.#pending.delete(message.id);
      if (message.error) {
        pending.reject(
          new GatewayRpcError(
            message.error.code,
            answeredCode(message.error.data?.code),
            message.error.message,
          ),
        );
      } else {
        pending.resolve(message.result);
      }
      return;
    }
    if (
      message.method === 'notifications/progress' ||
      message.method === 'notifications/progress/done'
    ) {
      this.#notify(message as Notification);
    }
  }

  #notify(notification: Notification): void {
    const watch = this.#watches.get(notification.params.progressToken);
    if (watch === undefined || watch.ended) return;
    if (notification.method === 'notifications/progress') {
      const { progress } = notification.params;
      if (watch.lastProgress !== undefined && !(progress > watch.lastProgress)) return;
      watch.lastProgress = progress;
    } else {
      watch.ended = true;
      this.#watches.delete(notification.params.progressToken);
    }
    watch.handler(notification);
  }
}

/** A URL fit for a message or a log line: an `access_token` in its query is masked. */
export function withoutSecret(url: string): string {
  return url.replace(/([?&]access_token=)[^&#]*/gi, '$1***');
}
