/**
 * relayProgress: for MCP servers written in Node. Inside a tool handler it
 * gives the worker the handler spawns a socket and a fresh route key, and
 * forwards the worker's progress to the MCP client under the client's own
 * progressToken, through the request-scoped send (so that over Streamable
 * HTTP it flows on the request's own SSE stream). It never throws into the
 * handler: a message about work must not kill the work.
 */
import { randomUUID } from 'node:crypto';
import { EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  GatewayClient,
  type GatewayClientOptions,
  withoutSecret,
} from '../gateway-client/gateway-client.js';
import type { DoneParams, ProgressToken } from '../protocol/frames.js';
import { MAX_MIN_INTERVAL_MS } from '../protocol/limits.js';
import { PROGRESS_METHOD } from '../protocol/notifications.js';
import { BridgeError } from '../shared/errors.js';
import {
  ENV_SOCKET,
  ENV_TOKEN,
  readDaemonInfo,
  resolveRuntimeDir,
  resolveSocketPath,
} from '../shared/locate.js';
import { type McpProgressNotification, ProgressSends } from './progress-sends.js';

/** The MCP notification the relay sends; structurally what both SDK majors accept. */
export type { McpProgressNotification } from './progress-sends.js';

interface RequestMeta {
  progressToken?: ProgressToken | undefined;
}

/** The request handler extra of @modelcontextprotocol/sdk 1.x (`extra` in a tool callback). */
export interface SdkV1RequestContext {
  _meta?: RequestMeta | undefined;
  signal: AbortSignal;
  sendNotification(notification: McpProgressNotification): Promise<void>;
  /** Used to ping the client before the result (RESULT_CONFIRM_TIMEOUT_MS). */
  sendRequest?(
    request: { method: 'ping' },
    resultSchema: typeof EmptyResultSchema,
    options?: { timeout?: number },
  ): Promise<unknown>;
}

/** The server context of @modelcontextprotocol/server 2.x (`ctx` in a tool callback). */
export interface SdkV2RequestContext {
  mcpReq: {
    _meta?: RequestMeta | undefined;
    signal: AbortSignal;
    notify(notification: McpProgressNotification): Promise<void>;
    /** Used to ping the client before the result (RESULT_CONFIRM_TIMEOUT_MS). */
    send?(request: { method: 'ping' }, options?: { timeout?: number }): Promise<unknown>;
  };
}

export type RelayContext = SdkV1RequestContext | SdkV2RequestContext;

export interface RelayOptions {
  /** WebSocket URL and secret of the daemon; both default to daemon.json. */
  readonly url?: string | undefined;
  readonly secret?: string | undefined;
  /** Where daemon.json is (default: the runtime-dir rules of the daemon). */
  readonly runtimeDir?: string | undefined;
  /** The worker socket to hand out when url and secret are given (default: the runtime dir's). */
  readonly socket?: string | undefined;
  /** At most one notification per this many ms, always the newest (default 100; 0 sends every update). */
  readonly minIntervalMs?: number | undefined;
  /** How long to wait for the daemon to connect, and for each answer, before giving up for this call (default 2000). */
  readonly connectTimeoutMs?: number | undefined;
  /** Where the warning about an unreachable daemon goes, once per function (default: a line on stderr, once per process). */
  readonly onWarning?: ((message: string) => void) | undefined;
}

export interface RelayEnv {
  MCP_PROGRESS_SOCKET: string;
  MCP_PROGRESS_TOKEN: string;
  /** Lets the env be spread into `process.env`-shaped objects. */
  [name: string]: string;
}

export interface ProgressRelay extends AsyncDisposable {
  /** For the worker: where to publish and under which token. Usable even when nothing is relayed. */
  readonly env: RelayEnv;
  /** The token the worker publishes under (also env.MCP_PROGRESS_TOKEN). */
  readonly routeKey: string;
  /** True when progress is forwarded to the client; false without a token or a daemon. */
  readonly relaying: boolean;
  /**
   * Settles when the worker sends done (with its done params), or with
   * undefined when the relay closes first or relays nothing. Every update
   * before done has been handed to the SDK when it settles.
   */
  readonly done: Promise<DoneParams | undefined>;
  /** Stops forwarding and drops whatever is still queued; no progress follows. Idempotent. */
  close(): Promise<void>;
}

