/**
 * Every default, and every limit that is not the wire's (those are src/protocol/limits.ts): what
 * the daemon, the commands, the worker client, the gateway client, the relay and the MCP tools
 * use when the caller does not choose. One place, so a default changes once and docs quote one
 * number. The option tables (src/daemon/options.ts, src/cli/*-command.ts) name these constants,
 * never a value of their own (test/unit/option-defaults.test.ts); --help prints them, and
 * test/e2e/help-defaults.test.ts holds --help and the docs to them.
 */

/** The daemon's WebSocket port (`--port`); `mcp-progress mcp` embeds its daemon there too. */
export const DEFAULT_PORT = 7717;

/**
 * Coalescing interval of a publisher, a relay and watch_progress, and the daemon's for a
 * subscription that names none (--min-interval-ms): at most one update per this many ms.
 */
export const DEFAULT_MIN_INTERVAL_MS = 100;

/*
 * The daemon's options (src/daemon/options.ts, `mcp-progress daemon --help`). Memory at the caps
 * is measured in test/reliability/memory-caps.ts, and docs/RELIABILITY.md gives the figures.
 */

/** The gateway's listen address (--host): loopback, so nothing off this machine reaches it. */
export const DEFAULT_HOST = '127.0.0.1';

/** Worker connections the daemon serves at once (--max-connections). */
export const DEFAULT_MAX_CONNECTIONS = 10_000;

/** Sessions of every kind together: WebSocket, /mcp, in-process, page streams (--max-sessions). */
export const DEFAULT_MAX_SESSIONS = 10_000;

/** Streams in the daemon's table, active and retained done ones (--max-streams). */
export const DEFAULT_MAX_STREAMS = 100_000;

/** Active streams (and claims) one worker connection may hold (--max-streams-per-connection). */
export const DEFAULT_MAX_STREAMS_PER_CONNECTION = 10_000;

/** Claims of every worker connection together (--max-claims): 0.3 KiB each, about 30 MiB at the cap. */
export const DEFAULT_MAX_CLAIMS = 100_000;

/** Subscriptions one session may hold (--max-subscriptions). */
export const DEFAULT_MAX_SUBSCRIPTIONS = 10_000;

/** Sessions that follow every stream at once (progress/subscribeAll, tail without tokens; --max-subscribe-all). */
export const DEFAULT_MAX_SUBSCRIBE_ALL = 8;

/** Bytes a session may leave unread before it is closed as a slow consumer (--max-session-buffer-bytes). */
export const DEFAULT_MAX_SESSION_BUFFER_BYTES = 8 * 1024 * 1024;

/** Bytes dones.jsonl may hold, one worker connection a quarter of it (--max-journal-bytes). */
export const DEFAULT_MAX_JOURNAL_BYTES = 64 * 1024 * 1024;

/**
 * The smallest --max-journal-bytes: the largest done line (a 4 KiB message and a 64 KiB last
 * value, escaped) fits many times, and fits one connection's share (a quarter, done-journal.ts).
 */
export const MIN_JOURNAL_BYTES = 1024 * 1024;

/** Gateway connections of one local user that have not presented the secret yet (--max-pending-connections). */
export const DEFAULT_MAX_PENDING_CONNECTIONS = 128;

/** Replies a worker may leave unread before it is disconnected (maxPendingReplyBytes, no flag). */
export const DEFAULT_MAX_PENDING_REPLY_BYTES = 1024 * 1024;

/** The smallest maxPendingReplyBytes: a floor against a nonsense value; a few small replies fit. */
export const MIN_PENDING_REPLY_BYTES = 1024;

/**
 * The smallest maxFrameBytes (a library option; the largest is the wire's MAX_FRAME_BYTES): a floor
 * against a nonsense value; a progress frame with a short token and message fits.
 */
export const MIN_FRAME_BYTES = 256;

/** How long a done stream is kept, for late subscribers and progress/get (--retention-ms). */
export const DEFAULT_RETENTION_MS = 60_000;

/** Idle time after which a stream ends (--ttl-ms). */
export const DEFAULT_STREAM_TTL_MS = 3_600_000;

