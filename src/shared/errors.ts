/**
 * Local error codes: what a library user or the CLI can see thrown or
 * reported by this package's own code (never sent on a wire). A code never
 * changes meaning once released; the message beside it may be reworded.
 * docs/CLIENTS.md lists the same table, and a test keeps the two equal.
 *
 * A BridgeError may also carry a wire code (a worker `rejected` code or a
 * gateway JSON-RPC error name) when it reports what the daemon answered.
 */
import {
  type CloseCodeName,
  REJECT_CODES,
  type RejectCode,
  RPC_ERRORS,
  type RpcErrorCode,
} from '../protocol/errors.js';

export const LOCAL_ERRORS = {
  // Finding and reaching the daemon.
  daemon_not_running: 'no daemon answers on the socket, or its runtime dir has no daemon.json',
  permission_denied: 'the socket belongs to another user',
  connect_failed: 'connecting to the worker socket failed for another reason',
  connect_timeout: 'the connection to the worker socket did not open in time',
  foreign_owner: 'a socket or daemon.json is owned by another user, so it is not used',
  bad_daemon_info: 'daemon.json is not JSON, or not one written by mcp-progress',
  daemon_timeout: 'the daemon did not answer a worker-socket request in time',
  bad_reply: 'the daemon sent a reply that does not match its schema',
  connection_closed: 'the daemon closed the worker socket before answering',
  daemon_disconnected: 'a publisher lost its daemon and is reconnecting',
  daemon_unreachable: 'done was not delivered: no daemon answered within the done timeout',
  // The gateway client.
  gateway_unreachable: "the daemon's gateway cannot be reached",
  gateway_refused: "the daemon's gateway refused the connection (secret, origin, session cap)",
  disconnected: 'the gateway connection dropped or is not open',
  gateway_lost:
    'the gateway client gave up: no daemon came back within its reconnect timeout, so its subscriptions ended',
  gateway_timeout:
    "the daemon's gateway accepted the connection but did not complete the WebSocket handshake in time",
  request_timeout: 'the daemon did not answer a gateway request in time',
  duplicate_subscription: 'the session already has a subscription under that label',
  too_many_sessions: 'an in-process session was refused: the daemon serves --max-sessions already',
  // Publishers and relays.
  no_token: 'no progress token was given or found in the environment',
  closed: 'the publisher, client or source was already closed',
  cancelled: 'the stream was cancelled by a gateway',
  cancel_callback_failed: 'an onCancel callback threw',
  // Starting a daemon.
  invalid_option: 'a daemon or gateway client option is missing, of the wrong type or out of range',
  runtime_dir: 'the runtime directory cannot be created, is not a directory, or is not yours',
  already_running: 'a daemon already runs on this socket or runtime directory',
  socket_in_use: 'the socket path is taken by something that is not a stale socket',
  socket_failed: 'the worker socket cannot be listened on',
  daemon_info_failed: 'daemon.json cannot be written',
  port_in_use: "the gateway's port is in use",
  listen_failed: 'the gateway cannot listen for another reason',
  start_failed: 'the daemon failed to start',
  not_started: "a daemon's info (socket, URL, secret) was read before Daemon.start() resolved",
  // Serving MCP over HTTP.
  client_went_away: 'an HTTP client closed its connection before its request was complete',
  event_not_kept:
    'an SSE client resumed (Last-Event-ID) after an event /mcp no longer keeps: it sends its request again',
  sdk_mismatch: 'the installed MCP SDK lacks what this server relies on (another version)',
  // The command line.
  usage: 'the command line is wrong (exit code 2)',
} as const;

export type LocalErrorCode = keyof typeof LOCAL_ERRORS;

/**
 * Every code a BridgeError can carry: local, or the wire code the daemon answered with (a
 * close code's name: the connection it closed).
 */
export type BridgeErrorCode = LocalErrorCode | RejectCode | RpcErrorCode | CloseCodeName;

/**
 * An error with a stable `code` and a message that says what was wrong and
 * how to fix it. Thrown by the CLI and the library; never by the router,
 * which returns outcomes instead.
 */
export class BridgeError extends Error {
  readonly code: BridgeErrorCode;

  constructor(code: BridgeErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BridgeError';
    this.code = code;
  }
}

/**
 * The code of a daemon's answer, as a BridgeErrorCode: a code this version
 * does not know (a newer daemon's) is reported as `bad_reply`, never passed
 * on untyped.
 */
export function answeredCode(code: unknown): BridgeErrorCode {
  if (
    typeof code === 'string' &&
    (Object.hasOwn(REJECT_CODES, code) || Object.hasOwn(RPC_ERRORS, code))
  ) {
    return code as RejectCode | RpcErrorCode;
  }
  return 'bad_reply';
}
