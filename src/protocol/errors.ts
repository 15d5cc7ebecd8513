/**
 * Stable error codes. A code never changes meaning once released; the human
 * message beside it may be reworded. docs/PROTOCOL.md lists the same table.
 */

/** Codes the daemon sends to a worker in a `rejected` frame. */
export const REJECT_CODES = {
  // Framing errors: the daemon answers, then closes the connection.
  invalid_utf8: 'the frame is not valid UTF-8',
  invalid_json: 'the frame is not valid JSON',
  invalid_envelope: 'the frame is not a {"type": string, "data": ...} object',
  reserved_event: "the event type is one of node-ipc's reserved names",
  frame_too_large: 'the frame is larger than the frame limit',
  frame_timeout: 'an incomplete frame waited longer than the frame timeout',
  too_many_connections: 'the daemon is at its connection cap',
  // Frame errors: only that frame is refused; the connection stays open.
  unknown_event: 'the event type is not one of the worker events',
  invalid_frame: 'the frame data is not a JSON object',
  unsupported_version: 'v is missing or is not a protocol version this daemon speaks',
  invalid_token: 'progressToken is missing or not a valid token',
  invalid_field: 'a field has the wrong type or is out of range',
  unknown_field: 'the frame has a field protocol v1 does not define',
  non_monotonic: 'progress is not greater than the last accepted progress',
  stream_closed: 'the stream is done and retained; the token cannot publish until it is evicted',
  too_many_streams: 'a stream cap (per daemon or per connection) is reached',
  too_many_claims: 'the daemon holds its cap of claims, all connections together',
  token_in_use: 'another host of the NATS backplane publishes this token',
  journal_failed:
    'the daemon could not write the done to its journal; it was not applied: send it again later',
} as const;

export type RejectCode = keyof typeof REJECT_CODES;

/** Framing errors end the connection after the `rejected` answer. */
export const CLOSING_REJECT_CODES: ReadonlySet<RejectCode> = new Set<RejectCode>([
  'invalid_utf8',
  'invalid_json',
  'invalid_envelope',
  'reserved_event',
  'frame_too_large',
  'frame_timeout',
  'too_many_connections',
]);

/**
 * A new session refused because the daemon is stopping: a WebSocket upgrade, an /mcp initialize
 * or task listen, the page's /events, on the port and the local link alike. Not a refusal for
 * good: the client connects again once a daemon is back. In both tables below, one entry.
 */
const DAEMON_STOPPING = {
  code: -32000,
  meaning:
    "the daemon is stopping: a new session (a WebSocket upgrade, an /mcp initialize or task listen, the page's /events) is answered HTTP 503 with this error, while the sessions already open get what is left; connect again once a daemon is back",
} as const;

/**
 * What a stopping daemon tells a client that asks for a new session. A restart or a supervisor
 * brings one back in moments, and `mcp-progress mcp` starts one itself when none is.
 */
export const DAEMON_STOPPING_MESSAGE =
  'the daemon is stopping, so it opens no new session (those already open get what is left): connect again once it, or the next daemon, is up';

/**
 * The one shape of an error the daemon answers with a code, on the WebSocket and over HTTP alike:
 * one JSON-RPC error, `data.code` its stable name (a table's key), `id` the request's when one
 * was read.
 */
export interface ErrorReply<Name extends string = string> {
  jsonrpc: '2.0';
  id: string | number | null;
  error: { code: number; message: string; data: { code: Name } };
}

export function errorReply<Name extends string>(
  code: number,
  name: Name,
  message: string,
  id: string | number | null = null,
): ErrorReply<Name> {
  return { jsonrpc: '2.0', id, error: { code, message, data: { code: name } } };
}

/**
 * The body of HTTP 503 to a new session while the daemon stops, `id` the request's when one was
 * read (an /mcp task listen).
 */