/** How long a stream whose worker went away waits for it to come back before it ends abandoned (--abandon-grace-ms). */
export const DEFAULT_ABANDON_GRACE_MS = 30_000;

/** How long a gateway connection has to present the secret before it is closed (--handshake-timeout-ms). */
export const DEFAULT_GATEWAY_HANDSHAKE_TIMEOUT_MS = 5000;

/** A WebSocket session heard nothing from for this long is pinged (--ping-interval-ms; 0 = no keepalive). */
export const DEFAULT_PING_INTERVAL_MS = 30_000;

/** A pinged WebSocket session that does not pong within this is closed (--pong-timeout-ms). */
export const DEFAULT_PONG_TIMEOUT_MS = 10_000;

/** The daemon's log level (--log-level). */
export const DEFAULT_DAEMON_LOG_LEVEL = 'info';

/** `mcp-progress mcp`'s log level (--log-level): its stderr is a host's log, so warnings only. */
export const DEFAULT_MCP_LOG_LEVEL = 'warn';

/** The first subject token of every backplane subject (--nats-prefix). */
export const DEFAULT_NATS_PREFIX = 'mcp-progress';

/**
 * How often a daemon on the backplane says it is alive and pings NATS (natsHeartbeatMs, no flag):
 * a host silent for BACKPLANE_MISSED_HEARTBEATS of these is lost, and so is NATS unanswered for
 * BACKPLANE_STALL_HEARTBEATS.
 */
export const DEFAULT_NATS_HEARTBEAT_MS = 1000;

/** Jobs in one list_progress result unless the caller asks for another limit; the rest come in pages. */
export const DEFAULT_LIST_TOOL_LIMIT = 100;

/** `mcp-progress tail` printing plain lines (not a terminal): at most one line per stream per this many ms. */
export const DEFAULT_TAIL_LINES_INTERVAL_MS = 1000;

/**
 * How often `mcp-progress tail` lists the streams for new ones when no token is named and the
 * daemon refused progress/subscribeAll, and asks again for a daemon when none is up or it refused.
 */
export const TAIL_POLL_MS = 500;

/** `mcp-progress tail` shows a stream with no new value for this long as stalled, without rate or ETA. */
export const TAIL_STALLED_AFTER_MS = 10_000;

/** How long a command `mcp-progress run` cancelled gets between SIGTERM and SIGKILL. */
export const RUN_CANCEL_GRACE_MS = 10_000;

/**
 * `mcp-progress tail`, with a NATS backplane: a look-up of a stream's host (progress/get) that
 * failed other than by a lost connection (whose reconnect lists the hosts again) is tried again
 * at that stream's next update: the first retry at once, each later one no sooner than this
 * backoff after the last failure, and at most TAIL_HOST_RETRIES times. Then the row shows no
 * host until a reconnect's listing names it.
 */
export const TAIL_HOST_RETRY_BACKOFF: Backoff = { firstMs: 1000, maxMs: 30_000 };
export const TAIL_HOST_RETRIES = 5;

/** A wait that doubles from `firstMs` after each failed attempt, up to `maxMs` (see backoffDelayMs). */
export interface Backoff {
  readonly firstMs: number;
  readonly maxMs: number;
}

/** Between reconnect attempts to the daemon (publisher, gateway client). */
export const RECONNECT_BACKOFF: Backoff = { firstMs: 50, maxMs: 2000 };

/** Between connects refused with EAGAIN (the daemon's queue of connects is full): short, it is there. */
export const BUSY_CONNECT_BACKOFF: Backoff = { firstMs: 5, maxMs: 250 };

/**
 * Between connects of `mcp-progress mcp` to a daemon that is stopping (it refuses new sessions
 * with daemon_stopping): it is gone within its shutdown grace, or twice that, and a tool call
 * waits on this, so short; each try is one refused upgrade.
 */
export const STOPPING_DAEMON_BACKOFF: Backoff = { firstMs: 50, maxMs: 250 };

/**
 * How long `mcp-progress daemon` waits, once its daemon has stopped, for the process to end by
 * itself before it exits anyway: a library's leftover timer (nats.js's JetStream retries) must
 * not keep a stopped daemon alive.
 */
