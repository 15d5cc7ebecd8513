/**
 * Daemon options: every option in one table, its default a constant of src/shared/defaults.ts
 * (or of src/protocol/limits.ts), every value checked up front, so that a bad option fails at
 * start with a message naming it.
 */

import { createHash } from 'node:crypto';
import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { hostname, userInfo } from 'node:os';
import { resolve } from 'node:path';
import {
  FRAME_TIMEOUT_MS,
  fitsUtf8Bytes,
  MAX_FRAME_BYTES,
  MAX_HOST_NAME_BYTES,
  MAX_MIN_INTERVAL_MS,
  MIN_SESSION_BUFFER_BYTES,
  utf8ByteLength,
} from '../protocol/limits.js';
import {
  BACKPLANE_CONFIRM_MS,
  BACKPLANE_MISSED_HEARTBEATS,
  BACKPLANE_STALL_HEARTBEATS,
  DEFAULT_ABANDON_GRACE_MS,
  DEFAULT_DAEMON_LOG_LEVEL,
  DEFAULT_GATEWAY_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_MAX_CLAIMS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_JOURNAL_BYTES,
  DEFAULT_MAX_PENDING_CONNECTIONS,
  DEFAULT_MAX_PENDING_REPLY_BYTES,
  DEFAULT_MAX_SESSION_BUFFER_BYTES,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_CONNECTION,
  DEFAULT_MAX_SUBSCRIBE_ALL,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_NATS_HEARTBEAT_MS,
  DEFAULT_NATS_PREFIX,
  DEFAULT_PING_INTERVAL_MS,
  DEFAULT_PONG_TIMEOUT_MS,
  DEFAULT_PORT,
  DEFAULT_RETENTION_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  DEFAULT_STREAM_TTL_MS,
  MAX_TIMER_MS,
  MIN_FRAME_BYTES,
  MIN_JOURNAL_BYTES,
  MIN_NATS_HEARTBEAT_MS,
  MIN_PAGE_COOKIE_TTL_MS,
  MIN_PENDING_REPLY_BYTES,
  PAGE_COOKIE_TTL_MS,
  PAGE_SESSION_MAX_MS,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { defaultSocketPath, resolveRuntimeDir } from '../shared/locate.js';
import { LOG_LEVELS, type LogLevel } from '../shared/log.js';
import { checkInteger as integer, invalidOption as invalid } from '../shared/option-table.js';
import { DEFAULT_ROUTER_OPTIONS, type RouterOptions } from './router.js';

export { DEFAULT_HOST, DEFAULT_NATS_PREFIX, DEFAULT_PORT, MAX_TIMER_MS };

/** A NATS subject token of safe characters only: no dots, wildcards or spaces. */
const SUBJECT_TOKEN = /^[A-Za-z0-9_-]+$/;
/** A --nats-name: a subject token, `@` allowed too (the default is user@host). */
const NATS_NAME = /^[A-Za-z0-9_@-]+$/;

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
  /** The most bytes dones.jsonl may hold; a done that would pass it is refused `journal_failed`. */
  readonly maxJournalBytes: number;
  /** Gateway connections that have not presented the secret; past it new ones are refused at once. */
  readonly maxPendingConnections: number;
  /** How long a gateway connection has to present the secret before it is closed. */
  readonly handshakeTimeoutMs: number;
  /** A WebSocket session heard nothing from for this long is pinged; 0 = no keepalive. */
  readonly pingIntervalMs: number;
  /** A pinged WebSocket session that does not pong within this is closed. */
  readonly pongTimeoutMs: number;
  /** How long a page cookie admits; an open page renews its own at half this. */
  readonly pageCookieMs: number;
  /** How long one redeemed ticket admits, renewals included. */
  readonly pageSessionMs: number;
  /** How long a graceful stop waits for connections to drain. */
  readonly shutdownGraceMs: number;
  /** Fixed secret for tests and supervised setups; a random one otherwise. */
  readonly secret: string | undefined;
  /** NATS servers of the backplane (docs/BACKPLANE.md); empty: no backplane, nothing of NATS loaded. */
  readonly nats: readonly string[];
  /** The first subject token of every backplane subject. */
  readonly natsPrefix: string;
  /** This daemon's name on the backplane: a subject token, shown as `host` in progress/list. */
  readonly natsName: string;
  readonly natsCreds: string | undefined;
  readonly natsCa: string | undefined;
  /** How often this daemon says it is alive; a host silent for 3 of these is lost, and so is NATS unanswered for 3. */
  readonly natsHeartbeatMs: number;
}

