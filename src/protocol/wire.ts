/**
 * The byte format both ends share: UTF-8 JSON {"type", "data"} followed by a
 * form feed. Pure: no sockets here, so any transport can use it.
 */
import type { RejectCode } from './errors.js';
import { FRAME_DELIMITER, MAX_TYPE_BYTES, utf8ByteLength } from './limits.js';

export interface Envelope {
  type: string;
  /** Absent (undefined) when the envelope has no `data`. */
  data: unknown;
}

/** node-ipc's lifecycle event names: protocol v1 refuses them as a frame type (`reserved_event`). */
export const RESERVED_EVENTS: ReadonlySet<string> = new Set([
  'start',
  'connect',
  'disconnect',
  'destroy',
  'close',
  'socket.disconnected',
  'error',
  'data',
]);

/** Names an event dispatcher built on a plain object would resolve to a prototype member. */
const PROTOTYPE_NAMES: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

export function encodeFrame(type: string, data: unknown): string {
  return `${JSON.stringify({ type, data })}${FRAME_DELIMITER}`;
}

/** A framing error: the reader answers `rejected` with `code` and closes the connection. */
export class FrameError extends Error {
  readonly code: RejectCode;
  constructor(code: RejectCode, message: string) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

const FORM_FEED = 0x0c;
/** fatal: invalid UTF-8 is an error, never U+FFFD; ignoreBOM: a BOM stays in the text, so JSON refuses it. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** JSON's insignificant whitespace: space, tab, LF, CR. */
function isJsonWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/** The frame without the JSON whitespace around it (a newline after a form feed, a CR LF before one). */
function trimWhitespace(bytes: Buffer): Buffer {
  let start = 0;
  let end = bytes.length;
  while (start < end && isJsonWhitespace(bytes[start] as number)) start++;
  while (end > start && isJsonWhitespace(bytes[end - 1] as number)) end--;
  return start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end);
}

/**
 * Splits a byte stream into envelopes, in order: per frame, size (bytes, the
 * form feed and the JSON whitespace around the frame excluded), then UTF-8,
 * then JSON, then the envelope. Input that is not an envelope is reported as a
 * FrameError, not thrown, so that a reader can decide what a bad frame means.
 * Text pushed as a string is counted as its UTF-8 encoding. An empty frame, or
 * one of JSON whitespace only (a newline after the form feed), is skipped.
 * Whitespace is not free: the bytes from one form feed to the next (from the
 * start, for the first frame), whitespace included, are at most twice the frame
 * limit, however the reads split them.
 */
