/**
 * Hand-written checks of the frames a worker sends: the same rules as
 * progressFrameSchema, doneFrameSchema, claimFrameSchema and emptyRequestSchema
 * (frames.ts), with no zod, so that a daemon loads zod only for what needs it
 * (the gateway's requests, /mcp), not to read its workers. A test holds each
 * check to its schema on the conformance corpus, on mutations of it and on
 * generated values.
 */
import type { ClaimFrame, DoneFrame, DoneStatus, ProgressFrame } from './frames.js';
import {
  fitsUtf8Bytes,
  isWellFormedText,
  MAX_MESSAGE_BYTES,
  MAX_SAFE_NUMBER,
  PROTOCOL_VERSION,
} from './limits.js';
import { metaProblem } from './meta.js';
import { isProgressToken, isRecord } from './notification-guards.js';

/** The events a worker may send, in the order the protocol lists them (frames.ts WORKER_EVENTS). */
export const WORKER_EVENT_NAMES = ['progress', 'done', 'claim', 'ping', 'status'] as const;

/** The events whose data is a frame with fields. */
export type FrameEvent = 'progress' | 'done' | 'claim';

type FieldCheck = (value: unknown) => boolean;

// Each field's rule, once: the table below (refusals), the hot checks further down and the worker
// client (stream-state.ts, which refuses before sending what the daemon would refuse) call them.

/** A `progress` the daemon takes: a finite number within ±MAX_SAFE_NUMBER. */
export function isSafeNumber(value: unknown): value is number {
  return typeof value === 'number' && value >= -MAX_SAFE_NUMBER && value <= MAX_SAFE_NUMBER;
}

/** A `total` the daemon takes: a finite number from 0 to MAX_SAFE_NUMBER. */
export function isTotal(value: unknown): value is number {
  return typeof value === 'number' && value >= 0 && value <= MAX_SAFE_NUMBER;
}

function isMessageText(value: unknown): boolean {
  return (
    typeof value === 'string' &&
    value.length <= MAX_MESSAGE_BYTES &&
    fitsUtf8Bytes(value, MAX_MESSAGE_BYTES) &&
    isWellFormedText(value)
  );
}

function isMeta(value: unknown): boolean {
  return isRecord(value) && metaProblem(value) === undefined;
}

