/**
 * The gateway client checks each notification by hand (notification-guards.ts)
 * instead of with zod: both must give the same answer, on every notification of
 * the conformance corpus, on each of its fields made wrong in every way we know
 * of, and on generated values.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { doneParamsSchema, progressParamsSchema } from '../../src/protocol/frames.js';
import { isDoneParams, isProgressParams } from '../../src/protocol/notification-guards.js';
import { DONE_METHOD, PROGRESS_METHOD } from '../../src/protocol/notifications.js';
import { EDGE_VALUES, mutations } from '../helpers/edge-values.js';

interface Message {
  method?: string;
  params?: unknown;
}

const corpus = JSON.parse(
  readFileSync(join(import.meta.dirname, '../conformance/gateway.json'), 'utf8'),
) as { cases: Array<{ expect: Message[] }> };
const sent = corpus.cases.flatMap((c) => c.expect);
const progressCorpus = sent.filter((m) => m.method === PROGRESS_METHOD).map((m) => m.params);
const doneCorpus = sent.filter((m) => m.method === DONE_METHOD).map((m) => m.params);

const FIELDS = ['progressToken', 'progress', 'total', 'message', '_meta', 'status', 'extra'];

const agreesOnProgress = (value: unknown) =>
  expect(isProgressParams(value), JSON.stringify(value)).toBe(
    progressParamsSchema.safeParse(value).success,
  );
const agreesOnDone = (value: unknown) =>
  expect(isDoneParams(value), JSON.stringify(value)).toBe(
    doneParamsSchema.safeParse(value).success,
  );

describe('hand-written notification checks agree with the schemas', () => {
  it('accepts every notification of the conformance corpus, as the schemas do', () => {
    expect(progressCorpus.length).toBeGreaterThan(5);
    expect(doneCorpus.length).toBeGreaterThan(2);
    for (const params of progressCorpus) {
      expect(isProgressParams(params)).toBe(true);
      agreesOnProgress(params);
    }
    for (const params of doneCorpus) {
      expect(isDoneParams(params)).toBe(true);
      agreesOnDone(params);
    }
  });

  it('agrees on every field of the corpus made wrong (or right) in each known way', () => {
    const progressCases = mutations(progressCorpus, FIELDS);
    const doneCases = mutations(doneCorpus, FIELDS);
    for (const value of [...progressCases, ...doneCases, ...EDGE_VALUES]) {
      agreesOnProgress(value);
      agreesOnDone(value);
    }
    // The cases test both answers, not only one.
    expect(progressCases.filter((value) => isProgressParams(value)).length).toBeGreaterThan(10);
    expect(progressCases.filter((value) => !isProgressParams(value)).length).toBeGreaterThan(10);
    expect(doneCases.filter((value) => isDoneParams(value)).length).toBeGreaterThan(5);
  });

  it('agrees on generated params', () => {
    const field = fc.oneof(fc.constantFrom(...EDGE_VALUES), fc.jsonValue(), fc.string());
    const params = fc.record(
      {
        progressToken: fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), field),
        progress: fc.oneof(fc.double(), field),
        total: fc.oneof(fc.double(), field),
        message: fc.oneof(fc.string(), field),
        _meta: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), field),
        status: fc.oneof(fc.constantFrom('ok', 'error', 'cancelled', 'abandoned'), field),
        extra: field,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(params, fc.jsonValue()), (value) => {
        agreesOnProgress(value);
        agreesOnDone(value);
      }),
      { numRuns: 5000 },
    );
  });
});