export const DEFAULT_RELAY_MIN_INTERVAL_MS = 100;
const DEFAULT_CONNECT_TIMEOUT_MS = 2000;

/** One warning per sink: a daemon that is down stays down for many calls. */
const warnedSinks = new WeakSet<(message: string) => void>();

const warnOnStderr = (message: string): void => {
  process.stderr.write(`mcp-progress warn: ${message}\n`);
};

interface RequestScope {
  readonly token: ProgressToken | undefined;
  readonly signal: AbortSignal | undefined;
  readonly send: ((notification: McpProgressNotification) => Promise<void>) | undefined;
  readonly ping: ((timeoutMs: number) => Promise<unknown>) | undefined;
}

function requestScope(context: RelayContext): RequestScope {
  if ('mcpReq' in context && typeof context.mcpReq === 'object' && context.mcpReq !== null) {
    const request = context.mcpReq;
    return {
      token: request._meta?.progressToken,
      signal: request.signal,
      send: typeof request.notify === 'function' ? (n) => request.notify(n) : undefined,
      ping:
        typeof request.send === 'function'
          ? (timeout) => request.send?.({ method: 'ping' }, { timeout }) ?? Promise.resolve()
          : undefined,
    };
  }
  const extra = context as SdkV1RequestContext;
  return {
    token: extra._meta?.progressToken,
    signal: extra.signal,
    send:
      typeof extra.sendNotification === 'function' ? (n) => extra.sendNotification(n) : undefined,
    ping:
      typeof extra.sendRequest === 'function'
        ? (timeout) =>
            extra.sendRequest?.({ method: 'ping' }, EmptyResultSchema, { timeout }) ??
            Promise.resolve()
        : undefined,
  };
}

/**
 * Call inside a tool handler, before spawning the worker; pass `env` to the
 * worker and close the relay (or `await using`) before returning the result.
 */
export async function relayProgress(
  context: RelayContext,
  options: RelayOptions = {},
): Promise<ProgressRelay> {
  const scope = requestScope(context);
  const routeKey = `relay-${randomUUID()}`;
  const warn = (message: string) => {
    const sink = options.onWarning ?? warnOnStderr;
    if (warnedSinks.has(sink)) return;
    warnedSinks.add(sink);
    sink(message);
  };
  const target = await findDaemon(options);
  const env: RelayEnv = { [ENV_SOCKET]: target.socket, [ENV_TOKEN]: routeKey } as RelayEnv;
  const { token, signal, send, ping } = scope;
  if (token === undefined || send === undefined) return inactive(env, routeKey);
  if (target.url === undefined || target.secret === undefined) {
    warn(
      `progress is not relayed: ${target.problem ?? 'no daemon'}; the tool runs without progress`,
    );
    return inactive(env, routeKey);
  }
  try {
    return await activeRelay({ token, signal, send, ping }, env, routeKey, target.gateway, options);
  } catch (error) {
    warn(`progress is not relayed: ${whyNotRelayed(error, withoutSecret(target.url))}`);
    return inactive(env, routeKey);
  }
}

/** The warning for an error of activeRelay, worded from its code (each message says once where). */
function whyNotRelayed(error: unknown, url: string): string {
  const code = error instanceof BridgeError ? error.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const runsWithout = 'the tool runs without progress';
  switch (code) {
    case 'gateway_unreachable':
      // The message already reads "cannot reach the daemon at <url>: <reason>".
      return `${message}; ${runsWithout}. Start it with "mcp-progress daemon".`;
    case 'connect_timeout':
      return `the daemon at ${url} did not answer the connection (${message}); ${runsWithout}. Is it stopped or overloaded?`;
    case 'gateway_refused':
      return `${message}; ${runsWithout}.`;
    case 'request_timeout':
      return `${message}; ${runsWithout}.`;
    default:
      return `the daemon at ${url} refused the subscription (${code ?? 'error'}: ${message}); ${runsWithout}.`;
  }
}

interface DaemonTarget {
  socket: string;
  url: string | undefined;
  secret: string | undefined;
  /** How the gateway client finds the daemon again after a restart. */
  gateway: GatewayClientOptions;
  problem: string | undefined;
}