/** Where an option's value lives: a DaemonOptions field, or a RouterOptions field under `router`. */
type OptionKey =
  | { readonly daemon: Exclude<keyof DaemonOptions, 'router'> }
  | { readonly router: keyof RouterOptions };

export type OptionSection =
  | 'Where'
  | 'Limits'
  | 'Timing (milliseconds)'
  | 'Backplane (NATS, docs/BACKPLANE.md)'
  | 'Other';

interface OptionBase {
  /** The flag without its dashes, also the name a validation error gives. */
  readonly name: string;
  readonly key: OptionKey;
  readonly section: OptionSection;
  /** One line (or more, joined) for `--help`; `{default}` is replaced by the default. */
  readonly help: string;
  /** Validated but not a command-line flag (library options such as the secret). */
  readonly libraryOnly?: true;
}

export interface IntegerOption extends OptionBase {
  readonly kind: 'integer';
  readonly default: number;
  readonly min: number;
  readonly max?: number;
  /** How the default reads in --help when a plain number would not say it (8 MiB). */
  readonly shownDefault?: string;
}

export interface OtherOption extends OptionBase {
  readonly kind: 'string' | 'boolean' | 'list';
  /** The placeholder in --help (DIR, PATH, ORIGIN). */
  readonly value?: string;
  /** The only values a string option may take. */
  readonly choices?: readonly string[];
}

export type OptionSpec = IntegerOption | OtherOption;

/** A byte count as --help shows it: the number, and in MiB (8388608 = 8 MiB). */
function inMiB(bytes: number): string {
  return `${bytes} = ${bytes / (1024 * 1024)} MiB`;
}

/** A duration in whole days as --help shows it: the milliseconds, and in days (86400000 = 1 day). */
function inDays(ms: number): string {
  const days = ms / 86_400_000;
  return `${ms} = ${days} day${days === 1 ? '' : 's'}`;
}

/**
 * Every option of the daemon, in --help order: the one place that names a flag, its default (by
 * the name of its constant, never a value: test/unit/option-defaults.test.ts), its range and its
 * help. Validation, the CLI's flags and `mcp-progress daemon --help` read it.
 */