export const EXIT_AFTER_STOP_MS = 1000;

/**
 * How long a stopping daemon waits for its workers to close their connections, and then for its
 * sessions to answer their close, before it cuts off what is left (`shutdownGraceMs`, no flag).
 */
export const DEFAULT_SHUTDOWN_GRACE_MS = 2000;

/** How long a one-shot worker-socket request (`publish`, `status`) waits for its answer. */
export const DEFAULT_SOCKET_REQUEST_TIMEOUT_MS = 5000;

/**
 * How long a gateway client keeps reconnecting after its daemon went away
 * before it gives up (gateway_lost) and ends its subscriptions: a restart
 * takes well under a second, a daemon not back after this is not coming.
 */
export const DEFAULT_RECONNECT_TIMEOUT_MS = 30_000;

/**
 * How long a gateway client waits for the daemon's WebSocket handshake. A
 * daemon on this host answers in milliseconds; a port that accepted the TCP
 * connection and says nothing for this long holds a stopped or hung daemon,
 * or another program. Each connect and each reconnect attempt has this bound.
 */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 5000;

/**
 * How long a gateway client waits for the answer to one request. The value is
 * defined in the protocol's limits, where it is part of the public exports.
 */
export { DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS } from '../protocol/limits.js';

/**
 * A done the daemon refused with journal_failed (its journal could not take it; the done was not
 * applied) is sent again after this long, for as long as the done timeout allows.
 */
export const JOURNAL_RETRY_MS = 250;

/**
 * The wait before retry `attempt` (0-based): firstMs doubled per attempt, capped at maxMs, of
 * which a random half is taken off, so that the many clients a daemon restart drops at once
 * do not all come back in the same millisecond. Always between half the step and the step.
 */
export function backoffDelayMs(backoff: Backoff, attempt: number, random = Math.random): number {
  const step = Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.min(Math.max(0, attempt), 30));
  return step / 2 + (random() * step) / 2;
}

/**
 * `run --parse`, after CMD exited: its stdout and stderr quiet this long (nothing came, nothing
 * waits to be passed on) are closed. A program CMD left running in the background holds them open
 * for as long as it lives, and run must not wait for it to end the stream; what it writes without
 * pausing this long is passed through.
 */
export const RUN_OUTPUT_QUIET_MS = 500;

/**
 * `run --parse`, after CMD exited and all it wrote was read: how long a program CMD left running
 * may go on writing to the pipes it shares with CMD before run closes them, so that one that
 * never pauses (tail -f of a busy log) cannot keep run, and the stream's done, waiting.
 */
export const RUN_BACKGROUND_OUTPUT_MS = 5000;

/**
 * The most a pipe holds: Linux's default pipe-max-size (/proc/sys/fs/pipe-max-size), which only a
 * privileged process may exceed; macOS and Windows pipes hold less. More than this read from a
 * pipe after its writer exited means all the writer left in it was read.
 */
export const PIPE_MAX_BYTES = 1_048_576;

/**
 * Node's timers hold at most 2^31 - 1 ms (24.8 days) and fire a longer delay at once (after 1 ms):
 * the bound of every `-ms` option without a range of its own, of a gateway client's timeouts, and
 * of the daemon's tick timer.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long a closing socket may take to close politely before it is destroyed. */
export const CLOSE_LINGER_MS = 1000;

/** How long `done` keeps trying to be delivered once a publisher has been connected. */
export const DEFAULT_DONE_TIMEOUT_MS = 5000;

/** How long `done` waits for a first connection when the publisher never had one (no daemon runs). */
export const NEVER_CONNECTED_GRACE_MS = 250;

/** How long relayProgress waits for the daemon to connect, and for each answer. */
export const DEFAULT_RELAY_CONNECT_TIMEOUT_MS = 2000;

/** How long watch_progress waits by default: under the 60 s request timeout most MCP clients use. */
export const DEFAULT_WATCH_TIMEOUT_MS = 50_000;

/**
 * A client that answered a ping before the result gets at least this long,
 * and at most PING_WAIT_FACTOR times its slowest answer so far, to answer the
 * next (never more than RESULT_CONFIRM_TIMEOUT_MS).
 */
