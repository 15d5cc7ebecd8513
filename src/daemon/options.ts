/**
 * Daemon options: every default in one place, every value checked up front,
 * so that a bad option fails at start with a message naming it.
 */
import { isIP } from 'node:net';
import { FRAME_TIMEOUT_MS, MAX_FRAME_BYTES, MAX_MIN_INTERVAL_MS } from '../protocol/limits.js';
import { BridgeError } from '../shared/errors.js';
import { defaultSocketPath, resolveRuntimeDir } from '../shared/locate.js';
import { LOG_LEVELS, type LogLevel } from '../shared/log.js';
import { DEFAULT_ROUTER_OPTIONS, type RouterOptions } from './router.js';

export const DEFAULT_PORT = 7717;
export const DEFAULT_HOST = '127.0.0.1';

export interface DaemonOptions {
  readonly runtimeDir: string;
  readonly socketPath: string;
  readonly host: string;
  /** 0 picks a free port; daemon.json shows the real URL. */
  readonly port: number;
  /** Bind a non-loopback host; off unless asked for. */
  readonly allowRemote: boolean;
  /** Origins a browser-based gateway may connect from. Requests with no Origin are allowed. */
  readonly allowOrigins: readonly string[];
  readonly logLevel: LogLevel;
  readonly router: RouterOptions;
  readonly maxConnections: number;
  readonly maxSessions: number;
  readonly maxFrameBytes: number;
  readonly frameTimeoutMs: number;
  /** Replies a worker has not read, past which it is disconnected. */
  readonly maxPendingReplyBytes: number;
  /** Notifications a session has not read, past which it is closed (close code 4008). */
  readonly maxSessionBufferBytes: number;
  /** Gateway connections that have not presented the secret; past it new ones are refused at once. */
  readonly maxPendingConnections: number;
  /** How long a gateway connection has to present the secret before it is closed. */
  readonly handshakeTimeoutMs: number;
  /** A WebSocket session heard nothing from for this long is pinged; 0 = no keepalive. */
  readonly pingIntervalMs: number;
  /** A pinged WebSocket session that does not pong within this is closed. */
  readonly pongTimeoutMs: number;
  /** How long a graceful stop waits for connections to drain. */
  readonly shutdownGraceMs: number;
  /** Fixed secret for tests and supervised setups; a random one otherwise. */
  readonly secret: string | undefined;
}

export const DEFAULTS = {
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  allowRemote: false,
  logLevel: 'info' as LogLevel,
  maxConnections: 10_000,
  maxSessions: 10_000,
  maxFrameBytes: MAX_FRAME_BYTES,
  frameTimeoutMs: FRAME_TIMEOUT_MS,
  maxPendingReplyBytes: 1024 * 1024,
  maxSessionBufferBytes: 8 * 1024 * 1024,
  maxPendingConnections: 128,
  handshakeTimeoutMs: 5000,
  pingIntervalMs: 30_000,
  pongTimeoutMs: 10_000,
  shutdownGraceMs: 2000,
} as const;

export type DaemonOptionsInput = {
  -readonly [K in keyof Omit<DaemonOptions, 'router'>]?: DaemonOptions[K] | undefined;
} & { router?: { [K in keyof RouterOptions]?: RouterOptions[K] | undefined } | undefined };

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith('127.');
}

