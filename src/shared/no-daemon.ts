/**
 * Errors that mean no live daemon answers for the runtime dir: `mcp` then
 * embeds one (and a source reading from a daemon establishes a new one),
 * and `tail` waits for one.
 *
 * Not gateway_refused: a daemon whose gateway refused (at --max-sessions, a
 * wrong secret) is live and said no, and another daemon cannot start beside
 * it. A port taken over after the daemon was killed -9 is not met this way:
 * `mcp` connects only when daemon.json names a live pid.
 */
import type { BridgeErrorCode } from './errors.js';

export const NO_LIVE_DAEMON: ReadonlySet<BridgeErrorCode> = new Set<BridgeErrorCode>([
  'daemon_not_running',
  'gateway_unreachable',
  // daemon.json is corrupt.
  'bad_daemon_info',
  // It is stopping and takes no new session: gone in a moment (mcp waits for that before it embeds).
  'daemon_stopping',
]);