export const PING_WAIT_FLOOR_MS = 500;
export const PING_WAIT_FACTOR = 4;

/**
 * Before the result, for a client that has shown it never answers a ping:
 * no ping, but this long after the last notification instead of
 * RESULT_GAP_MS, so that a client busy for a moment still dispatches it
 * before the result (a guard, not a proof; the ping was the proof).
 */
export const UNANSWERED_CLIENT_GAP_MS = 250;

/** Sessions of one relay process whose ping answers are remembered. */
export const MAX_REMEMBERED_SESSIONS = 1024;

/**
 * Progress notifications one MCP request may have waiting for its transport
 * (a host that stops reading stdout, an SSE client that stops reading). Past
 * it the newest value replaces the last waiting one, as the daemon's gate
 * does: memory stays bounded (about 1 MiB of small values) and the final
 * value is never dropped. At full delivery a host that pauses 0.4 s at 10,000
 * updates a second (a GC, a busy renderer) still gets every value: with 1,024,
 * clients of the benchmark that fell 150-250 ms behind lost 10-850 of 100,000.
 */
export const MAX_WAITING_PROGRESS_SENDS = 4096;

/**
 * How closely notifications must follow the last write to a WebSocket session's socket to be held
 * and sent with those after them (src/daemon/write-pacer.ts): at most 2x this, only while they
 * come faster than one per this. At 1,000 updates a second a session then gets a write every 3
 * updates, so the client (`mcp` behind the local link, `tail`, a relayProgress server) wakes a
 * third as often; a lone update, or the first after a pause, is not held. 3 rather than 4: in a
 * same-run A/B, 4 ms cost daemon + `mcp` 1.68x the peer's CPU and put its p99 at 2.01x, 3 ms
 * 1.81x and 1.65x, against lines of 2x each (docs/MCP-PATH.md, twenty-ninth round). Far below
 * what a person sees on a progress bar (a frame is 16 ms). Not on /mcp: there the daemon itself
 * wakes for every update, so holding saved none of its CPU and only added to the latency.
 */
export const NOTIFICATION_LINGER_MS = 3;

/**
 * How long a one-time URL of `mcp-progress open` stays usable: long enough for a browser to
 * start, short enough that one left in a terminal's scrollback is dead.
 */
export const PAGE_TICKET_TTL_MS = 120_000;

/**
 * How long a page cookie admits its holder, on the daemon's clock (--page-cookie-ms): a cookie
 * a server of another local user captured stops working after this (the browser hands a cookie
 * to every port of localhost). An open page renews its own well before (its stream ends at half
 * this and comes back for a fresh one), so only a page closed for a day needs `mcp-progress open`.
 */
export const PAGE_COOKIE_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * How long one `mcp-progress open` admits a browser to the page, renewals included, from the
 * redemption of its ticket (--page-session-ms): each renewed cookie carries that time under its
 * MAC, so a captured cookie, renewed as an open page renews its own, still stops working then.
 * A week: a page kept open in a tab asks for `mcp-progress open` once a week.
 */
