/**
 * The byte format both ends share: UTF-8 JSON {"type", "data"} followed by a
 * form feed. Pure: no sockets here, so any transport can use it.
 */
import { FRAME_DELIMITER } from './limits.js';

export interface Envelope {
  type: string;
  data: unknown;
}

export function encodeFrame(type: string, data: unknown): string {
  return `${JSON.stringify({ type, data })}${FRAME_DELIMITER}`;
}

/** Why a frame could not be read; the codes are the wire's framing reject codes. */
export type FrameErrorCode = 'invalid_json' | 'invalid_envelope' | 'frame_too_large';

export class FrameError extends Error {
  readonly code: FrameErrorCode;
  constructor(code: FrameErrorCode, message: string) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

/** JSON's insignificant whitespace: allowed around a frame, so a trailing newline is not a frame. */
const JSON_WHITESPACE = /^[ \t\n\r]*$/;

/**
 * Splits a stream of text into envelopes. Input that is not an envelope is
 * reported, not thrown, so that a reader can decide what a bad frame means.
 * Limits count UTF-8 bytes, as the wire does; whitespace between frames is
 * skipped.
 */
export class FrameDecoder {
  #buffer = '';
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Feeds text; returns the complete frames it finished, oldest first. */
  push(text: string): Array<Envelope | FrameError> {
    const combined = this.#buffer ? this.#buffer + text : text;
    const out: Array<Envelope | FrameError> = [];
    let start = 0;
    let end = combined.indexOf(FRAME_DELIMITER);
    while (end !== -1) {
      const frame = combined.slice(start, end);
      if (this.#tooLarge(frame)) out.push(this.#tooLargeError());
      else if (!JSON_WHITESPACE.test(frame)) out.push(decodeEnvelope(frame));
      start = end + 1;
      end = combined.indexOf(FRAME_DELIMITER, start);
    }
    this.#buffer = start === 0 ? combined : combined.slice(start);
    if (this.#tooLarge(this.#buffer)) {
      this.#buffer = '';
      out.push(this.#tooLargeError());
    }
    return out;
  }

  /** UTF-16 units still waiting for their form feed. */
  get pending(): number {
    return this.#buffer.length;
  }

  /** Whether the unread tail holds the start of a frame (anything but whitespace). */
  get partial(): boolean {
    return this.#buffer.length > 0 && !JSON_WHITESPACE.test(this.#buffer);
  }

  /** A UTF-8 byte is at most 3 per UTF-16 unit, so most frames skip the byte count. */
  #tooLarge(text: string): boolean {
    return text.length * 3 > this.#maxBytes && Buffer.byteLength(text, 'utf8') > this.#maxBytes;
  }

  #tooLargeError(): FrameError {
    return new FrameError(
      'frame_too_large',
      `a frame exceeded ${this.#maxBytes} bytes without a form feed`,
    );
  }
}

function decodeEnvelope(text: string): Envelope | FrameError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return new FrameError('invalid_json', `not JSON: ${text.slice(0, 80)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return new FrameError('invalid_envelope', 'a frame is not a JSON object');
  }
  const { type, data } = value as { type?: unknown; data?: unknown };
  if (typeof type !== 'string')
    return new FrameError('invalid_envelope', 'a frame has no string type');
  return { type, data };
}
