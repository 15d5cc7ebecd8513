/**
 * Paces a transport's writes while notifications flow fast. Writes are corked; the pacer says
 * when to uncork them (`flush`). A write that comes `lingerMs` or more after the last flush goes
 * out at the end of its turn of the event loop, as an unpaced one would: a single update, or the
 * first after a pause, waits for nothing. One that comes sooner is held, with any that follow,
 * until the first turn that writes `lingerMs` or more after the last flush, or `2 * lingerMs`
 * after it at the latest (a timer, for the last of a run). So at 1,000 updates a second the
 * client gets a write, and a wake, every few updates instead of every update; every value still
 * goes out, in order. The flush rides on a turn that wrote anyway: a timer of its own would
 * wake the process once more per flush, costing what the batching saves.
 */
export class WritePacer {
  readonly #lingerMs: number;
  readonly #flush: () => void;
  readonly #now: () => number;
  #flushedAt = Number.NEGATIVE_INFINITY;
  /** A flush is due at the end of this turn. */
  #flushing = false;
  /** Writes are held: the latest the flush may come. */
  #holding: NodeJS.Timeout | undefined;
  readonly #run = (): void => {
    this.#flushing = false;
    if (this.#holding !== undefined) {
      clearTimeout(this.#holding);
      this.#holding = undefined;
    }
    this.#flushedAt = this.#now();
    this.#flush();
  };

  /** `lingerMs` 0: every turn's writes go out at its end (no pacing). */
  constructor(lingerMs: number, flush: () => void, now: () => number = () => performance.now()) {
    this.#lingerMs = lingerMs;
    this.#flush = flush;
    this.#now = now;
  }

  /** A write was corked: arranges its flush. */
  wrote(): void {
    if (this.#flushing) return;
    if (this.#now() - this.#flushedAt >= this.#lingerMs) this.flushSoon();
    else
      this.#holding ??= setTimeout(this.#run, this.#flushedAt + 2 * this.#lingerMs - this.#now());
  }

  /** Flushes at the end of this turn, held or not: a reply, which must not wait. */
  flushSoon(): void {
    if (this.#flushing) return;
    this.#flushing = true;
    process.nextTick(this.#run);
  }

  /** Flushes now (a stop): nothing stays held. */
  flushNow(): void {
    this.#run();
  }
}
