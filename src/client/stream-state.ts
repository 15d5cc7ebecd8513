/**
 * The stream as the worker client holds it: the checks of an update (the local model of the
 * daemon's rules: progress a number within ±(2^53 - 1) that increases, total from 0 to 2^53 - 1),
 * the total carried forward, and the newest
 * update with whether the current connection has it. No socket here: the publisher
 * (publisher.ts) writes what this says is unsent.
 */
import { isSafeNumber, isTotal } from '../protocol/frame-guards.js';
import type { ProgressToken } from '../protocol/frames.js';
import {
  fitsUtf8Bytes,
  isWellFormedText,
  MAX_MESSAGE_BYTES,
  MAX_SAFE_NUMBER,
  MAX_TOKEN_BYTES,
  PROTOCOL_VERSION,
  shorten,
  toWellFormedText,
  utf8ByteLength,
} from '../protocol/limits.js';
import { isProgressToken } from '../protocol/notification-guards.js';
import type { BridgeErrorCode } from '../shared/errors.js';

export interface ProgressUpdate {
  /** Must exceed the last value; omitted: one more than the last value (the daemon's rule, counted here). */
  readonly progress?: number | undefined;
  /** Remembered: later updates carry it until another total is given. */
  readonly total?: number | undefined;
  /**
   * Each lone surrogate becomes U+FFFD; then, longer than 4096 UTF-8 bytes: cut to 4093 bytes at a
   * code point boundary, and "..." added.
   */
  readonly message?: string | undefined;
}

export interface ProgressData {
  v: typeof PROTOCOL_VERSION;
  progressToken: ProgressToken;
  progress: number;
  total?: number;
  message?: string;
  seq?: number;
}

/** Why an update was ignored. */
export interface UpdateProblem {
  readonly code: BridgeErrorCode;
  readonly message: string;
}

/**
 * The message as the daemon takes it, by the rule the Python and C clients follow too: each lone
 * surrogate becomes U+FFFD (the daemon refuses a message holding one, and the update would be
 * lost), and then one of more than MAX_MESSAGE_BYTES UTF-8 bytes is cut at a code point boundary
 * to leave room for "...".
 */
export function fitMessage(message: string): string {
  const text = toWellFormedText(message);
  if (fitsUtf8Bytes(text, MAX_MESSAGE_BYTES)) return text;
  const bytes = Buffer.from(text, 'utf8');
  let end = MAX_MESSAGE_BYTES - 3;
  // Back up over continuation bytes (10xxxxxx) to the start of the code point that would be split.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${bytes.subarray(0, end).toString('utf8')}...`;
}

/**
 * Why the daemon would refuse `token` (invalid_token), or undefined when it takes it: the client
 * refuses it first, by the rule the Python and C clients follow too, since every frame would be
 * refused (and one that is not UTF-8, from the C client, closes the connection).
 */
export function tokenProblem(token: unknown): string | undefined {
  if (isProgressToken(token)) return undefined;
  const rule = `a token is a string of 1 to ${MAX_TOKEN_BYTES} UTF-8 bytes with no lone surrogate, or an integer within ±${MAX_SAFE_NUMBER}`;
  if (typeof token === 'string') {
    const shown = JSON.stringify(shorten(toWellFormedText(token), 60));
    const why = isWellFormedText(token)
      ? `is ${utf8ByteLength(token)} bytes`
      : 'holds a lone surrogate (a byte that is not UTF-8)';
    return `token ${shown}${token.length > 60 ? '...' : ''} ${why}: ${rule}`;
  }
  return `token ${describe(token)} is not one: ${rule}`;
}

export class StreamUpdates {
  readonly #token: ProgressToken;
  /** The last progress value recorded: the local model of the daemon's monotonic rule. */
  #lastProgress: number | undefined;
  #total: number | undefined;
  #newest: ProgressData | undefined;
  /** Whether the newest update has been written to the current connection. */
  #sent = false;

  constructor(token: ProgressToken) {
    this.#token = token;
  }

  /** Records the update as the newest (not yet sent), or says why it is ignored. */
  record(update: ProgressUpdate): UpdateProblem | undefined {
    if (typeof update !== 'object' || update === null || Array.isArray(update)) {
      return invalid(
        `pass an object { progress?, total?, message? }, got ${update === null ? 'null' : Array.isArray(update) ? 'an array' : typeof update}`,
      );
    }
    const { progress: given, total, message } = update;
    const last = this.#lastProgress;
    let progress: number;
    if (given === undefined) {
      progress = (last ?? 0) + 1;
      // The daemon's own count would pass 2^53 - 1 too, and it refuses that (PROTOCOL 5.1).
      if (progress > MAX_SAFE_NUMBER) {
        return {
          code: 'non_monotonic',
          message: `update ignored: progress ${last} for token ${JSON.stringify(this.#token)} is the largest there is (${MAX_SAFE_NUMBER}), so it cannot count one up: send done`,
        };
      }
    } else if (!isSafeNumber(given)) {
      return invalid(
        `progress must be a finite number within ±${MAX_SAFE_NUMBER}, got ${describe(given)}`,
      );
    } else if (last !== undefined && !(given > last)) {
      return {
        code: 'non_monotonic',
        message: `update ignored: progress ${given} is not greater than the last progress ${last} for token ${JSON.stringify(this.#token)}; MCP requires progress to increase (omit progress to count one up)`,
      };
    } else {
      progress = given;
    }
    if (total !== undefined) {
      if (!isTotal(total)) {
        return invalid(
          `total must be a finite number from 0 to ${MAX_SAFE_NUMBER}, got ${describe(total)}`,
        );
      }
      this.#total = total;
    }
    if (message !== undefined && typeof message !== 'string') {
      return invalid(`message must be a string, got ${typeof message}`);
    }
    const data: ProgressData = { v: PROTOCOL_VERSION, progressToken: this.#token, progress };
    if (this.#total !== undefined) data.total = this.#total;
    if (message !== undefined) data.message = fitMessage(message);
    this.#lastProgress = progress;
    this.#newest = data;
    this.#sent = false;
    return undefined;
  }

  /** The newest update, sent or not. */
  get newest(): ProgressData | undefined {
    return this.#newest;
  }

  /** The newest update when the current connection does not have it yet. */
  get unsent(): ProgressData | undefined {
    return this.#sent ? undefined : this.#newest;
  }

  /** The newest update went out on the current connection. */
  sent(): void {
    this.#sent = true;
  }

  /** A new connection (or none): it has not got the newest update. */
  connectionChanged(): void {
    this.#sent = false;
  }

  /** The newest update is not to be sent again (too large to be accepted, or refused). */
  drop(): void {
    this.#newest = undefined;
    this.#sent = false;
  }

  /** The daemon refused a frame of this connection: the newest, if it went out, may be the one. */
  dropIfSent(): void {
    if (this.#sent) this.drop();
  }
}

/** A value as the refusal names it: a number as JavaScript writes it, anything else by its type. */
function describe(value: unknown): string {
  return typeof value === 'number' ? String(value) : `${typeof value} ${String(value)}`;
}

function invalid(why: string): UpdateProblem {
  return { code: 'invalid_field', message: `update ignored: ${why}` };
}
