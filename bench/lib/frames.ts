/**
 * The benchmark's frames: about 150 bytes each, one token per worker, the same
 * bytes for every system under test. Throughput chunks are copied from a
 * template and only the progress digits are patched, so publishers spend
 * almost nothing and the server under test is what gets measured.
 *
 * A throughput frame is what a worker typically sends: token, progress, total
 * and message. A latency frame also carries its send time in `_meta.t`.
 */

/** How a frame is carried: the bridge's own framing, or NATS's PUB command. */
export type Wire = 'ipc' | 'nats';

/** Progress values keep 12 digits for 9e11 frames, so they can be patched in place. */
export const FIRST_PROGRESS = 100_000_000_000;
const PROGRESS_DIGITS = 12;
export const FORM_FEED = 0x0c;

export function natsSubject(token: string): string {
  return `progress.${token}`;
}

/** The envelope text of one progress frame (no delimiter), stamped with its send time if given. */
export function frameJson(token: string, progress: number, stampUs?: number): string {
  const meta = stampUs === undefined ? '' : `,"_meta":{"t":${stampUs}}`;
  return (
    `{"type":"progress","data":{"v":1,"progressToken":"${token}","progress":${progress},` +
    `"total":900000000000,"message":"rendering tile 7 of 16, pass 2"${meta}}}`
  );
}

export function encodeFor(wire: Wire, token: string, json: string): string {
  return wire === 'ipc'
    ? `${json}\f`
    : `PUB ${natsSubject(token)} ${Buffer.byteLength(json)}\r\n${json}\r\n`;
}

/** Bytes of one frame on the bridge's wire, form feed included. */
export function frameBytes(token: string): number {
  return Buffer.byteLength(encodeFor('ipc', token, frameJson(token, FIRST_PROGRESS)));
}

/** Makes chunks of consecutive frames for one token, as fast as a memcpy. */
export class ChunkMaker {
  readonly #template: Buffer;
  readonly #frameLength: number;
  readonly #progressOffset: number;
  readonly framesPerChunk: number;

  constructor(wire: Wire, token: string, framesPerChunk: number) {
    const one = Buffer.from(encodeFor(wire, token, frameJson(token, FIRST_PROGRESS)), 'utf8');
    this.#frameLength = one.length;
    this.#progressOffset = one.indexOf(String(FIRST_PROGRESS));
    this.framesPerChunk = framesPerChunk;
    this.#template = Buffer.alloc(one.length * framesPerChunk);
    for (let i = 0; i < framesPerChunk; i++) one.copy(this.#template, i * one.length);
  }

  /** A fresh buffer (writes may be queued, so a chunk is never reused) with `firstProgress` and up. */
  chunk(firstProgress: number, frames = this.framesPerChunk): Buffer {
    const out = Buffer.allocUnsafe(frames * this.#frameLength);
    this.#template.copy(out, 0, 0, out.length);
    for (let i = 0; i < frames; i++) {
      let value = firstProgress + i;
      let at = i * this.#frameLength + this.#progressOffset + PROGRESS_DIGITS - 1;
      for (let d = 0; d < PROGRESS_DIGITS; d++) {
        out[at--] = 48 + (value % 10);
        value = Math.floor(value / 10);
      }
    }
    return out;
  }
}

/**
 * How many frames a paced connection has due: `index` of `count` connections, each offering
 * `perSecond`, `elapsedS` after the start. Aligned, every connection's frame falls due at the same
 * moment; staggered, connection k's falls due k/count of a period before connection 0's, as
 * independent workers' would, so their frames do not arrive together.
 */
export function framesDue(
  perSecond: number,
  elapsedS: number,
  index: number,
  count: number,
  phases: 'aligned' | 'staggered' = 'aligned',
): number {
  const offset = phases === 'staggered' ? index / count : 0;
  return Math.floor(perSecond * elapsedS + offset);
}

/** Microseconds on the host's monotonic clock, comparable across processes. */
export function nowUs(): number {
  return Math.round(Number(process.hrtime.bigint()) / 1000);
}

/** Splits form-feed-delimited text; keeps the unfinished tail between reads. */
export class FormFeedSplitter {
  #tail = '';

  push(text: string, each: (frame: string) => void): void {
    const combined = this.#tail === '' ? text : this.#tail + text;
    let start = 0;
    let end = combined.indexOf('\f');
    while (end !== -1) {
      each(combined.slice(start, end));
      start = end + 1;
      end = combined.indexOf('\f', start);
    }
    this.#tail = start === 0 ? combined : combined.slice(start);
  }
}
