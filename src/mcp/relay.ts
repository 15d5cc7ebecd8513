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
import { DEFAULT_MIN_INTERVAL_MS, DEFAULT_RELAY_CONNECT_TIMEOUT_MS } from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import {
  ENV_SOCKET,
  ENV_TOKEN,
  readDaemonInfo,
  resolveRuntimeDir,
  resolveSocketPath,
} from '../shared/locate.js';
import {
  type Forwarding,
  forwardProgress,
  PingRecord,
  pingRecordOf,
  type RequestChannel,
} from './forward.js';
import type { McpProgressNotification } from './progress-sends.js';

/** The MCP notification the relay sends; structurally what both SDK majors accept. */
export type { McpProgressNotification } from './progress-sends.js';

interface RequestMeta {
  progressToken?: ProgressToken | undefined;
}

/** The request handler extra of @modelcontextprotocol/sdk 1.x (`extra` in a tool callback). */
export interface SdkV1RequestContext {
  _meta?: RequestMeta | undefined;
  signal: AbortSignal;
  /** The MCP session (Streamable HTTP): what its client answers is remembered per session. */
  sessionId?: string | undefined;
  /** Set for a request that came over HTTP. */
  requestInfo?: unknown;
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
  sessionId?: string | undefined;
  /** Set for a request that came over HTTP. */
  http?: unknown;
  mcpReq: {
    _meta?: RequestMeta | undefined;
    signal: AbortSignal;
    notify(notification: McpProgressNotification): Promise<void>;
    /** Used to ping the client before the result (RESULT_CONFIRM_TIMEOUT_MS). */
    send?(request: { method: 'ping' }, options?: { timeout?: number }): Promise<unknown>;
  };
}

/**
 * The tool context of FastMCP (`context` in `execute`): its reportProgress
 * adds the client's progressToken itself, and does nothing when the request
 * has none.
 */
export interface FastMcpToolContext {
  reportProgress(progress: {
    progress: number;
    total?: number | undefined;
    message?: string | undefined;
  }): Promise<void>;
  signal?: AbortSignal | undefined;
}

export type RelayContext = SdkV1RequestContext | SdkV2RequestContext | FastMcpToolContext;

export interface RelayOptions {
  /** WebSocket URL and secret of the daemon; both default to daemon.json. */
  readonly url?: string | undefined;
  readonly secret?: string | undefined;
  /** Where daemon.json is (default: the runtime-dir rules of the daemon). */
  readonly runtimeDir?: string | undefined;
  /** The worker socket to hand out when url and secret are given (default: the runtime dir's). */
  readonly socket?: string | undefined;
  /** At most one notification per this many ms, always the newest (default {@link DEFAULT_MIN_INTERVAL_MS}; 0 sends every update). */
  readonly minIntervalMs?: number | undefined;
  /** How long to wait for the daemon to connect, and for each answer, before giving up for this call (default {@link DEFAULT_RELAY_CONNECT_TIMEOUT_MS}). */
  readonly connectTimeoutMs?: number | undefined;
  /** How long to keep reconnecting when the daemon goes away mid-call before the relay ends with `gateway_lost` (default DEFAULT_RECONNECT_TIMEOUT_MS of src/shared/defaults.ts). */
  readonly reconnectTimeoutMs?: number | undefined;
  /** Where the warning about an unreachable daemon or an unknown context goes, once per function (default: a line on stderr, once per process). */
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
   * undefined when the relay closes first, relays nothing, a send to the
   * client failed (nobody listens any more: the relay stops by itself), or its
   * daemon went away and did not come back (then `error` says so). Every update
   * before done has been handed to the SDK when it settles.
   */
  readonly done: Promise<DoneParams | undefined>;
  /** Set when relaying ended because the daemon went away for good (`gateway_lost`). */
  readonly error: BridgeError | undefined;
  /** Stops forwarding and drops whatever is still queued; no progress follows. Idempotent. */
  close(): Promise<void>;
}

export const DEFAULT_RELAY_MIN_INTERVAL_MS = DEFAULT_MIN_INTERVAL_MS;

/** One warning per sink: a daemon that is down stays down for many calls. */
const warnedSinks = new WeakSet<(message: string) => void>();

