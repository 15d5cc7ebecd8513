/**
 * The rate and ETA of one stream, from its (time, progress) values: pure, a
 * clock in and an estimate out, kept by the daemon's router for each stream
 * (status, lists, MCP tools) and used by `tail` for the streams it shows.
 *
 * Two exponential averages in a row over the rate between consecutive values
 * (as indicatif's estimator), weighted by time rather than by count, so that
 * a job that reports ten times a second and one that reports every ten
 * seconds forget at the same pace: a value's weight falls to a tenth after
 * RATE_STAGE_MEMORY_MS in each stage, about 15 s in all. The second average
 * steadies the first; a value that is late (a stall) pulls the rate down
 * from the moment it is overdue, without waiting for it.
 */

/** In each of the two averages, a value's weight falls to 10% after this long. */
export const RATE_STAGE_MEMORY_MS = 7500;

/** ln(0.1) per ms of stage memory: keep() is one Math.exp on the hot path. */
const DECAY_PER_MS = Math.log(0.1) / RATE_STAGE_MEMORY_MS;

/** The weight an average keeps for its past after `elapsedMs`: 1 at 0, 0.1 at the stage memory. */
function keep(elapsedMs: number): number {
  return Math.exp(elapsedMs * DECAY_PER_MS);
}

export class RateEstimator {
  /** Values observed: a rate needs two. */
  #values = 0;
  #lastAt = 0;
  #lastProgress = 0;
  /** Progress made at the same millisecond as the last value, counted into the next interval. */
  #sameInstant = 0;
  /** Units per second: the first average, and the second one over it. */
  #fast = 0;
  #smooth = 0;
  /** The usual time between values, in ms: how late a value may be before it counts as a stall. */
  #interval = 0;

  /** A value the stream accepted at `now` (ms). Progress only increases. */
  observe(now: number, progress: number): void {
    if (this.#values === 0) {
      this.#values = 1;
      this.#lastAt = now;
      this.#lastProgress = progress;
      return;
    }
    const elapsed = now - this.#lastAt;
    const gained = progress - this.#lastProgress + this.#sameInstant;
    this.#lastProgress = progress;
    if (elapsed <= 0) {
      this.#sameInstant = gained;
      return;
    }
    this.#sameInstant = 0;
    this.#lastAt = now;
    const rate = (gained * 1000) / elapsed;
    if (this.#values === 1) {
      this.#fast = rate;
      this.#smooth = rate;
      this.#interval = elapsed;
    } else {
      const past = keep(elapsed);
      this.#fast = past * this.#fast + (1 - past) * rate;
      this.#smooth = past * this.#smooth + (1 - past) * this.#fast;
      this.#interval = past * this.#interval + (1 - past) * elapsed;
    }
    this.#values = 2;
  }

  /** Units per second at `now`; null before two values at different times. */
  rate(now: number): number | null {
    if (this.#values < 2) return null;
    // Time past the usual interval with no value counts as time with no progress.
    const overdue = Math.max(0, now - this.#lastAt - this.#interval);
    if (overdue === 0) return this.#smooth;
    const past = keep(overdue);
    const fast = past * this.#fast;
    return past * this.#smooth + (1 - past) * fast;
  }

  /**
   * Milliseconds until `total` at `now`'s rate, from the last value; 0 once it
   * is reached; null without a total, or without a rate above zero.
   */
  etaMs(now: number, progress: number, total: number | undefined): number | null {
    if (total === undefined) return null;
    if (progress >= total) return 0;
    const rate = this.rate(now);
    if (rate === null || !(rate > 0)) return null;
    const eta = ((total - progress) / rate) * 1000;
    return Number.isFinite(eta) ? Math.round(eta) : null;
  }
}