export const PAGE_SESSION_MAX_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * The shortest --page-cookie-ms (and --page-session-ms): an open page's stream ends at half the lifetime and the browser
 * comes back a second later (the stream's `retry`), while its cookie is still good.
 */
export const MIN_PAGE_COOKIE_TTL_MS = 5000;

/**
 * The live page's stream (`GET /events`) sends each job's changes at most once per this many ms:
 * 2 updates per second per job, whatever its worker sends.
 */
export const PAGE_FEED_INTERVAL_MS = 500;

/** An idle page stream gets a comment this often, so proxies and the browser keep it open. */
export const PAGE_FEED_HEARTBEAT_MS = 15_000;

/** Removed jobs the page stream remembers for a tab that reconnects; older ones mean a new snapshot. */
export const PAGE_FEED_MAX_REMOVALS = 10_000;

/**
 * /mcp's SSE streams keep their last events per session for a client that reconnects with
 * Last-Event-ID (MCP 2025-11-25, SEP-1699): at most this many, and at most this many bytes.
 */
export const MCP_REPLAY_EVENTS = 64;
export const MCP_REPLAY_BYTES = 256 * 1024;

/** How long a client of /mcp waits before it reconnects a closed SSE stream (the `retry` field). */
export const MCP_SSE_RETRY_MS = 1000;

/**
 * For this long after progress first flows through a process, V8 optimises a function after this
 * many calls (its default: 3,000) and this many more after its types change (default: 500), where
 * it has no middle tier (Node 22): shared/tiering.ts says why.
 */
export const FLOWING_TIER_UP_MS = 10_000;
export const FLOWING_TURBOFAN_CALLS = 400;
export const FLOWING_CALLS_AFTER_TYPE_CHANGE = 100;

/**
 * The daemon gives memory back (shared/collection.ts) once no worker frame has arrived for this
 * long, V8's own wait before its memory reducer runs; and only when its heap grew by this much
 * since it last did (an idle daemon's young generation, grown, is 8 MiB). `mcp` lets V8's memory
 * reducer run again once no update has flowed through it for as long.
 */
export const IDLE_COLLECTION_MS = 8000;
export const IDLE_COLLECTION_MIN_GROWTH_BYTES = 4 * 1024 * 1024;

/**
 * Hosts a daemon keeps track of on one NATS backplane prefix at most (docs/BACKPLANE.md): a
 * crowd of invented host names cannot grow the table, and when it is full a new host takes the
 * place of one not heard for 3 heartbeats, never of a host heard recently.
 */
export const BACKPLANE_MAX_HOSTS = 64;

/**
 * Streams one other host of the backplane may hold in a daemon's table at most; with
 * BACKPLANE_MAX_HOSTS, remote streams take at most 64,000 of the 100,000 of --max-streams,
 * so this host's own workers always have room.
 */
export const BACKPLANE_MAX_STREAMS_PER_HOST = 1000;

/**
 * Stream messages a daemon keeps at most until NATS confirms them (and while it is cut off, to
 * send them again at the reconnect), by count and by their size in bytes (subject and body):
 * past either, they are dropped, and the reconnect puts only each stream's newest value or end
 * on the backplane again. The bytes bound the memory of a host whose workers send large `_meta`.
 */
export const BACKPLANE_MAX_UNCONFIRMED = 20_000;
export const BACKPLANE_MAX_UNCONFIRMED_BYTES = 16 * 1024 * 1024;

/** Another host of the backplane counts as lost after this many of its heartbeats were not heard. */
export const BACKPLANE_MISSED_HEARTBEATS = 3;

/**
 * How often the backplane asks NATS (a flush: PING, PONG) to confirm the stream messages sent so
 * far. Until then they are kept, and sent again after a reconnect: one a server that died took
 * with it is not lost, and one that had arrived is refused as not greater, so none repeats.
 */
export const BACKPLANE_CONFIRM_MS = 100;

/**
 * The shortest --nats-heartbeat-ms. Each heartbeat is a message from every daemon to every other
 * (up to BACKPLANE_MAX_HOSTS) and a PING to NATS: at the old minimum of 10 ms, 100 of each a
 * second per daemon. And the check that NATS confirmed the stream messages, every
 * BACKPLANE_CONFIRM_MS (100 ms), takes a gap of more than one heartbeat for a pause of this
 * daemon's own (src/shared/pause-watch.ts): a heartbeat not well above it would have the check
 * see a pause every time and never find a stalled NATS.
 */
export const MIN_NATS_HEARTBEAT_MS = 250;

/**
 * NATS is taken as lost when it has not answered for this many heartbeat intervals: a flush
 * unanswered that long, or that many pings of the client (one each interval, up to this many
 * less one outstanding). A server that is stopped (not closed) keeps its socket open, so
 * without this the daemon would go on writing into it, its memory growing, unnoticed.
 */
export const BACKPLANE_STALL_HEARTBEATS = 3;
/**
 * A periodic check that ran later than this many of its periods after the one before finds this
 * process stood still meanwhile (stopped, asleep, its event loop blocked): the peers' silence over
 * that gap is not theirs, and they get a fresh window (src/shared/pause-watch.ts).
 */
export const PAUSE_TOLERANCE_PERIODS = 2;

/**
 * MCP tasks (watch_progress called as a task) live in the daemon's task table. A task's TTL is
 * this unless the client asks for another, which is capped at MAX_TASK_TTL_MS: how long the task
 * is kept after its creation while its job has not started, and after its end; while its job
 * runs it is kept however long that takes (so a task of an hour-long job does not vanish at
 * 10 min, and one on a token no worker publishes still goes). MCP clients poll `tasks/get`
 * about every TASK_POLL_INTERVAL_MS, which is also a relayed task's default pollInterval and how
 * often relayTask checks it was cancelled.
 */
export const DEFAULT_TASK_TTL_MS = 10 * 60_000;
export const MAX_TASK_TTL_MS = 24 * 3_600_000;
export const TASK_POLL_INTERVAL_MS = 1000;

/**
 * Tasks one MCP session (a stdio connection of `mcp-progress mcp`, one /mcp session) follows at
 * once: the 2025-11-25 tasks it created that still work, each forwarding its stream's progress
 * over a daemon session of its own (over stdio, one place under --max-sessions each) with a poll
 * timer. One more watch_progress called as a task is refused (MCP_ERRORS.refused) naming this
 * limit, and no task is created.
 */
export const MAX_FOLLOWED_TASKS = 100;

/**
 * Tasks one daemon keeps alive at once (terminal ones included, until their TTL). Past it
 * task/create evicts the oldest terminal task, and refuses with too_many_tasks when none is.
 * A finished task keeps its id, token and its stream's summary without the last value's `_meta`
 * (task-table.ts keptSummary), which the token and message limits bound. Measured with 10000
 * tasks whose streams the stream table had forgotten (test/reliability/memory-caps.ts): 0.9 KiB
 * of heap each (9 MiB at the cap), 11 KiB with the longest token and messages (1 KiB, 4 KiB
 * twice: 107 MiB at the cap). Kept whole, a 60 KB `_meta` stayed for the task's TTL (up to 24 h):
 * 60 KiB each, 582 MiB at the cap. While the stream table holds a task's stream they share it.
 */
export const MAX_LIVE_TASKS = 10_000;

/**
 * A task past its TTL is invisible at once (every answer checks it) and its memory is released by
 * the daemon's one expiry timer, armed for the earliest TTL to pass: at most this long after it
 * passed, also on a daemon nobody asks anything. Each firing scans the task table (10000 tasks
 * take well under a millisecond), so this also bounds how often it scans: tasks whose jobs run on
 * past a short TTL are kept on, and would otherwise have it fire at each millisecond.
 */
export const TASK_EXPIRY_CHECK_MS = 1000;

/**
 * A `subscriptions/listen` stream of the 2026-07-28 tasks extension follows at most this many
 * task ids (more are left out of its acknowledgement), and tells each task's statusMessage at
 * most once per TASK_STATUS_MIN_INTERVAL_MS: a status change (the task's end) goes out at once.
 */
export const MAX_LISTENED_TASKS = 100;
export const TASK_STATUS_MIN_INTERVAL_MS = 250;

/**
 * Task listens one stdio connection of `mcp-progress mcp` holds open at once: each follows up to
 * MAX_LISTENED_TASKS tasks, with a poll timer for each, over daemon sessions the follows share
 * (one, up to the daemon's --max-subscriptions tasks: SharedSessions). Past it a listen is
 * refused with a JSON-RPC error (MCP_ERRORS.refused) naming this limit: end an earlier listen
 * (notifications/cancelled), or name several tasks in one. Over /mcp each listen holds a place
 * under the daemon's --max-sessions instead.
 */
export const MAX_STDIO_TASK_LISTENS = 32;

/**
 * The gateway's Unix socket in the runtime directory (the local link): the same gateway as the
 * TCP port, for this user's processes only (the directory is 0700). Not on Windows.
 */
export const GATEWAY_SOCKET_NAME = 'gateway.sock';

/**
 * How long a starting daemon waits for a connect to a gateway.sock it found, to tell a stale one
 * (nothing listens: refused at once) from one in use. Connects to a Unix socket answer at once.
 */
export const GATEWAY_SOCKET_PROBE_TIMEOUT_MS = 500;