/** Fills defaults and checks every value. Throws BridgeError('invalid_option') naming the option. */
export function resolveDaemonOptions(
  input: DaemonOptionsInput = {},
  env = process.env,
): DaemonOptions {
  const runtimeDir = resolveRuntimeDir(input.runtimeDir, env);
  const router: RouterOptions = { ...DEFAULT_ROUTER_OPTIONS, ...definedOnly(input.router ?? {}) };
  integer('retention-ms', router.retentionMs, 0);
  integer('ttl-ms', router.streamTtlMs, 1);
  integer('abandon-grace-ms', router.abandonGraceMs, 0);
  integer('max-streams', router.maxStreams, 1);
  integer('max-streams-per-connection', router.maxStreamsPerConnection, 1);
  integer('max-subscriptions', router.maxSubscriptionsPerSubscriber, 1);
  integer('min-interval-ms', router.defaultMinIntervalMs, 0, MAX_MIN_INTERVAL_MS);
  const options: DaemonOptions = {
    runtimeDir,
    socketPath: input.socketPath ?? defaultSocketPath(runtimeDir),
    host: input.host ?? DEFAULTS.host,
    port: input.port ?? DEFAULTS.port,
    allowRemote: input.allowRemote ?? DEFAULTS.allowRemote,
    allowOrigins: input.allowOrigins ?? [],
    logLevel: input.logLevel ?? DEFAULTS.logLevel,
    router,
    maxConnections: input.maxConnections ?? DEFAULTS.maxConnections,
    maxSessions: input.maxSessions ?? DEFAULTS.maxSessions,
    maxFrameBytes: input.maxFrameBytes ?? DEFAULTS.maxFrameBytes,
    frameTimeoutMs: input.frameTimeoutMs ?? DEFAULTS.frameTimeoutMs,
    maxPendingReplyBytes: input.maxPendingReplyBytes ?? DEFAULTS.maxPendingReplyBytes,
    maxSessionBufferBytes: input.maxSessionBufferBytes ?? DEFAULTS.maxSessionBufferBytes,
    maxPendingConnections: input.maxPendingConnections ?? DEFAULTS.maxPendingConnections,
    handshakeTimeoutMs: input.handshakeTimeoutMs ?? DEFAULTS.handshakeTimeoutMs,
    pingIntervalMs: input.pingIntervalMs ?? DEFAULTS.pingIntervalMs,
    pongTimeoutMs: input.pongTimeoutMs ?? DEFAULTS.pongTimeoutMs,
    shutdownGraceMs: input.shutdownGraceMs ?? DEFAULTS.shutdownGraceMs,
    secret: input.secret,
  };
  integer('port', options.port, 0, 65_535);
  integer('max-connections', options.maxConnections, 1);
  integer('max-sessions', options.maxSessions, 1);
  integer('max-frame-bytes', options.maxFrameBytes, 256, MAX_FRAME_BYTES);
  integer('frame-timeout-ms', options.frameTimeoutMs, 1);
  integer('max-pending-reply-bytes', options.maxPendingReplyBytes, 1024);
  integer('max-session-buffer-bytes', options.maxSessionBufferBytes, 1024);
  integer('shutdown-grace-ms', options.shutdownGraceMs, 0);
  integer('max-pending-connections', options.maxPendingConnections, 1);
  integer('handshake-timeout-ms', options.handshakeTimeoutMs, 1);
  integer('ping-interval-ms', options.pingIntervalMs, 0);
  integer('pong-timeout-ms', options.pongTimeoutMs, 1);
  if (!LOG_LEVELS.includes(options.logLevel)) {
    invalid('log-level', `one of ${LOG_LEVELS.join(', ')}`, options.logLevel);
  }
  if (options.host !== 'localhost' && isIP(options.host) === 0) {
    invalid('host', 'an IP address such as 127.0.0.1 or ::1', options.host);
  }
  if (!isLoopback(options.host) && !options.allowRemote) {
    throw new BridgeError(
      'invalid_option',
      `--host ${options.host} is not a loopback address: the gateway would be reachable from other machines. Pass --allow-remote as well if that is what you want`,
    );
  }
  for (const origin of options.allowOrigins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) {
      invalid(
        'allow-origin',
        'an origin such as http://localhost:5173 (scheme, host and port, no path)',
        origin,
      );
    }
  }
  if (options.secret !== undefined && options.secret.length < 16) {
    invalid('secret', 'at least 16 characters', `${options.secret.length} characters`);
  }
  if (!options.socketPath) invalid('socket', 'a path', options.socketPath);
  return options;
}

function integer(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    invalid(
      name,
      max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`,
      value,
    );
  }
}

function invalid(name: string, expected: string, got: unknown): never {
  throw new BridgeError(
    'invalid_option',
    `option --${name}: expected ${expected}, got ${JSON.stringify(got)}`,
  );
}

function definedOnly<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