const warnOnStderr = (message: string): void => {
  process.stderr.write(`mcp-progress warn: ${message}\n`);
};

/**
 * Over HTTP without a session (createMcpHandler, or a stateless transport per request) the
 * client answers a ping with a POST of its own, which reaches a fresh server instance, never
 * the one waiting for it: such a ping only waits out its timeout. The result then follows
 * the last value on the same stream, after the gap, as on 2026-07-28.
 */
function statelessHttp(overHttp: boolean, sessionId: string | undefined): boolean {
  return overHttp && sessionId === undefined;
}

/** A tool context, read: where to send, under which label, how to ping; undefined: not one this knows. */
export function requestChannelOf(context: unknown): RequestChannel | undefined {
  if (typeof context !== 'object' || context === null) return undefined;
  const v2 = (context as Partial<SdkV2RequestContext>).mcpReq;
  if (typeof v2 === 'object' && v2 !== null && typeof v2.notify === 'function') {
    const ctx = context as SdkV2RequestContext;
    const token = v2._meta?.progressToken;
    return {
      label: token,
      send: token === undefined ? undefined : (n) => v2.notify(n),
      ping:
        typeof v2.send === 'function' && !statelessHttp(ctx.http !== undefined, ctx.sessionId)
          ? (timeout) => v2.send?.({ method: 'ping' }, { timeout }) ?? Promise.resolve()
          : undefined,
      pings: pingRecordOf({ sessionId: ctx.sessionId, overHttp: ctx.http !== undefined }),
      signal: v2.signal,
    };
  }
  const v1 = context as Partial<SdkV1RequestContext>;
  if (typeof v1.sendNotification === 'function') {
    const token = v1._meta?.progressToken;
    const sendNotification = v1.sendNotification.bind(v1);
    const sendRequest = v1.sendRequest;
    return {
      label: token,
      send: token === undefined ? undefined : (n) => sendNotification(n),
      ping:
        typeof sendRequest === 'function' &&
        !statelessHttp(v1.requestInfo !== undefined, v1.sessionId)
          ? (timeout) => sendRequest.call(v1, { method: 'ping' }, EmptyResultSchema, { timeout })
          : undefined,
      pings: pingRecordOf({ sessionId: v1.sessionId, overHttp: v1.requestInfo !== undefined }),
      signal: v1.signal,
    };
  }
  const fast = context as Partial<FastMcpToolContext>;
  if (typeof fast.reportProgress === 'function') {
    const reportProgress = fast.reportProgress.bind(fast);
    return {
      // FastMCP adds the client's token itself (and drops progress when there is none).
      label: undefined,
      send: ({ params }) => {
        const { progressToken: _routeKey, ...progress } = params;
        return reportProgress(progress);
      },
      ping: undefined,
      pings: new PingRecord(),
      signal: fast.signal,
    };
  }
  return undefined;
}

/**
 * Call inside a tool handler, before spawning the worker; pass `env` to the
 * worker and close the relay (or `await using`) before returning the result.
 */
export async function relayProgress(
  context: RelayContext,
  options: RelayOptions = {},
): Promise<ProgressRelay> {
  const channel = requestChannelOf(context);
  const warn = warningsOf(options);
  if (channel === undefined) {
    warn(
      "progress is not relayed: relayProgress got a context it does not know (expected the tool callback's extra of @modelcontextprotocol/sdk, the ctx of @modelcontextprotocol/server, or a FastMCP context); the tool runs without progress",
    );
    return openRelay(undefined, options, warn);
  }
  // Without a progress token there is nobody to relay to.
  const channelFor = channel.send === undefined ? undefined : () => channel;
  return openRelay(channelFor, options, warn, 'the MCP client cancelled the request');
}

/** Where a relay's channel comes from: its own gateway client and route key (a task's status reads the daemon). */
export type ChannelFor = (client: GatewayClient, routeKey: string) => RequestChannel;

/** A warning sink that says each thing once per sink (see warnedSinks). */
export function warningsOf(options: RelayOptions): (message: string) => void {
  return (message) => {
    const sink = options.onWarning ?? warnOnStderr;
    if (warnedSinks.has(sink)) return;
    warnedSinks.add(sink);
    sink(message);
  };
}

