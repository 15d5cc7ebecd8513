/**
 * Frame validation: the hand-written checks (frame-guards.ts) for good frames,
 * and for bad ones a refusal that names the field, what was expected and how
 * to fix it. No zod here: a daemon reads its workers without loading it.
 */
import type { RejectCode } from './errors.js';
import {
  FRAME_SHAPES,
  type FrameEvent,
  frameProblem,
  isDoneFrame,
  isEmptyRequest,
  isProgressFrame,
} from './frame-guards.js';
import type { DoneFrame, ProgressFrame, ProgressToken } from './frames.js';
import {
  isWellFormedText,
  MAX_MESSAGE_BYTES,
  MAX_META_DEPTH,
  MAX_SAFE_NUMBER,
  MAX_TOKEN_BYTES,
  PROTOCOL_VERSION,
  shorten,
} from './limits.js';
import { metaProblem } from './meta.js';
import { isProgressToken, isRecord } from './notification-guards.js';

export { isClaimFrame, isDoneFrame, isProgressFrame } from './frame-guards.js';

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
  if (isEmptyRequest(data)) return undefined;
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

function explain(event: FrameEvent, data: unknown): FrameRejection {
  const problem = frameProblem(event, data);
  if (!isRecord(data) || problem?.kind === 'not_object') {
    return {
      code: 'invalid_frame',
      message: `${event} data must be a JSON object such as {"v":1,"progressToken":"job-1"}, got ${describe(data)}`,
    };
  }
  const correlation = correlate(data);
  if (problem === undefined) {
    // Only a caller that explains a frame its check accepted gets here; say so plainly.
    return {
      code: 'invalid_frame',
      message: `${event} frame refused by the v1 schema`,
      ...correlation,
    };
  }
  if (problem.kind === 'unknown_fields') {
    const fields = FRAME_SHAPES[event].fields;
    return {
      code: 'unknown_field',
      message: `unknown field ${listKeys(problem.keys)} in a ${event} frame: protocol v1 allows only ${fields.join(', ')}${fields.includes('_meta') ? '; put extra data in _meta' : ''}`,
      ...correlation,
    };
  }
  const { field } = problem;
  const present = Object.hasOwn(data, field);
  if (field === 'v') {
    const message = present
      ? `field v: expected ${EXPECTED.v}, got ${describe(data.v)}; upgrade the daemon or send "v": 1`
      : `field v is missing: add "v": ${PROTOCOL_VERSION} to every frame`;
    return { code: 'unsupported_version', message, ...correlation };
  }
  if (field === 'progressToken') {
    const message = present
      ? `field progressToken: expected ${EXPECTED.progressToken}, got ${describe(data.progressToken)}`
      : `field progressToken is missing: set it to the token your job was given (${EXPECTED.progressToken})`;
    return { code: 'invalid_token', message, ...correlation };
  }
  const metaTrouble =
    field === '_meta' && isRecord(data._meta) ? metaProblem(data._meta) : undefined;
  return {
    code: 'invalid_field',
    message: `field ${field}: expected ${EXPECTED[field] ?? 'a value the v1 schema allows'}, got ${metaTrouble === undefined ? describe(data[field]) : `an object with ${metaTrouble}`}`,
    ...correlation,
  };
}

/** The token and seq of a bad frame, when they are themselves valid, so the worker can correlate. */
function correlate(data: Record<string, unknown>): { progressToken?: ProgressToken; seq?: number } {
  const out: { progressToken?: ProgressToken; seq?: number } = {};
  const token = data.progressToken;
  if (isProgressToken(token)) out.progressToken = token;
  const seq = data.seq;
  if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) out.seq = seq;
  return out;
}

/** An object, not null, not an array: what a frame's data must be. */
export const isPlainObject = isRecord;

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
      // Beyond 2^53 the double read from the frame need not be the text sent: say so.
      return Number.isSafeInteger(value) || !Number.isInteger(value)
        ? `the number ${value}`
        : `a number beyond ±${Number.MAX_SAFE_INTEGER} (read as the double ${value}; the text sent may differ)`;
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
