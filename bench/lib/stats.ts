/** Small statistics for the harness: percentiles of recorded samples and a least-squares slope. */

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

/** Percentiles of latencies in microseconds, reported in milliseconds. */
export function summariseLatencies(samplesUs: Float64Array): LatencySummary {
  const sorted = Float64Array.from(samplesUs).sort();
  const at = (q: number) =>
    sorted.length === 0
      ? Number.NaN
      : (sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN) /
        1000;
  return {
    count: sorted.length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    p999Ms: at(0.999),
    maxMs: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] ?? Number.NaN) / 1000,
  };
}

/** A growable list of doubles that does not allocate per sample. */
export class SampleList {
  #data = new Float64Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.#data.length) {
      const grown = new Float64Array(this.#data.length * 2);
      grown.set(this.#data);
      this.#data = grown;
    }
    this.#data[this.length++] = value;
  }

  values(): Float64Array {
    return this.#data.subarray(0, this.length);
  }
}

/** Slope of y over x by least squares; NaN with fewer than two distinct x. */
export function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  let sx = 0;
  let sy = 0;
  for (const [x, y] of points) {
    sx += x;
    sy += y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? Number.NaN)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}
