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

/**
 * Splits a stream of text into envelopes. Input that is not an envelope is
 * reported, not thrown, so that a reader can decide what a bad frame means.
 */
export class FrameDecoder {
  #buffer = '';
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Feeds text; returns the complete frames it finished, oldest first. */
  push(text: string): Array<Envelope | Error> {
    const combined = this.#buffer + text;
    const out: Array<Envelope | Error> = [];
    let start = 0;
    let end = combined.indexOf(FRAME_DELIMITER);
    while (end !== -1) {
      out.push(decodeEnvelope(combined.slice(start, end)));
      start = end + 1;
      end = combined.indexOf(FRAME_DELIMITER, start);
    }
    this.#buffer = combined.slice(start);
    if (this.#buffer.length > this.#maxBytes) {
      this.#buffer = '';
      out.push(new Error(`a frame exceeded ${this.#maxBytes} bytes without a form feed`));
    }
    return out;
  }

  get pending(): number {
    return this.#buffer.length;
  }
}

function decodeEnvelope(text: string): Envelope | Error {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return new Error(`not JSON: ${text.slice(0, 80)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return new Error('a frame is not a JSON object');
  }
  const { type, data } = value as { type?: unknown; data?: unknown };
  if (typeof type !== 'string') return new Error('a frame has no string type');
  return { type, data };
}
