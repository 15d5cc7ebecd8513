/**
 * Frame validation: a compiled zod fast path for good frames, and a slow
 * path for bad ones that names the field, what was expected and how to fix it.
 */
import * as z from 'zod';
import type { RejectCode } from './errors.js';
import {
  type BackplaneCancel,
  type BackplaneHeartbeat,
  type BackplaneStreamMessage,
  backplaneCancelSchema,
  backplaneHeartbeatSchema,
  backplaneStreamMessageSchema,
  type ClaimFrame,
  claimFrameSchema,
  type DoneFrame,
  doneFrameSchema,
  emptyRequestSchema,
  metaProblem,
  type ProgressFrame,
  type ProgressToken,
  progressFrameSchema,
} from './frames.js';
import {
  isWellFormedText,
  MAX_MESSAGE_BYTES,
  MAX_META_DEPTH,
  MAX_SAFE_NUMBER,
  MAX_TOKEN_BYTES,
  PROTOCOL_VERSION,
  shorten,
} from './limits.js';

const compiledProgress = z.compile(progressFrameSchema);
const compiledDone = z.compile(doneFrameSchema);
const compiledClaim = z.compile(claimFrameSchema);

/** The frames with data to validate, by event. */
const FRAME_SCHEMAS = {
  progress: progressFrameSchema,
  done: doneFrameSchema,
  claim: claimFrameSchema,
} as const;

type ValidatedEvent = keyof typeof FRAME_SCHEMAS;

/** Why a frame was refused, with whatever correlation the frame carried. */
export interface FrameRejection {
  code: RejectCode;
  message: string;
  progressToken?: ProgressToken;
  seq?: number;
}

export type FrameCheck<F> = { ok: true; frame: F } | { ok: false; rejection: FrameRejection };

/** What each field must be, in words a person can act on. */
const EXPECTED: Record<string, string> = {
  v: `the number ${PROTOCOL_VERSION} (this daemon speaks protocol v${PROTOCOL_VERSION})`,
  progressToken: `a non-empty string of at most ${MAX_TOKEN_BYTES} UTF-8 bytes (no lone surrogate), or a safe integer`,
  progress: `a finite number within ±${MAX_SAFE_NUMBER}, greater than the last accepted progress (omit it to get last + 1)`,
  total: `a finite number >= 0 and at most ${MAX_SAFE_NUMBER}`,
  message: `a string of at most ${MAX_MESSAGE_BYTES} UTF-8 bytes, with no lone surrogate`,
  _meta: `a JSON object, nested at most ${MAX_META_DEPTH} levels deep, numbers within ±${MAX_SAFE_NUMBER}, no lone surrogate`,
  seq: 'a non-negative safe integer',
  status: 'one of "ok", "error", "cancelled"',
};

/** The hot path's check: the compiled validator alone, with no result object to allocate. */
export function isProgressFrame(data: unknown): data is ProgressFrame {
  return z.validate(compiledProgress, data);
}

export function isDoneFrame(data: unknown): data is DoneFrame {
  return z.validate(compiledDone, data);
}

export function isClaimFrame(data: unknown): data is ClaimFrame {
  return z.validate(compiledClaim, data);
}

/** Why a frame that failed isProgressFrame was refused, naming the field. */
export function explainProgressFrame(data: unknown): FrameRejection {
  return explain('progress', data);
}

export function explainDoneFrame(data: unknown): FrameRejection {
  return explain('done', data);
}

export function explainClaimFrame(data: unknown): FrameRejection {
  return explain('claim', data);
}

export function checkProgressFrame(data: unknown): FrameCheck<ProgressFrame> {
  if (isProgressFrame(data)) return { ok: true, frame: data };
  return { ok: false, rejection: explainProgressFrame(data) };
}

export function checkDoneFrame(data: unknown): FrameCheck<DoneFrame> {
  if (isDoneFrame(data)) return { ok: true, frame: data };
  return { ok: false, rejection: explainDoneFrame(data) };
}

/**
 * Why the data of a `ping` or `status` frame is refused, or undefined when it
 * is absent or {}: the data of every event is closed.
 */
export function checkEmptyRequest(event: string, data: unknown): FrameRejection | undefined {
  if (z.safeParse(emptyRequestSchema, data).success) return undefined;
  if (!isPlainObject(data)) {
    return {
      code: 'invalid_frame',
      message: `${event} data must be {} or absent, got ${describe(data)}`,
    };
  }
  return {
    code: 'unknown_field',
    message: `unknown field ${listKeys(Object.keys(data))} in a ${event} frame: ${event} takes no fields; send {} or no data`,
  };
}

