/**
 * The rate/ETA estimator on synthetic streams, each with its tolerance: steady,
 * accelerating, stalled, resumed from a checkpoint, bursty; and null where a
 * rate or an ETA cannot be known.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RATE_STAGE_MEMORY_MS, RateEstimator } from '../../src/daemon/rate-estimator.js';

/** Feeds `count` values, `everyMs` apart, `step` units each, from `start` at time `from`. */
function feed(
  estimator: RateEstimator,
  { from = 0, start = 0, step = 1, everyMs = 1000, count }: Feed,
): { at: number; progress: number } {
  let at = from;
  let progress = start;
  for (let i = 0; i < count; i++) {
    at += everyMs;
    progress += step;
    estimator.observe(at, progress);
  }
  return { at, progress };
}

interface Feed {
  from?: number;
  start?: number;
  step?: number;
  everyMs?: number;
  count: number;
}

const within = (actual: number | null, expected: number, tolerance: number) => {
  expect(actual).not.toBeNull();
  expect(Math.abs((actual as number) - expected) / expected).toBeLessThanOrEqual(tolerance);
};

describe('the rate estimator', () => {
  it('knows nothing from one value, or from values all at one instant', () => {
    const estimator = new RateEstimator();
    expect(estimator.rate(0)).toBeNull();
    estimator.observe(1000, 5);
    expect(estimator.rate(1000)).toBeNull();
    expect(estimator.etaMs(1000, 5, 10)).toBeNull();
    estimator.observe(1000, 6);
    expect(estimator.rate(2000)).toBeNull();
  });

  it('a steady job: the rate within 1%, the ETA within 2% of the truth', () => {
    for (const everyMs of [100, 1000, 5000]) {
      const estimator = new RateEstimator();
      // 2 units a second, for 60 s.
      const { at, progress } = feed(estimator, {
        step: (2 * everyMs) / 1000,
        everyMs,
        count: 60_000 / everyMs,
      });
      within(estimator.rate(at), 2, 0.01);
      within(estimator.etaMs(at, progress, 240), 60_000, 0.02);
    }
  });

  it('an accelerating job: after its rate doubles, the estimate is within 10% of the new rate in 20 s', () => {
    const estimator = new RateEstimator();
    const slow = feed(estimator, { count: 60 });
    within(estimator.rate(slow.at), 1, 0.01);
    const fast = feed(estimator, { from: slow.at, start: slow.progress, step: 2, count: 20 });
    within(estimator.rate(fast.at), 2, 0.1);
    // And not at once: the second average steadies the first.
    const jump = new RateEstimator();
    const before = feed(jump, { count: 60 });
    const one = feed(jump, { from: before.at, start: before.progress, step: 2, count: 1 });
    expect(jump.rate(one.at)).toBeLessThan(1.1);
  });

  it('a stalled job: the rate falls once the next value is overdue, and the ETA grows', () => {
    const estimator = new RateEstimator();
    const { at, progress } = feed(estimator, { count: 60 });
    const steady = estimator.rate(at) as number;
    // Within the usual interval nothing changes.
    expect(estimator.rate(at + 1000)).toBe(steady);
    // 15 s overdue: under 5% of the rate (a tenth per stage memory, in two stages).
    expect(estimator.rate(at + 1000 + 2 * RATE_STAGE_MEMORY_MS) as number).toBeLessThan(
      steady * 0.05,
    );
    const etaThen = estimator.etaMs(at, progress, 100) as number;
    const etaLater = estimator.etaMs(at + 10_000, progress, 100) as number;
    expect(etaLater).toBeGreaterThan(etaThen * 2);
    // The next value brings the rate back up, but not all the way at once.
    estimator.observe(at + 16_000, progress + 1);
    const resumed = estimator.rate(at + 16_000) as number;
    expect(resumed).toBeLessThan(steady);
    expect(resumed).toBeGreaterThan(0);
  });

  it('a job resumed from a checkpoint: its first value is a start, not progress made', () => {
    const estimator = new RateEstimator();
    // Resumes at 500 of 1000, then one unit a second.
    estimator.observe(0, 500);
    const { at, progress } = feed(estimator, { start: 500, count: 30 });
    within(estimator.rate(at), 1, 0.01);
    within(estimator.etaMs(at, progress, 1000), 470_000, 0.02);
  });

  it('values at the same instant count toward the next interval', () => {
    const estimator = new RateEstimator();
    estimator.observe(0, 0);
    estimator.observe(1000, 1);
    // Ten values within one millisecond, then one a second later: 10 units over 1 s, then 1.
    for (let i = 2; i <= 11; i++) estimator.observe(2000, i);
    estimator.observe(3000, 12);
    const rate = estimator.rate(3000) as number;
    expect(Number.isFinite(rate)).toBe(true);
    expect(rate).toBeGreaterThan(1);
  });

  it('an ETA needs a total; it is 0 at or past the total', () => {
    const estimator = new RateEstimator();
    const { at, progress } = feed(estimator, { count: 5 });
    expect(estimator.etaMs(at, progress, undefined)).toBeNull();
    expect(estimator.etaMs(at, progress, progress)).toBe(0);
    expect(estimator.etaMs(at, progress, progress - 1)).toBe(0);
  });

  it('whatever the stream, a rate is null or finite and >= 0, an ETA null or a whole number >= 0', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 60_000 }),
            fc.double({ min: 1e-9, max: 1e9, noNaN: true }),
          ),
          {
            maxLength: 50,
          },
        ),
        fc.integer({ min: 0, max: 600_000 }),
        fc.option(fc.double({ min: 0, max: 1e12, noNaN: true }), { nil: undefined }),
        (steps, later, total) => {
          const estimator = new RateEstimator();
          let at = 0;
          let progress = 0;
          for (const [gap, gain] of steps) {
            at += gap;
            progress += gain;
            estimator.observe(at, progress);
          }
          const rate = estimator.rate(at + later);
          if (rate !== null) expect(Number.isFinite(rate) && rate >= 0).toBe(true);
          const eta = estimator.etaMs(at + later, progress, total);
          if (eta !== null) expect(Number.isInteger(eta) && eta >= 0).toBe(true);
        },
      ),
    );
  });
});
