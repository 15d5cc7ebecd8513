/**
 * Every wire limit of protocol v1, in one place. Lengths are UTF-8 bytes.
 * docs/PROTOCOL.md quotes these numbers; a test keeps the two in step.
 */

export const PROTOCOL_VERSION = 1;

/** node-ipc's frame delimiter: one form feed after each JSON envelope. */
export const FRAME_DELIMITER = '\f';

/** Longest envelope `type`, in UTF-8 bytes; longer closes the connection (`invalid_envelope`). */
export const MAX_TYPE_BYTES = 256;

/**
 * Largest magnitude of any number a worker or gateway sends (progress, total, `_meta`):
 * 2^53 - 1, so that every integer is exact in a double, an int64 and a JavaScript number.
 */
export const MAX_SAFE_NUMBER = Number.MAX_SAFE_INTEGER;

/** Largest envelope (JSON text, delimiter excluded) a worker may send. */
export const MAX_FRAME_BYTES = 64 * 1024;

/** A string progressToken: at least 1 and at most this many bytes. */
export const MAX_TOKEN_BYTES = 1024;

/** Largest `message` in a progress or done frame. */
export const MAX_MESSAGE_BYTES = 4096;

/** Longest `reason` on a cancel request. */
export const MAX_REASON_BYTES = 1024;

/**
 * Longest host name on a NATS backplane (a --nats-name, and the host part of a subject another
 * daemon publishes on): 255 bytes, what DNS allows a whole domain name. The default name, user@host
 * (a Linux host name is at most 64 bytes, a user name usually at most 32) with 7 bytes more for a
 * second runtime dir, fits easily, and so does any name a person would choose. Host names go into
 * replies (a stream summary's `host`, status's hosts) and the reason of an abandoned stream.
 */
export const MAX_HOST_NAME_BYTES = 255;

/** Deepest nesting of objects and arrays inside `_meta`: deeper would overflow the stack of JSON.stringify downstream. */
export const MAX_META_DEPTH = 32;

/** An incomplete frame older than this closes the connection. */
export const FRAME_TIMEOUT_MS = 30_000;

/** WebSocket subprotocol a gateway must offer. */
export const WS_SUBPROTOCOL = 'mcp-progress.v1';

/** Largest JSON-RPC message a gateway may send to the daemon. */
export const MAX_WS_MESSAGE_BYTES = 64 * 1024;

/** Most streams or tasks in one progress/list or task/list page. */
export const MAX_LIST_LIMIT = 1000;

/**
 * Largest JSON text of one progress/list or task/list page (past its first item: an item alone
 * is up to MAX_REPLY_BYTES); the daemon also keeps a page under a quarter of its session buffer
 * cap, so a reply never closes its own session as a slow consumer.
 */
export const MAX_LIST_REPLY_BYTES = 1024 * 1024;

/**
 * The most bytes JSON writes for a text of at most `maxBytes` UTF-8 bytes: a control character
 * (1 byte) becomes `\u0001` (6), and the quotes.
 */
function maxJsonStringBytes(maxBytes: number): number {
  return 6 * maxBytes + 2;
}

/**
 * Largest JSON text of one notification the daemon sends: a frame's fields written again. Strings
 * never grow (JSON.stringify escapes only what a frame had to escape), but a number may: `1e15,`
 * (5 bytes) becomes `1000000000000000,` (17); a subscription's `as` token replaces the frame's
 * (written as JSON, up to six times its bytes), and the JSON-RPC envelope and an omitted progress
 * add a little.
 */
export const MAX_NOTIFICATION_BYTES =
  Math.ceil((MAX_FRAME_BYTES * 17) / 5) + maxJsonStringBytes(MAX_TOKEN_BYTES) + 256;

