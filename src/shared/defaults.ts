/**
 * Client-side defaults: what the worker client, the gateway client, the
 * relay and the MCP tools use when the caller does not choose. One place, so
 * a default changes once and docs quote one number. (The daemon's own
 * defaults live in its option table, src/daemon/options.ts.)
 */

/** Coalescing interval of a publisher, a relay and watch_progress: at most one update per this many ms. */
export const DEFAULT_MIN_INTERVAL_MS = 100;

/** Jobs in one list_progress result unless the caller asks for another limit; the rest come in pages. */
export const DEFAULT_LIST_TOOL_LIMIT = 100;

/** `mcp-progress tail` printing plain lines (not a terminal): at most one line per stream per this many ms. */
export const DEFAULT_TAIL_LINES_INTERVAL_MS = 1000;

/** Delays between reconnect attempts to the daemon; the last one repeats. */
export const RECONNECT_BACKOFF_MS: readonly number[] = [50, 100, 200, 400, 800, 1600, 2000];

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

/** The reconnect delay before attempt `attempt` (0-based). */
export function reconnectDelayMs(attempt: number): number {
  const last = RECONNECT_BACKOFF_MS.length - 1;
  return RECONNECT_BACKOFF_MS[Math.min(Math.max(0, attempt), last)] ?? 2000;
}

/** How long a closing socket may take to close politely before it is destroyed. */
export const CLOSE_LINGER_MS = 1000;

/** How long `done` keeps trying to be delivered once a publisher has been connected. */
export const DEFAULT_DONE_TIMEOUT_MS = 5000;

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
 * does: memory stays bounded and the final value is never dropped.
 */
export const MAX_WAITING_PROGRESS_SENDS = 1024;