export function daemonStoppingError(
  id: string | number | null = null,
): ErrorReply<'daemon_stopping'> {
  return errorReply(DAEMON_STOPPING.code, 'daemon_stopping', DAEMON_STOPPING_MESSAGE, id);
}

/** The JSON-RPC code of an HTTP refusal: a server error of JSON-RPC's range, as /mcp's `refused`. */
const HTTP_REFUSED = -32000;

/**
 * Refusals of an HTTP request or WebSocket upgrade on the gateway port (and the local link), made
 * by the daemon before or instead of a handler: the Host, path and method, the secret and Origin
 * checks of /ws, /mcp and /metrics, the live page's cookie, ticket and cancel checks, the session
 * hub's refusals of /ws and the page's /events. The answer has the entry's HTTP status and one
 * JSON-RPC error as its body (errorReply), `data.code` the name here. (/mcp's own answers, past
 * these checks, are MCP_ERRORS.) docs/PROTOCOL.md (4.9) lists the same table.
 */
export const HTTP_REFUSALS = {
  misdirected: {
    code: HTTP_REFUSED,
    status: 421,
    meaning:
      'the Host header names another host than this daemon, or is missing (DNS rebinding is kept out so)',
  },
  not_found: { code: HTTP_REFUSED, status: 404, meaning: 'nothing is served at this path' },
  method_not_allowed: {
    code: HTTP_REFUSED,
    status: 405,
    meaning: 'the path is served, with other methods (the Allow header lists them)',
  },
  upgrade_required: {
    code: HTTP_REFUSED,
    status: 426,
    meaning: '/ws asked without an upgrade: it is the WebSocket gateway',
  },
  origin_not_allowed: {
    code: HTTP_REFUSED,
    status: 403,
    meaning:
      "the Origin is not the daemon's own (nor, on /mcp and /metrics, one of --allow-origin)",
  },
  origin_required: {
    code: HTTP_REFUSED,
    status: 403,
    meaning: "a cancel of the page without an Origin header (a browser sends the page's own)",
  },
  subprotocol_required: {
    code: HTTP_REFUSED,
    status: 400,
    meaning: 'a WebSocket upgrade that does not offer the subprotocol mcp-progress.v1',
  },
  secret_missing: { code: HTTP_REFUSED, status: 401, meaning: 'no secret was presented' },
  secret_wrong: {
    code: HTTP_REFUSED,
    status: 401,
    meaning: "the secret is not the daemon's (it changes at every start)",
  },
  cookie_missing: {
    code: HTTP_REFUSED,
    status: 401,
    meaning: 'the page was asked without its cookie: `mcp-progress open` gives a URL that sets it',
  },
  cookie_expired: {
    code: HTTP_REFUSED,
    status: 401,
    meaning:
      "the page's cookie is older than --page-cookie-ms, or its ticket's redemption older than --page-session-ms: `mcp-progress open` again",
  },
  ticket_refused: {
    code: HTTP_REFUSED,
    status: 401,
    meaning:
      "the page's one-time URL was used already, has expired or is not this daemon's: `mcp-progress open` again",
  },
  other_user: {
    code: HTTP_REFUSED,
    status: 403,
    meaning: "another local user than the daemon's is at the other end of the connection",
  },
  unsupported_media_type: {
    code: HTTP_REFUSED,
    status: 415,
    meaning: 'a cancel of the page whose Content-Type is not application/json',
  },
  body_too_large: {
    code: HTTP_REFUSED,
    status: 413,
    meaning: 'a cancel of the page whose body is over 4096 bytes',
  },
  invalid_body: {
    code: HTTP_REFUSED,
    status: 400,
    meaning: 'a cancel of the page whose body is not {"progressToken": ..., "reason"?: ...}',
  },
  too_many_sessions: {
    code: HTTP_REFUSED,
    status: 503,
    meaning:
      "a new session (a WebSocket upgrade, the page's /events) while the daemon serves --max-sessions sessions: one is admitted once a place frees",
  },
  too_many_pending: {
    code: HTTP_REFUSED,
    status: 503,
    meaning:
      'a connection closed before it sent its request whole: --max-pending-connections newer ones of the same user wait',
  },
  daemon_stopping: { ...DAEMON_STOPPING, status: 503 },
  internal_error: {
    code: -32603,
    status: 500,
    meaning: 'the daemon failed on the request (a bug: please report it)',
  },
} as const;