function explain(event: ValidatedEvent, data: unknown): FrameRejection {
  const schema = FRAME_SCHEMAS[event];
  const fields = Object.keys(schema.shape);
  if (!isPlainObject(data)) {
    return {
      code: 'invalid_frame',
      message: `${event} data must be a JSON object such as {"v":1,"progressToken":"job-1"}, got ${describe(data)}`,
    };
  }
  const correlation = correlate(data);
  const result = schema.safeParse(data);
  const issues = result.success ? [] : result.error.issues;
  // The most fundamental problem first: version, then token, then the rest.
  const byField = (field: string) => issues.find((issue) => issue.path[0] === field);
  const version = byField('v');
  if (version) {
    const message = Object.hasOwn(data, 'v')
      ? `field v: expected ${EXPECTED.v}, got ${describe(data.v)}; upgrade the daemon or send "v": 1`
      : `field v is missing: add "v": ${PROTOCOL_VERSION} to every frame`;
    return { code: 'unsupported_version', message, ...correlation };
  }
  const token = byField('progressToken');
  if (token) {
    const message = Object.hasOwn(data, 'progressToken')
      ? `field progressToken: expected ${EXPECTED.progressToken}, got ${describe(data.progressToken)}`
      : `field progressToken is missing: set it to the token your job was given (${EXPECTED.progressToken})`;
    return { code: 'invalid_token', message, ...correlation };
  }
  const unknown = issues.find((issue) => issue.code === 'unrecognized_keys');
  if (unknown && unknown.code === 'unrecognized_keys') {
    const names = listKeys(unknown.keys);
    return {
      code: 'unknown_field',
      message: `unknown field ${names} in a ${event} frame: protocol v1 allows only ${fields.join(', ')}${fields.includes('_meta') ? '; put extra data in _meta' : ''}`,
      ...correlation,
    };
  }
  const first = issues[0];
  if (first) {
    const field = String(first.path[0] ?? '');
    const expected = EXPECTED[field] ?? first.message;
    const problem =
      field === '_meta' && isPlainObject(data._meta) ? metaProblem(data._meta) : undefined;
    return {
      code: 'invalid_field',
      message: `field ${field}: expected ${expected}, got ${problem === undefined ? describe(data[field]) : `an object with ${problem}`}`,
      ...correlation,
    };
  }
  // z.validate and safeParse disagree only if the schema has a bug; say so plainly.
  return {
    code: 'invalid_frame',
    message: `${event} frame refused by the v1 schema`,
    ...correlation,
  };
}

/** The token and seq of a bad frame, when they are themselves valid, so the worker can correlate. */
function correlate(data: Record<string, unknown>): { progressToken?: ProgressToken; seq?: number } {
  const out: { progressToken?: ProgressToken; seq?: number } = {};
  const token = data.progressToken;
  const tokenCheck = z.safeParse(progressFrameSchema.shape.progressToken, token);
  if (tokenCheck.success) out.progressToken = tokenCheck.data;
  const seq = data.seq;
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) out.seq = seq;
  return out;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A short, safe rendering of a bad value for an error message. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'number':
      if (Number.isNaN(value)) return 'NaN';
      if (!Number.isFinite(value))
        return `${value} (a JSON number too large for a double, such as 1e999)`;
      return `the number ${value}`;
    case 'string': {
      const shown = value.length > 40 ? `${shorten(value, 40)}…` : value;
      const lone = isWellFormedText(value) ? '' : ', with a lone surrogate';
      return `the string ${JSON.stringify(shown)} (${Buffer.byteLength(value)} bytes${lone})`;
    }
    case 'boolean':
      return `${value}`;
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

/** At most the first ten names, each cut to 64 characters: a reply must stay far below the frame cap. */
function listKeys(keys: readonly string[]): string {
  const shown = keys
    .slice(0, 10)
    .map((key) => JSON.stringify(key.length > 64 ? `${shorten(key, 64)}…` : key));
  return keys.length > 10 ? `${shown.join(', ')} and ${keys.length - 10} more` : shown.join(', ');
}

const compiledBackplaneStream = z.compile(backplaneStreamMessageSchema);
const compiledBackplaneCancel = z.compile(backplaneCancelSchema);
const compiledBackplaneHeartbeat = z.compile(backplaneHeartbeatSchema);

/** A backplane stream message, or undefined when it is not one (bad input is ignored, never thrown). */
export function parseBackplaneStream(value: unknown): BackplaneStreamMessage | undefined {
  const result = compiledBackplaneStream.safeParse(value);
  return result.success ? result.data : undefined;
}

export function parseBackplaneCancel(value: unknown): BackplaneCancel | undefined {
  const result = compiledBackplaneCancel.safeParse(value);
  return result.success ? result.data : undefined;
}

export function parseBackplaneHeartbeat(value: unknown): BackplaneHeartbeat | undefined {
  const result = compiledBackplaneHeartbeat.safeParse(value);
  return result.success ? result.data : undefined;
}
