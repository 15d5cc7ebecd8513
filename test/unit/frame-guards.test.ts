/**
 * The daemon checks worker frames by hand (frame-guards.ts) so that it reads
 * its workers without loading zod: each check must give the schema's answer,
 * and each refusal the code and field the schema's first issue names, on every
 * frame of the worker conformance corpus, on its fields made wrong in every way
 * we know of, and on generated values.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type * as z from 'zod';
import {
  type FrameEvent,
  isClaimFrame,
  isDoneFrame,
  isEmptyRequest,
  isPong,
  isProgressFrame,
  WORKER_EVENT_NAMES,
} from '../../src/protocol/frame-guards.js';
import {
  claimFrameSchema,
  doneFrameSchema,
  emptyRequestSchema,
  pongSchema,
  progressFrameSchema,
  WORKER_EVENTS,
} from '../../src/protocol/frames.js';
import {
  checkEmptyRequest,
  explainClaimFrame,
  explainDoneFrame,
  explainProgressFrame,
  type FrameRejection,
} from '../../src/protocol/validate.js';
import { EDGE_VALUES, mutations } from '../helpers/edge-values.js';

interface Sent {
  type?: unknown;
  data?: unknown;
}

const corpus = JSON.parse(
  readFileSync(join(import.meta.dirname, '../conformance/worker.json'), 'utf8'),
) as { cases: Array<{ send?: string[] }> };
const sent: Sent[] = corpus.cases
  .flatMap((c) => c.send ?? [])
  .flatMap((text) => text.split('\f'))
  .flatMap((part) => {
    try {
      const envelope = JSON.parse(part) as unknown;
      return typeof envelope === 'object' && envelope !== null ? [envelope as Sent] : [];
    } catch {
      return [];
    }
  });
const dataOf = (type: string) => sent.filter((e) => e.type === type).map((e) => e.data);

const FIELDS = [
  'v',
  'progressToken',
  'progress',
  'total',
  'message',
  '_meta',
  'seq',
  'status',
  'extra',
];

const CHECKS: Record<
  FrameEvent,
  {
    guard: (data: unknown) => boolean;
    schema: z.ZodObject;
    explain: (data: unknown) => FrameRejection;
  }
> = {
  progress: { guard: isProgressFrame, schema: progressFrameSchema, explain: explainProgressFrame },
  done: { guard: isDoneFrame, schema: doneFrameSchema, explain: explainDoneFrame },
  claim: { guard: isClaimFrame, schema: claimFrameSchema, explain: explainClaimFrame },
};

/** What the schema's issues say a refusal must be: its code, and the field it names. */
function expectedRefusal(schema: z.ZodObject, data: unknown): { code: string; field?: string } {
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    return { code: 'invalid_frame' };
  const issues = schema.safeParse(data).error?.issues ?? [];
  if (issues.some((issue) => issue.path[0] === 'v')) return { code: 'unsupported_version' };
  if (issues.some((issue) => issue.path[0] === 'progressToken')) return { code: 'invalid_token' };
  if (issues.some((issue) => issue.code === 'unrecognized_keys')) return { code: 'unknown_field' };
  return { code: 'invalid_field', field: String(issues[0]?.path[0]) };
}

function agrees(data: unknown): void {
  for (const [event, { guard, schema, explain }] of Object.entries(CHECKS)) {
    const accepted = schema.safeParse(data).success;
    expect(guard(data), `${event}: ${JSON.stringify(data)}`).toBe(accepted);
    if (accepted) continue;
    const refusal = explain(data);
    const expected = expectedRefusal(schema, data);
    expect(refusal.code, `${event} refusal of ${JSON.stringify(data)}`).toBe(expected.code);
    if (expected.field !== undefined)
      expect(refusal.message.startsWith(`field ${expected.field}:`), refusal.message).toBe(true);
  }
  expect(isEmptyRequest(data)).toBe(emptyRequestSchema.safeParse(data).success);
  expect(checkEmptyRequest('ping', data) === undefined).toBe(
    emptyRequestSchema.safeParse(data).success,
  );
  expect(isPong(data)).toBe(pongSchema.safeParse(data).success);
}

describe('hand-written frame checks agree with the schemas', () => {
  it('name the events the protocol lists', () => {
    expect([...WORKER_EVENT_NAMES]).toEqual(Object.keys(WORKER_EVENTS));
  });

  it('accept every good frame of the conformance corpus, and agree on the rest', () => {
    const progress = dataOf('progress');
    expect(progress.filter((data) => isProgressFrame(data)).length).toBeGreaterThan(10);
    expect(progress.filter((data) => !isProgressFrame(data)).length).toBeGreaterThan(3);
    expect(dataOf('done').filter((data) => isDoneFrame(data)).length).toBeGreaterThan(0);
    expect(dataOf('claim').filter((data) => isClaimFrame(data)).length).toBeGreaterThan(0);
    for (const envelope of sent) agrees(envelope.data);
  });

  it('agree on every field of the corpus made wrong (or right) in each known way', () => {
    const frames = ['progress', 'done', 'claim'].flatMap(dataOf);
    const cases = mutations(frames, FIELDS);
    for (const data of [...cases, ...EDGE_VALUES]) agrees(data);
    // The cases reach both answers and every refusal code, not only one.
    expect(cases.filter((data) => isProgressFrame(data)).length).toBeGreaterThan(50);
    expect(cases.filter((data) => isDoneFrame(data)).length).toBeGreaterThan(10);
    const codes = new Set(
      cases.filter((data) => !isProgressFrame(data)).map((data) => explainProgressFrame(data).code),
    );
    expect([...codes].sort()).toEqual([
      'invalid_field',
      'invalid_token',
      'unknown_field',
      'unsupported_version',
    ]);
  });

  it('agree on generated frames', () => {
    const field = fc.oneof(fc.constantFrom(...EDGE_VALUES), fc.jsonValue(), fc.string());
    const frame = fc.record(
      {
        v: fc.oneof(fc.constant(1), field),
        progressToken: fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), field),
        progress: fc.oneof(fc.double(), field),
        total: fc.oneof(fc.double(), field),
        message: fc.oneof(fc.string(), field),
        _meta: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), field),
        seq: fc.oneof(fc.nat(), field),
        status: fc.oneof(fc.constantFrom('ok', 'error', 'cancelled', 'abandoned'), field),
        extra: field,
        pid: fc.oneof(fc.integer(), field),
        version: fc.oneof(fc.string(), field),
        protocol: fc.oneof(fc.constant(1), field),
      },
      { requiredKeys: [] },
    );
    fc.assert(fc.property(fc.oneof(frame, fc.jsonValue()), agrees), { numRuns: 5000 });
  });
});