export type HttpRefusalCode = keyof typeof HTTP_REFUSALS;

/**
 * JSON-RPC errors the MCP side answers itself, before or instead of the MCP SDK: /mcp's own
 * answers, a task listen over the stdio of `mcp-progress mcp` past its cap, and (thrown to the
 * SDK, which answers it) a task call of a session past its cap of followed tasks. The code is
 * JSON-RPC's (the SDK's transports answer the same cases with the same codes); the message
 * says which case it is and what to do. docs/PROTOCOL.md (4.6) lists the same table.
 */
export const MCP_ERRORS = {
  refused: {
    code: -32000,
    meaning:
      'refused before the MCP SDK read it (no session id, a body over the limit, --max-sessions, a stdio connection at its cap of task listens), or a task call of a session at its cap of followed tasks',
  },
  daemon_stopping: DAEMON_STOPPING,
  session_not_found: {
    code: -32001,
    meaning: 'the Mcp-Session-Id names no session: it ended or the daemon restarted',
  },
  parse_error: { code: -32700, meaning: 'the request body is not valid JSON' },
  internal_error: {
    code: -32603,
    meaning: '/mcp failed on the request (a bug: please report it)',
  },
  daemon_lost: {
    code: -32000,
    meaning:
      'a task listen ends: the daemon its MCP server reads from went away for good (data.code gateway_lost), or could not be asked about its tasks at all (data.code the failure, no acknowledgement); the code MCP SDKs end a request with when its connection closed',
  },
  follow_refused: {
    code: -32000,
    meaning:
      "a task listen ends: a task's follow could not be opened, the daemon refused its session or subscription (data.code the refusal's: gateway_refused or too_many_sessions at --max-sessions, too_many_streams, too_many_subscriptions)",
  },
} as const;

export type McpErrorName = keyof typeof MCP_ERRORS;

/**
 * JSON-RPC errors of the WebSocket gateway protocol. The numeric code follows
 * JSON-RPC 2.0; `data.code` carries the stable name.
 */
export const RPC_ERRORS = {
  parse_error: { code: -32700, meaning: 'the message is not valid JSON' },
  invalid_request: { code: -32600, meaning: 'the message is not a JSON-RPC 2.0 request' },
  method_not_found: { code: -32601, meaning: 'the method is not part of mcp-progress.v1' },
  invalid_params: { code: -32602, meaning: 'the params are missing, of the wrong type or unknown' },
  too_many_subscriptions: { code: -32001, meaning: 'the session is at its subscription cap' },
  too_many_streams: { code: -32002, meaning: 'the daemon is at its stream cap' },
  too_many_tasks: { code: -32003, meaning: 'the daemon is at its cap of live tasks' },
  daemon_stopping: DAEMON_STOPPING,
  internal_error: {
    code: -32603,
    meaning: 'the daemon failed on the request (a bug: please report it)',
  },
} as const;

export type RpcErrorCode = keyof typeof RPC_ERRORS;

/**
 * Close codes of the WebSocket gateway, by stable name: `code` the close code, `reason` the close
 * frame's text. A gateway client names a close by the key (BridgeError code `slow_consumer`).
 * docs/PROTOCOL.md (4.5) lists them, beside the WebSocket layer's own (1007, 1008, 1009).
 */
export const CLOSE_CODES = {
  going_away: { code: 1001, reason: 'daemon stopping' },
  slow_consumer: { code: 4008, reason: 'slow consumer: notifications were not read' },
} as const;

export type CloseCodeName = keyof typeof CLOSE_CODES;
