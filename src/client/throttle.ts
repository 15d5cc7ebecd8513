/**
 * The local coalescing throttle of the publishers: the first poke fires at
 * once and opens an interval; pokes inside the interval are remembered, and
 * one fire at the interval's end sends the newest (and opens the next
 * interval). So a tight loop costs one fire per interval, a lone update
 * leaves at once, and the last value is never held back for long.
 */

export class Throttle {
  readonly #intervalMs: number;
  readonly #fire: () => void;
  #timer: NodeJS.Timeout | undefined;
  /** Something arrived inside the current interval and waits for its end. */
  #dirty = false;

  constructor(intervalMs: number, fire: () => void) {
    this.#intervalMs = intervalMs;
    this.#fire = fire;
  }

  /** A new value exists: fire now, or at the end of the open interval. */
  poke(): void {
    if (this.#timer !== undefined) {
      if (!this.#dirty) {
        this.#dirty = true;
        // A held value keeps the process alive until it leaves (one interval at most).
        this.#timer.ref();
      }
      return;
    }
    this.#fire();
    this.#open();
  }

  /** Fires now if a value waits, and closes the interval (before `done`). */
  flush(): void {
    const dirty = this.#dirty;
    this.cancel();
    if (dirty) this.#fire();
  }

  /** Forgets the waiting value and the interval. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#dirty = false;
  }

  get waiting(): boolean {
    return this.#dirty;
  }

  #open(): void {
    if (this.#intervalMs <= 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#dirty) return;
      this.#dirty = false;
      this.#fire();
      this.#open();
    }, this.#intervalMs);
    // An idle interval must not keep a finished worker alive.
    this.#timer.unref();
  }
}