export class FrameDecoder {
  /** The incomplete frame waiting for its form feed, as the reads brought it (copies). */
  #tail: Buffer[] = [];
  #tailBytes = 0;
  /** Where in the tail its first byte other than whitespace is (-1: none yet), and past its last. */
  #contentStart = -1;
  #contentEnd = 0;
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Feeds bytes (or text); returns the complete frames it finished, oldest first. */
  push(chunk: string | Uint8Array): Array<Envelope | FrameError> {
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.isBuffer(chunk)
          ? chunk
          : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let combined = bytes;
    if (this.#tailBytes > 0) {
      // A frame that comes a little at a time is looked at a read at a time, and joined once,
      // when its form feed comes: each read costs its own length, not the frame's so far.
      if (bytes.indexOf(FORM_FEED) === -1) {
        const refusal = this.#keep(bytes);
        return refusal === undefined ? [] : [refusal];
      }
      combined = Buffer.concat([...this.#tail, bytes]);
      this.#clearTail();
    }
    const out: Array<Envelope | FrameError> = [];
    let start = 0;
    let end = combined.indexOf(FORM_FEED);
    while (end !== -1) {
      const frame = trimWhitespace(combined.subarray(start, end));
      // The bound #keep holds a tail to, for bytes that came with their form feed: so whether
      // a frame padded with whitespace is refused does not depend on how the reads split it.
      if (end - start > 2 * this.#maxBytes) out.push(this.#overBound(frame.length));
      else if (frame.length > 0) out.push(this.#decode(frame));
      start = end + 1;
      end = combined.indexOf(FORM_FEED, start);
    }
    // The usual read ends here: whole frames only, nothing left to keep.
    if (start < combined.length) {
      const refusal = this.#keep(combined.subarray(start));
      if (refusal !== undefined) out.push(refusal);
    }
    return out;
  }

  /** Bytes of an incomplete frame waiting for its form feed. */
  get pending(): number {
    return this.#tailBytes;
  }

  /** An incomplete frame has begun: bytes other than whitespace wait for their form feed. */
  get partial(): boolean {
    return this.#contentStart !== -1;
  }

  /**
   * Adds bytes with no form feed to the tail (a copy: the tail must not keep a large chunk
   * alive); the refusal, and the tail dropped, when the tail passes its bound.
   */
  #keep(bytes: Buffer): FrameError | undefined {
    for (let i = 0; i < bytes.length; i++) {
      if (isJsonWhitespace(bytes[i] as number)) continue;
      if (this.#contentStart === -1) this.#contentStart = this.#tailBytes + i;
      this.#contentEnd = this.#tailBytes + i + 1;
    }
    this.#tailBytes += bytes.length;
    const content = this.#contentStart === -1 ? 0 : this.#contentEnd - this.#contentStart;
    if (content > this.#maxBytes) {
      this.#clearTail();
      return tooLarge(this.#maxBytes);
    }
    if (this.#tailBytes > 2 * this.#maxBytes) {
      this.#clearTail();
      return this.#overBound(content);
    }
    this.#tail.push(Buffer.from(bytes));
    return undefined;
  }

  /** More than twice the limit without a form feed: the frame's own size, or the whitespace's. */
  #overBound(contentBytes: number): FrameError {
    if (contentBytes > this.#maxBytes) return tooLarge(this.#maxBytes);
    return new FrameError(
      'frame_too_large',
      `more than ${2 * this.#maxBytes} bytes came without a form feed, whitespace included: end every frame with a form feed (0x0C), and keep the whitespace around a frame to at most ${this.#maxBytes} bytes`,
    );
  }

  #clearTail(): void {
    this.#tail = [];
    this.#tailBytes = 0;
    this.#contentStart = -1;
    this.#contentEnd = 0;
  }

  #decode(frame: Buffer): Envelope | FrameError {
    if (frame.length > this.#maxBytes) return tooLarge(this.#maxBytes);
    let text: string;
    try {
      text = UTF8.decode(frame);
    } catch {
      return new FrameError(
        'invalid_utf8',
        'the frame is not valid UTF-8: encode the JSON text as UTF-8 (no other encoding, no lone surrogates)',
      );
    }
    return decodeEnvelope(text);
  }
}

function tooLarge(maxBytes: number): FrameError {
  return new FrameError(
    'frame_too_large',
    `the frame exceeds ${maxBytes} bytes: shorten message or _meta (a frame is at most ${maxBytes} UTF-8 bytes before its form feed)`,
  );
}

/** One frame's text (form feed removed) as an envelope, or the framing error it is. */
export function decodeEnvelope(text: string): Envelope | FrameError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return new FrameError(
      'invalid_json',
      'the frame is not valid JSON: send one JSON object per frame, each followed by a form feed (0x0C)',
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return invalidEnvelope('the frame is not a JSON object');
  }
  const { type, data } = value as { type?: unknown; data?: unknown };
  if (typeof type !== 'string' || type.length === 0) {
    return invalidEnvelope('the frame has no non-empty string type');
  }
  if (utf8ByteLength(type) > MAX_TYPE_BYTES) {
    return invalidEnvelope(`the frame type is longer than ${MAX_TYPE_BYTES} UTF-8 bytes`);
  }
  if (RESERVED_EVENTS.has(type)) {
    return new FrameError(
      'reserved_event',
      "the event type is one of node-ipc's reserved names: workers send progress, done, claim, ping or status",
    );
  }
  if (PROTOTYPE_NAMES.has(type)) {
    return invalidEnvelope(`the frame type ${JSON.stringify(type)} is a reserved property name`);
  }
  return { type, data };
}

function invalidEnvelope(what: string): FrameError {
  return new FrameError(
    'invalid_envelope',
    `${what}: a frame is a JSON object {"type": "<event>", "data": {...}} with a non-empty string type of at most ${MAX_TYPE_BYTES} UTF-8 bytes`,
  );
}