async function findDaemon(options: RelayOptions): Promise<DaemonTarget> {
  const fallbackSocket = resolveSocketPath({
    socket: options.socket,
    runtimeDir: options.runtimeDir,
  });
  if (options.url !== undefined && options.secret !== undefined) {
    const gateway = { url: options.url, secret: options.secret };
    return { socket: fallbackSocket, ...gateway, gateway, problem: undefined };
  }
  try {
    const info = await readDaemonInfo(resolveRuntimeDir(options.runtimeDir));
    return {
      socket: options.socket ?? info.socket,
      url: options.url ?? info.url,
      secret: options.secret ?? info.secret,
      // Found through daemon.json: read it again at each reconnect, since a restarted daemon has a new secret.
      gateway: { url: options.url, secret: options.secret, runtimeDir: options.runtimeDir },
      problem: undefined,
    };
  } catch (error) {
    return {
      socket: fallbackSocket,
      url: undefined,
      secret: undefined,
      gateway: {},
      problem: (error as Error).message,
    };
  }
}

async function activeRelay(
  scope: {
    token: ProgressToken;
    signal: AbortSignal | undefined;
    send: (notification: McpProgressNotification) => Promise<void>;
    ping: ((timeoutMs: number) => Promise<unknown>) | undefined;
  },
  env: RelayEnv,
  routeKey: string,
  gateway: GatewayClientOptions,
  options: RelayOptions,
): Promise<ProgressRelay> {
  const minIntervalMs = Math.min(
    MAX_MIN_INTERVAL_MS,
    Math.max(0, Math.round(options.minIntervalMs ?? DEFAULT_RELAY_MIN_INTERVAL_MS)),
  );
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  // Every request (subscribe, cancel) is bounded too: a stopped daemon must not hold the handler.
  const client = await withTimeout(
    GatewayClient.connect({ ...gateway, requestTimeoutMs: timeoutMs }),
    timeoutMs,
  );
  let forwarding = true;
  const sends = new ProgressSends(scope.send, { confirm: scope.ping });
  let settle: (done: DoneParams | undefined) => void = () => {};
  const done = new Promise<DoneParams | undefined>((resolve) => {
    settle = resolve;
  });
  try {
    await client.subscribe(
      { progressToken: routeKey, as: scope.token, minIntervalMs },
      (notification) => {
        if (!forwarding) return;
        if (notification.method === PROGRESS_METHOD) {
          sends.push(notification.params);
        } else {
          // The worker is done: nothing more to forward; the handler decides when to return.
          forwarding = false;
          const params = notification.params;
          // Settled only once the result may follow the last notification (RESULT_GAP_MS).
          sends.drain({ confirm: !scope.signal?.aborted }).then(() => settle(params));
        }
      },
    );
  } catch (error) {
    await client.close();
    throw error;
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      forwarding = false;
      scope.signal?.removeEventListener('abort', onAbort);
      // The client is this relay's own: closing it drops the subscription in the daemon, so
      // there is no unsubscribe to wait for (a daemon that stopped answering cannot hold us).
      await client.close();
      // Sends already handed to the SDK go out before the result does, with the gap it needs.
      await sends.drain({ confirm: !scope.signal?.aborted });
      settle(undefined);
    })();
    return closing;
  };
  const onAbort = () => {
    // The client cancelled the request (notifications/cancelled): tell the worker, then stop.
    client
      .cancel(routeKey, 'the MCP client cancelled the request')
      .catch(() => {})
      .finally(() => close());
  };
  if (scope.signal?.aborted) onAbort();
  else scope.signal?.addEventListener('abort', onAbort, { once: true });

  return {
    env,
    routeKey,
    relaying: true,
    done,
    close,
    [Symbol.asyncDispose]: close,
  };
}

function inactive(env: RelayEnv, routeKey: string): ProgressRelay {
  const close = async () => {};
  return {
    env,
    routeKey,
    relaying: false,
    done: Promise.resolve(undefined),
    close,
    [Symbol.asyncDispose]: close,
  };
}

function withTimeout<T extends { close(): Promise<void> }>(
  connecting: Promise<T>,
  timeoutMs: number,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new BridgeError('connect_timeout', `no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    connecting.then(
      (value) => {
        clearTimeout(timer);
        if (late) value.close().catch(() => {});
        else resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
