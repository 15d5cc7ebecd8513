/** The harness's statistics: what every latency figure in the benchmark report rests on. */
import { describe, expect, it } from 'vitest';
import { median, summariseLatencies } from '../../bench/lib/stats.ts';

describe('bench statistics', () => {
  it('percentiles are the nearest-rank ones of the samples, whatever their order', () => {
    // 1..2000 µs, shuffled: the q-th percentile is the sample of rank ceil(q * n).
    const samples = Array.from({ length: 2000 }, (_, i) => i + 1);
    for (let i = samples.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [samples[i], samples[j]] = [samples[j] ?? 0, samples[i] ?? 0];
    }
    expect(summariseLatencies(Float64Array.from(samples))).toEqual({
      count: 2000,
      p50Ms: 1,
      p99Ms: 1.98,
      p999Ms: 1.998,
      maxMs: 2,
    });
    expect(summariseLatencies(Float64Array.from([5000]))).toMatchObject({ p50Ms: 5, p999Ms: 5 });
    expect(summariseLatencies(new Float64Array(0)).p99Ms).toBeNaN();
  });

  it('the median of an even count is the mean of the middle two, and NaN is left out', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([9, Number.NaN, 1, 5])).toBe(5);
    expect(median([])).toBeNaN();
  });
});
