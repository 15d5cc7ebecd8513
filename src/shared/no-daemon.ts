/**
 * Errors that mean no live daemon answers for the runtime dir: `mcp` then
 * embeds one, and `tail` waits for one.
 */
import type { BridgeErrorCode } from '../shared/errors.js';

export const NO_LIVE_DAEMON: ReadonlySet<BridgeErrorCode> = new Set<BridgeErrorCode>([
  'daemon_not_running',
  'gateway_unreachable',
  // daemon.json is corrupt, or its port now belongs to someone else (the daemon was killed -9).
  'bad_daemon_info',
  'gateway_refused',
]);