export const DAEMON_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'runtime-dir',
    key: { daemon: 'runtimeDir' },
    kind: 'string',
    value: 'DIR',
    section: 'Where',
    help: 'runtime directory (default: $MCP_PROGRESS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/mcp-progress, else <tmpdir>/mcp-progress-<uid>; on Windows %LOCALAPPDATA%\\mcp-progress); created with mode 0700',
  },
  {
    name: 'socket',
    key: { daemon: 'socketPath' },
    kind: 'string',
    value: 'PATH',
    section: 'Where',
    help: 'worker socket (default: <runtime-dir>/bridge.sock; on Windows a named pipe with a random name, kept in <runtime-dir>/pipe-name)',
  },
  {
    name: 'host',
    key: { daemon: 'host' },
    kind: 'string',
    value: 'ADDR',
    section: 'Where',
    help: `WebSocket listen address (default: ${DEFAULT_HOST})`,
  },
  {
    name: 'port',
    key: { daemon: 'port' },
    kind: 'integer',
    default: DEFAULT_PORT,
    min: 0,
    max: 65_535,
    section: 'Where',
    help: 'WebSocket port (default {default}; 0 picks a free one)',
  },
  {
    name: 'allow-remote',
    key: { daemon: 'allowRemote' },
    kind: 'boolean',
    section: 'Where',
    help: 'allow a --host that is not loopback (prints a warning)',
  },
  {
    name: 'allow-origin',
    key: { daemon: 'allowOrigins' },
    kind: 'list',
    value: 'ORIGIN',
    section: 'Where',
    help: 'let a browser page from ORIGIN connect (repeatable)',
  },
  {
    name: 'max-connections',
    key: { daemon: 'maxConnections' },
    kind: 'integer',
    default: DEFAULT_MAX_CONNECTIONS,
    min: 1,
    section: 'Limits',
    help: 'worker connections (default {default})',
  },
  {
    name: 'max-sessions',
    key: { daemon: 'maxSessions' },
    kind: 'integer',
    default: DEFAULT_MAX_SESSIONS,
    min: 1,
    section: 'Limits',
    help: 'sessions of every kind together: WebSocket, /mcp, in-process (default {default})',
  },
  {
    name: 'max-streams',
    key: { router: 'maxStreams' },
    kind: 'integer',
    default: DEFAULT_MAX_STREAMS,
    min: 1,
    section: 'Limits',
    help: 'streams in the table (default {default})',
  },
  {
    name: 'max-streams-per-connection',
    key: { router: 'maxStreamsPerConnection' },
    kind: 'integer',
    default: DEFAULT_MAX_STREAMS_PER_CONNECTION,
    min: 1,
    section: 'Limits',
    help: 'active streams (and claims) one worker connection may hold (default {default})',
  },
  {
    name: 'max-claims',
    key: { router: 'maxClaims' },
    kind: 'integer',
    default: DEFAULT_MAX_CLAIMS,
    min: 1,
    section: 'Limits',
    help: 'claims held by all worker connections together (default {default})',
  },
  {
    name: 'max-subscriptions',
    key: { router: 'maxSubscriptionsPerSubscriber' },
    kind: 'integer',
    default: DEFAULT_MAX_SUBSCRIPTIONS,
    min: 1,
    section: 'Limits',
    help: 'subscriptions per session (default {default})',
  },
  {
    name: 'max-subscribe-all',
    key: { router: 'maxSubscribeAllSessions' },
    kind: 'integer',
    default: DEFAULT_MAX_SUBSCRIBE_ALL,
    min: 1,
    section: 'Limits',
    help: 'sessions that follow every stream at once (tail without tokens)\n(default {default})',
  },
  {
    name: 'max-session-buffer-bytes',
    key: { daemon: 'maxSessionBufferBytes' },
    kind: 'integer',
    default: DEFAULT_MAX_SESSION_BUFFER_BYTES,
    shownDefault: inMiB(DEFAULT_MAX_SESSION_BUFFER_BYTES),
    // It must hold the largest notification and the largest reply unread at once.
    min: MIN_SESSION_BUFFER_BYTES,
    section: 'Limits',
    help: `unread bytes before a session of any kind is closed (default {default}; at least ${MIN_SESSION_BUFFER_BYTES}, the largest notification and the largest reply)`,
  },
  {
    name: 'max-journal-bytes',
    key: { daemon: 'maxJournalBytes' },
    kind: 'integer',
    default: DEFAULT_MAX_JOURNAL_BYTES,
    shownDefault: inMiB(DEFAULT_MAX_JOURNAL_BYTES),
    min: MIN_JOURNAL_BYTES,
    section: 'Limits',
    help: 'bytes dones.jsonl may hold, one worker connection at most a quarter; past either, dones are refused journal_failed (default {default})',
  },
  {
    name: 'max-pending-connections',
    key: { daemon: 'maxPendingConnections' },
    kind: 'integer',
    default: DEFAULT_MAX_PENDING_CONNECTIONS,
    min: 1,
    section: 'Limits',
    help: "gateway connections not yet authenticated, per local user (default {default}); one more closes that user's oldest",
  },
  {
    name: 'max-frame-bytes',
    key: { daemon: 'maxFrameBytes' },
    kind: 'integer',
    default: MAX_FRAME_BYTES,
    min: MIN_FRAME_BYTES,
    max: MAX_FRAME_BYTES,
    section: 'Limits',
    help: 'largest worker frame',
    libraryOnly: true,
  },
  {
    name: 'max-pending-reply-bytes',
    key: { daemon: 'maxPendingReplyBytes' },
    kind: 'integer',
    default: DEFAULT_MAX_PENDING_REPLY_BYTES,
    min: MIN_PENDING_REPLY_BYTES,
    section: 'Limits',
    help: 'replies a worker has not read before it is disconnected',
    libraryOnly: true,
  },
  {
    name: 'min-interval-ms',
    key: { router: 'defaultMinIntervalMs' },
    kind: 'integer',
    default: DEFAULT_MIN_INTERVAL_MS,
    min: 0,
    max: MAX_MIN_INTERVAL_MS,
    section: 'Timing (milliseconds)',
    help: 'default coalescing interval (default {default}; 0 = off)',
  },
  {
    name: 'retention-ms',
    key: { router: 'retentionMs' },
    kind: 'integer',
    default: DEFAULT_RETENTION_MS,
    min: 0,
    section: 'Timing (milliseconds)',
    help: 'how long a done stream is kept (default {default})',
  },
  {
    name: 'ttl-ms',
    key: { router: 'streamTtlMs' },
    kind: 'integer',
    default: DEFAULT_STREAM_TTL_MS,
    min: 1,
    section: 'Timing (milliseconds)',
    help: 'idle time after which a stream ends (default {default})',
  },
  {
    name: 'abandon-grace-ms',
    key: { router: 'abandonGraceMs' },
    kind: 'integer',
    default: DEFAULT_ABANDON_GRACE_MS,
    min: 0,
    section: 'Timing (milliseconds)',
    help: 'how long a stream waits for its worker to come back (default {default})',
  },
  {
    name: 'frame-timeout-ms',
    key: { daemon: 'frameTimeoutMs' },
    kind: 'integer',
    default: FRAME_TIMEOUT_MS,
    min: 1,
    section: 'Timing (milliseconds)',
    help: 'incomplete-frame timeout (default {default})',
  },
  {
    name: 'handshake-timeout-ms',
    key: { daemon: 'handshakeTimeoutMs' },
    kind: 'integer',
    default: DEFAULT_GATEWAY_HANDSHAKE_TIMEOUT_MS,
    min: 1,
    section: 'Timing (milliseconds)',
    help: 'time a gateway connection has to present the secret (default {default})',
  },
  {
    name: 'ping-interval-ms',
    key: { daemon: 'pingIntervalMs' },
    kind: 'integer',
    default: DEFAULT_PING_INTERVAL_MS,
    min: 0,
    section: 'Timing (milliseconds)',
    help: 'ping a WebSocket session silent this long (default {default}; 0 = off)',
  },
  {
    name: 'pong-timeout-ms',
    key: { daemon: 'pongTimeoutMs' },
    kind: 'integer',
    default: DEFAULT_PONG_TIMEOUT_MS,
    min: 1,
    section: 'Timing (milliseconds)',
    help: 'close a pinged WebSocket session that does not answer within this (default {default})',
  },
  {
    name: 'page-cookie-ms',
    key: { daemon: 'pageCookieMs' },
    kind: 'integer',
    default: PAGE_COOKIE_TTL_MS,
    min: MIN_PAGE_COOKIE_TTL_MS,
    section: 'Timing (milliseconds)',
    help: 'how long the live page\'s cookie admits a browser, checked by the daemon; an open page renews its own at half this, a page closed longer needs "mcp-progress open" again (default {default})',
    shownDefault: inDays(PAGE_COOKIE_TTL_MS),
  },
  {
    name: 'page-session-ms',
    key: { daemon: 'pageSessionMs' },
    kind: 'integer',
    default: PAGE_SESSION_MAX_MS,
    min: MIN_PAGE_COOKIE_TTL_MS,
    section: 'Timing (milliseconds)',
    help: 'how long one "mcp-progress open" admits a browser to the live page, its renewed cookies included, from the redemption of its ticket; then the page needs "mcp-progress open" again (default {default})',
    shownDefault: inDays(PAGE_SESSION_MAX_MS),
  },
  {
    name: 'shutdown-grace-ms',
    key: { daemon: 'shutdownGraceMs' },
    kind: 'integer',
    default: DEFAULT_SHUTDOWN_GRACE_MS,
    min: 0,
    section: 'Timing (milliseconds)',
    help: 'how long a graceful stop waits for connections to drain',
    libraryOnly: true,
  },
  {
    name: 'nats',
    key: { daemon: 'nats' },
    kind: 'list',
    value: 'URL',
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: 'join the NATS backplane at URL (nats://, tls://, user:password@ allowed; repeatable or comma-separated for a cluster; default: $MCP_PROGRESS_NATS, else off)',
  },
  {
    name: 'nats-prefix',
    key: { daemon: 'natsPrefix' },
    kind: 'string',
    value: 'PREFIX',
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: `first token(s) of every subject, so teams can share one NATS (default ${DEFAULT_NATS_PREFIX})`,
  },
  {
    name: 'nats-name',
    key: { daemon: 'natsName' },
    kind: 'string',
    value: 'NAME',
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: `this daemon on the backplane, unique among its daemons: A-Z a-z 0-9 _ - @, at most ${MAX_HOST_NAME_BYTES} bytes (default: user@host, other characters as _, then -<6 hex digits> of the runtime dir when it is not the default one); a second live daemon under a name in use is refused`,
  },
  {
    name: 'nats-creds',
    key: { daemon: 'natsCreds' },
    kind: 'string',
    value: 'FILE',
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: 'NATS credentials file (user JWT and NKey seed)',
  },
  {
    name: 'nats-ca',
    key: { daemon: 'natsCa' },
    kind: 'string',
    value: 'FILE',
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: 'CA certificate (PEM) to verify a tls:// NATS server',
  },
  {
    name: 'nats-heartbeat-ms',
    key: { daemon: 'natsHeartbeatMs' },
    kind: 'integer',
    default: DEFAULT_NATS_HEARTBEAT_MS,
    min: MIN_NATS_HEARTBEAT_MS,
    section: 'Backplane (NATS, docs/BACKPLANE.md)',
    help: `how often a daemon tells the backplane it is alive, and pings NATS; silent for ${BACKPLANE_MISSED_HEARTBEATS} of these, a host is lost (and NATS, unanswered for ${BACKPLANE_STALL_HEARTBEATS}, is taken as lost). At least ${MIN_NATS_HEARTBEAT_MS}: each is a message to every host and a PING, and the check of NATS's confirmations, every ${BACKPLANE_CONFIRM_MS} ms, needs a heartbeat well above that`,
    libraryOnly: true,
  },
  {
    name: 'log-level',
    key: { daemon: 'logLevel' },
    kind: 'string',
    value: 'LEVEL',
    section: 'Other',
    choices: LOG_LEVELS,
    help: `${LOG_LEVELS.join(', ')} (default ${DEFAULT_DAEMON_LOG_LEVEL})`,
  },
];