/**
 * Largest JSON text of one reply to a gateway: a task's (task/get, task/create, task/cancel, a
 * task/list page of one task). Its stream's summary holds the stream's last params (at most a
 * notification), the token and the done message; the task holds the token again and the message
 * again as its `reason`; and a reply echoes its request's id, up to a whole request. Strings count
 * as JSON writes them. Counted as if one task had all of these at once: a working task's summary
 * has a full-size value but no done message or reason, a finished task's the messages but a value
 * without `_meta` (docs/PROTOCOL.md 4.2.3), so this bounds both. A progress/get or progress/list
 * reply holds less. With a NATS backplane a summary also names its host (counted as JSON writes it,
 * though a daemon's name never needs escaping: another daemon's name comes off NATS), and the
 * done message of a stream abandoned with its host names the host within MAX_MESSAGE_BYTES.
 */
export const MAX_REPLY_BYTES =
  MAX_NOTIFICATION_BYTES +
  2 * maxJsonStringBytes(MAX_TOKEN_BYTES) +
  2 * maxJsonStringBytes(MAX_MESSAGE_BYTES) +
  maxJsonStringBytes(MAX_HOST_NAME_BYTES) +
  MAX_WS_MESSAGE_BYTES +
  1024;

/**
 * The smallest --max-session-buffer-bytes: the largest notification and the largest reply unread
 * together, so that a session that reads is never closed for the size of one message.
 */
export const MIN_SESSION_BUFFER_BYTES = MAX_NOTIFICATION_BYTES + MAX_REPLY_BYTES;

/** The `status` of a done frame that has none (docs/PROTOCOL.md 2.3): its stream ended well. */
export const DEFAULT_DONE_STATUS = 'ok';

/** Largest coalescing interval a subscription may ask for. */
export const MAX_MIN_INTERVAL_MS = 60_000;

/** Utf8 byte length never exceeds 3 UTF-16 units per unit, so short strings skip the count. */
export function utf8ByteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

export function fitsUtf8Bytes(text: string, maxBytes: number): boolean {
  return text.length * 3 <= maxBytes || utf8ByteLength(text) <= maxBytes;
}

/** ES2024's String.prototype.isWellFormed and toWellFormed (Node 20+), not yet in this project's ES2023 lib typings. */
type WellFormedCheck = string & { isWellFormed(): boolean; toWellFormed(): string };

/** Whether `text` is well-formed Unicode (no lone surrogate), so that it encodes to UTF-8 and strict parsers accept it. */
export function isWellFormedText(text: string): boolean {
  return (text as WellFormedCheck).isWellFormed();
}

/** `text` with each lone surrogate replaced by U+FFFD: well-formed, so the daemon takes it. */
export function toWellFormedText(text: string): string {
  return (text as WellFormedCheck).toWellFormed();
}

/**
 * At most `maxUnits` UTF-16 units of `text`, never ending in the first half of a
 * surrogate pair: a lone surrogate is not Unicode, and strict JSON parsers refuse it.
 */
export function shorten(text: string, maxUnits: number): string {
  if (text.length <= maxUnits) return text;
  const end = isHighSurrogate(text.charCodeAt(maxUnits - 1)) ? maxUnits - 1 : maxUnits;
  return text.slice(0, end);
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

/**
 * Before an MCP request's result, when it sent notifications/progress: the
 * server pings the client (a request related to that request) and waits for
 * the answer, at most RESULT_CONFIRM_TIMEOUT_MS, then keeps at least
 * RESULT_GAP_MS after the last notification. The SDK 1.x client dispatches a
 * notification a microtask late but handles a response at once, dropping the
 * request's progress handler; when both arrive in one read, the last progress
 * is reported as an unknown token and lost (modelcontextprotocol/typescript-sdk#2580).
 * It answers a ping only after the notifications read before it were
 * dispatched, so the answer proves they were; the gap alone makes the loss
 * rare but, on a loaded machine, not impossible.
 */
export const RESULT_GAP_MS = 50;
export const RESULT_CONFIRM_TIMEOUT_MS = 2000;

/** How long a gateway client waits for the daemon to answer one request by default. */
export const DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The longest task statusMessage the bridge writes, in UTF-16 units: Claude Code cuts a
 * progress message at 200 characters, and hosts show statusMessage in the same place.
 */
export const MAX_STATUS_MESSAGE_CHARS = 199;
