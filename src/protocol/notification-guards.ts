/**
 * Hand-written checks of the notification params the daemon sends a gateway
 * client: the same rules as progressParamsSchema and doneParamsSchema
 * (frames.ts), for the hot path, where a zod parse of every notification cost
 * more than the rest of the client's work on it. A test holds both to the
 * same answers on the conformance corpus and on generated values.
 */
import type { DoneParams, ProgressParams, ProgressToken } from './frames.js';
import { fitsUtf8Bytes, isWellFormedText, MAX_TOKEN_BYTES } from './limits.js';

const PROGRESS_KEYS: ReadonlySet<string> = new Set([
  'progressToken',
  'progress',
  'total',
  'message',
  '_meta',
]);
const DONE_KEYS: ReadonlySet<string> = new Set(['progressToken', 'status', 'message']);
const END_STATUSES: ReadonlySet<unknown> = new Set(['ok', 'error', 'cancelled', 'abandoned']);

/** What progressTokenSchema accepts: a safe integer, or a non-empty, well-formed string within the byte cap. */
export function isProgressToken(value: unknown): value is ProgressToken {
  if (typeof value === 'number') return Number.isSafeInteger(value);
  return (
    typeof value === 'string' &&
    value.length >= 1 &&
    value.length <= MAX_TOKEN_BYTES &&
    fitsUtf8Bytes(value, MAX_TOKEN_BYTES) &&
    isWellFormedText(value)
  );
}

/** What progressParamsSchema accepts. */
export function isProgressParams(value: unknown): value is ProgressParams {
  if (!isRecord(value) || !onlyKeys(value, PROGRESS_KEYS)) return false;
  const { progress, total, message, _meta } = value;
  return (
    isProgressToken(value.progressToken) &&
    typeof progress === 'number' &&
    Number.isFinite(progress) &&
    (total === undefined || (typeof total === 'number' && Number.isFinite(total) && total >= 0)) &&
    (message === undefined || typeof message === 'string') &&
    (_meta === undefined || isRecord(_meta))
  );
}

/** What doneParamsSchema accepts. */
export function isDoneParams(value: unknown): value is DoneParams {
  if (!isRecord(value) || !onlyKeys(value, DONE_KEYS)) return false;
  const { message } = value;
  return (
    isProgressToken(value.progressToken) &&
    END_STATUSES.has(value.status) &&
    (message === undefined || typeof message === 'string')
  );
}

/**
 * An object as zod's object schema takes one: not null, not an array. (Its record schema
 * also looks at `constructor`, which tells nothing apart in parsed JSON.)
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A strict object: every key is one the schema names. */
function onlyKeys(value: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}