/** The default of an integer option, from the table. */
function defaultOf(name: string): number {
  const spec = DAEMON_OPTIONS.find((o) => o.name === name);
  if (spec?.kind !== 'integer')
    throw new BridgeError('invalid_option', `no integer option --${name} in DAEMON_OPTIONS`);
  return spec.default;
}

/** The defaults of the daemon's own options (the router's are DEFAULT_ROUTER_OPTIONS). */
export const DEFAULTS = {
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  allowRemote: false,
  logLevel: DEFAULT_DAEMON_LOG_LEVEL as LogLevel,
  maxConnections: defaultOf('max-connections'),
  maxSessions: defaultOf('max-sessions'),
  maxFrameBytes: defaultOf('max-frame-bytes'),
  frameTimeoutMs: defaultOf('frame-timeout-ms'),
  maxPendingReplyBytes: defaultOf('max-pending-reply-bytes'),
  maxSessionBufferBytes: defaultOf('max-session-buffer-bytes'),
  maxJournalBytes: defaultOf('max-journal-bytes'),
  maxPendingConnections: defaultOf('max-pending-connections'),
  handshakeTimeoutMs: defaultOf('handshake-timeout-ms'),
  pingIntervalMs: defaultOf('ping-interval-ms'),
  pongTimeoutMs: defaultOf('pong-timeout-ms'),
  pageCookieMs: defaultOf('page-cookie-ms'),
  pageSessionMs: defaultOf('page-session-ms'),
  shutdownGraceMs: defaultOf('shutdown-grace-ms'),
  natsHeartbeatMs: defaultOf('nats-heartbeat-ms'),
  natsPrefix: DEFAULT_NATS_PREFIX,
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
  const router: Record<string, unknown> = {
    ...DEFAULT_ROUTER_OPTIONS,
    ...definedOnly(input.router ?? {}),
  };
  const daemon: Record<string, unknown> = definedOnly(input);
  for (const spec of DAEMON_OPTIONS) {
    if (spec.kind !== 'integer') continue;
    const [target, field] =
      'router' in spec.key ? [router, spec.key.router] : [daemon, spec.key.daemon];
    target[field] ??= spec.default;
    integer(spec.name, target[field] as number, spec.min, spec.max ?? timerMax(spec));
  }
  const options: DaemonOptions = {
    ...(daemon as unknown as DaemonOptions),
    runtimeDir,
    socketPath: input.socketPath ?? defaultSocketPath(runtimeDir),
    host: input.host ?? DEFAULTS.host,
    allowRemote: input.allowRemote ?? DEFAULTS.allowRemote,
    allowOrigins: input.allowOrigins ?? [],
    logLevel: input.logLevel ?? DEFAULTS.logLevel,
    router: router as unknown as RouterOptions,
    secret: input.secret,
    nats: natsServers(input.nats, env),
    natsPrefix: input.natsPrefix ?? DEFAULTS.natsPrefix,
    natsName: input.natsName ?? defaultNatsName(runtimeDir, resolveRuntimeDir(undefined, env)),
    natsCreds: input.natsCreds,
    natsCa: input.natsCa,
  };
  if (!options.natsPrefix.split('.').every((token) => SUBJECT_TOKEN.test(token))) {
    invalid(
      'nats-prefix',
      'subject tokens of A-Z a-z 0-9 _ - joined by dots, such as mcp-progress or team-a.progress',
      options.natsPrefix,
    );
  }
  if (!NATS_NAME.test(options.natsName)) {
    invalid('nats-name', 'letters, digits, _, - and @ only', options.natsName);
  }
  if (!fitsUtf8Bytes(options.natsName, MAX_HOST_NAME_BYTES)) {
    throw new BridgeError(
      'invalid_option',
      `--nats-name is ${utf8ByteLength(options.natsName)} bytes long; a host name on the backplane is at most ${MAX_HOST_NAME_BYTES} bytes (the other daemons put it in their replies): choose a shorter one`,
    );
  }
  for (const [name, file] of [
    ['nats-creds', options.natsCreds],
    ['nats-ca', options.natsCa],
  ] as const) {
    if (file !== undefined && !isReadableFile(file)) {
      invalid(name, 'a readable file', file);
    }
  }
  for (const url of options.nats) {
    if (!/^(nats|tls|wss?):\/\/[^\s/]+\/?$|^[^\s/:]+:\d+$/.test(url)) {
      invalid('nats', 'a NATS URL such as nats://127.0.0.1:4222 or tls://user:pw@host:4222', url);
    }
  }
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

function isReadableFile(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The default --nats-name: user@host, so the daemons of two users of one host differ, and then
 * `-` and 6 hex digits of the runtime directory's path when it is not the user's default one, so
 * two daemons of one user (runtime dirs of their own) differ too, and keep their name when they
 * restart. Two clones with one user and host name still collide: the name check refuses the second.
 */
function defaultNatsName(runtimeDir: string, usersRuntimeDir: string): string {
  const safe = (text: string) => text.replace(/[^A-Za-z0-9_-]/g, '_');
  const name = `${safe(userName())}@${safe(hostname())}`;
  const suffix =
    resolve(runtimeDir) === resolve(usersRuntimeDir)
      ? ''
      : `-${createHash('sha256').update(resolve(runtimeDir)).digest('hex').slice(0, 6)}`;
  // All ASCII (safe), so characters are bytes: cut to what the --nats-name check takes.
  return `${name.slice(0, MAX_HOST_NAME_BYTES - suffix.length)}${suffix}`;
}

function userName(): string {
  try {
    return userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the uid names the user.
    return String(process.getuid?.() ?? 'user');
  }
}

/** --nats values, or $MCP_PROGRESS_NATS: each may be a comma-separated list. */
function natsServers(given: readonly string[] | undefined, env: NodeJS.ProcessEnv): string[] {
  const values = given ?? (env.MCP_PROGRESS_NATS ? [env.MCP_PROGRESS_NATS] : []);
  return values.flatMap((value) =>
    value
      .split(',')
      .map((url) => url.trim())
      .filter((url) => url !== ''),
  );
}

function timerMax(spec: IntegerOption): number | undefined {
  return spec.name.endsWith('-ms') ? MAX_TIMER_MS : undefined;
}

function definedOnly<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

/** The options `mcp-progress daemon` takes as flags (all but the library-only ones). */
export const DAEMON_FLAGS: readonly OptionSpec[] = DAEMON_OPTIONS.filter((o) => !o.libraryOnly);

/** Puts flag values (already converted: integers as numbers) where DaemonOptionsInput has them. */
export function optionsInput(values: ReadonlyMap<OptionSpec, unknown>): DaemonOptionsInput {
  const daemon: Record<string, unknown> = {};
  const router: Record<string, unknown> = {};
  for (const [spec, value] of values) {
    if (value === undefined) continue;
    if ('router' in spec.key) router[spec.key.router] = value;
    else daemon[spec.key.daemon] = value;
  }
  return { ...(daemon as DaemonOptionsInput), router: router as DaemonOptionsInput['router'] };
}