/**
 * A relay into the channel `channelFor` makes, or an inactive one (env only) when there is
 * no channel or no daemon; never throws. `cancelReason` is what the worker's cancel frame says.
 */
export async function openRelay(
  channelFor: ChannelFor | undefined,
  options: RelayOptions,
  warn: (message: string) => void,
  cancelReason = 'the MCP client cancelled the request',
): Promise<ProgressRelay> {
  const routeKey = `relay-${randomUUID()}`;
  const target = await findDaemon(options);
  const env: RelayEnv = { [ENV_SOCKET]: target.socket, [ENV_TOKEN]: routeKey } as RelayEnv;
  if (channelFor === undefined) return inactive(env, routeKey);
  if (target.url === undefined || target.secret === undefined) {
    warn(
      `progress is not relayed: ${target.problem ?? 'no daemon'}; the tool runs without progress`,
    );
    return inactive(env, routeKey);
  }
  try {
    const relay = await activeRelay(
      channelFor,
      { env, routeKey, cancelReason },
      target.gateway,
      options,
      warn,
    );
    relay.done.then(() => {
      if (relay.error !== undefined) warn(`progress relaying ended: ${relay.error.message}`);
    });
    return relay;
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
    case 'daemon_stopping':
      return `${message}; ${runsWithout}.`;
    case 'request_timeout':
    case 'gateway_timeout':
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
  let fallbackSocket: string;
  try {
    fallbackSocket = resolveSocketPath({ socket: options.socket, runtimeDir: options.runtimeDir });
  } catch (error) {
    // No socket to name (a relative $MCP_PROGRESS_RUNTIME_DIR): an empty one leaves the worker's
    // client to look for its own, and to say why it cannot.
    return noDaemon('', error);
  }
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
    return noDaemon(fallbackSocket, error);
  }
}

/** No daemon to relay to, and why: the worker is given `socket` and runs without progress. */
function noDaemon(socket: string, error: unknown): DaemonTarget {
  return {
    socket,
    url: undefined,
    secret: undefined,
    gateway: {},
    problem: (error as Error).message,
  };
}

async function activeRelay(
  channelFor: ChannelFor,
  relay: { env: RelayEnv; routeKey: string; cancelReason: string },
  gateway: GatewayClientOptions,
  options: RelayOptions,
  warn: (message: string) => void,
): Promise<ProgressRelay> {
  const minIntervalMs = Math.min(
    MAX_MIN_INTERVAL_MS,
    Math.max(0, Math.round(options.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS)),
  );
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_RELAY_CONNECT_TIMEOUT_MS;
  // Every request (subscribe, cancel) is bounded too: a stopped daemon must not hold the handler.
  const client = await withTimeout(
    GatewayClient.connect({
      ...gateway,
      requestTimeoutMs: timeoutMs,
      // The same bound on the handshake (and each reconnect's): a silent port is let go, not held.
      handshakeTimeoutMs: timeoutMs,
      reconnectTimeoutMs: options.reconnectTimeoutMs,
      // The relay goes on after a slow-consumer close (with the stream's newest value): said, not hidden.
      onState: (_state, why) => {
        if (why?.code === 'slow_consumer') warn(`progress relaying: ${why.message} (${why.code})`);
      },
    }),
    timeoutMs,
  );
  const { env, routeKey } = relay;
  let forwarding: Forwarding;
  try {
    forwarding = await forwardProgress(
      client,
      { progressToken: routeKey, minIntervalMs },
      channelFor(client, routeKey),
      {
        // The client is this relay's own: closing it drops the subscription in the daemon, so
        // there is no unsubscribe to wait for (a daemon that stopped answering cannot hold us).
        release: () => client.close(),
        // The client cancelled (the request, or the task): tell the worker, then stop.
        onAbort: () => client.cancel(routeKey, relay.cancelReason).then(() => {}),
      },
    );
  } catch (error) {
    await client.close();
    throw error;
  }
  const close = forwarding.stop;
  return {
    env,
    routeKey,
    relaying: true,
    done: forwarding.done,
    get error() {
      return forwarding.error;
    },
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
    error: undefined,
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