function isSeq(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

const DONE_STATUSES: ReadonlySet<unknown> = new Set(['ok', 'error', 'cancelled']);

/** A done `status` the daemon takes: ok, error or cancelled. */
export function isDoneStatus(value: unknown): value is DoneStatus {
  return DONE_STATUSES.has(value);
}

/** Each field's rule, under the name every frame gives it. */
const FIELD_CHECKS: Record<string, FieldCheck> = {
  v: (value) => value === PROTOCOL_VERSION,
  progressToken: isProgressToken,
  progress: isSafeNumber,
  total: isTotal,
  message: isMessageText,
  _meta: isMeta,
  seq: isSeq,
  status: isDoneStatus,
};

interface FrameShape {
  /** Every field, in the schema's order: a refusal names the first that is wrong. */
  readonly fields: readonly string[];
  readonly required: ReadonlySet<string>;
  readonly allowed: ReadonlySet<string>;
}

function shape(fields: readonly string[]): FrameShape {
  return { fields, required: new Set(['v', 'progressToken']), allowed: new Set(fields) };
}

/** The fields of each frame, as its schema lists them. */
export const FRAME_SHAPES: Record<FrameEvent, FrameShape> = {
  progress: shape(['v', 'progressToken', 'progress', 'total', 'message', '_meta', 'seq']),
  done: shape(['v', 'progressToken', 'status', 'message', 'seq']),
  claim: shape(['v', 'progressToken', 'seq']),
};

/** What is wrong with a frame's data, most fundamental first; undefined when nothing is. */
export type FrameProblem =
  | { readonly kind: 'not_object' }
  | { readonly kind: 'field'; readonly field: string }
  | { readonly kind: 'unknown_fields'; readonly keys: readonly string[] };

/**
 * The first problem of `data` as a frame of `event`: not an object; then `v`; then
 * the token; then fields the frame does not have; then the first field that is wrong.
 */
export function frameProblem(event: FrameEvent, data: unknown): FrameProblem | undefined {
  if (!isRecord(data)) return { kind: 'not_object' };
  const { fields, allowed } = FRAME_SHAPES[event];
  if (!fieldFits(event, 'v', data.v)) return { kind: 'field', field: 'v' };
  if (!fieldFits(event, 'progressToken', data.progressToken))
    return { kind: 'field', field: 'progressToken' };
  const unknown = Object.keys(data).filter((key) => !allowed.has(key));
  if (unknown.length > 0) return { kind: 'unknown_fields', keys: unknown };
  for (const field of fields)
    if (!fieldFits(event, field, data[field])) return { kind: 'field', field };
  return undefined;
}

function fieldFits(event: FrameEvent, field: string, value: unknown): boolean {
  if (value === undefined) return !FRAME_SHAPES[event].required.has(field);
  return FIELD_CHECKS[field]?.(value) ?? false;
}

// The hot path's checks, one function a frame calling each field's rule by name: V8 keeps
// each monomorphic, where one loop over FIELD_CHECKS ran at a fifth of zod's compiled check.

const DONE_KEYS: ReadonlySet<string> = FRAME_SHAPES.done.allowed;
const CLAIM_KEYS: ReadonlySet<string> = FRAME_SHAPES.claim.allowed;

/** onlyKeys for the hot frame, by switch: string compares of internalised keys beat a Set here. */
function onlyProgressKeys(data: Record<string, unknown>): boolean {
  for (const key in data) {
    switch (key) {
      case 'v':
      case 'progressToken':
      case 'progress':
      case 'total':
      case 'message':
      case '_meta':
      case 'seq':
        continue;
      default:
        return false;
    }
  }
  return true;
}

function onlyKeys(data: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const key in data) if (!allowed.has(key)) return false;
  return true;
}

/** What progressFrameSchema accepts. */
export function isProgressFrame(data: unknown): data is ProgressFrame {
  if (!isRecord(data) || data.v !== PROTOCOL_VERSION || !isProgressToken(data.progressToken))
    return false;
  const { progress, total, message, _meta, seq } = data;
  return (
    (progress === undefined || isSafeNumber(progress)) &&
    (total === undefined || isTotal(total)) &&
    (message === undefined || isMessageText(message)) &&
    (_meta === undefined || isMeta(_meta)) &&
    (seq === undefined || isSeq(seq)) &&
    onlyProgressKeys(data)
  );
}

/** What doneFrameSchema accepts. */
export function isDoneFrame(data: unknown): data is DoneFrame {
  if (!isRecord(data) || data.v !== PROTOCOL_VERSION || !isProgressToken(data.progressToken))
    return false;
  const { status, message, seq } = data;
  return (
    (status === undefined || isDoneStatus(status)) &&
    (message === undefined || isMessageText(message)) &&
    (seq === undefined || isSeq(seq)) &&
    onlyKeys(data, DONE_KEYS)
  );
}

/** What claimFrameSchema accepts. */
export function isClaimFrame(data: unknown): data is ClaimFrame {
  if (!isRecord(data) || data.v !== PROTOCOL_VERSION || !isProgressToken(data.progressToken))
    return false;
  return (data.seq === undefined || isSeq(data.seq)) && onlyKeys(data, CLAIM_KEYS);
}

/** What emptyRequestSchema accepts: no data, or {}. */
export function isEmptyRequest(data: unknown): boolean {
  return data === undefined || (isRecord(data) && Object.keys(data).length === 0);
}

/** What pongSchema accepts: the answer of a live daemon to `ping`. */
export function isPong(data: unknown): data is { pid: number; version: string; protocol: 1 } {
  if (!isRecord(data)) return false;
  const keys = Object.keys(data);
  return (
    keys.length === 3 &&
    Number.isSafeInteger(data.pid) &&
    typeof data.version === 'string' &&
    data.protocol === PROTOCOL_VERSION
  );
}
