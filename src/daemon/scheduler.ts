/**
 * Drives a pure table's clock: one timer, armed for its next deadline, re-armed after each tick.
 * The router's (a coalescing flush, an abandonment, an eviction) and the task table's (a TTL
 * passing). Kept apart from the daemon so that its timing can be tested with fake timers.
 */
import { MAX_TIMER_MS } from '../shared/defaults.js';

/** What the scheduler drives: when it next has work, and the work, given the time. */
export interface Ticking {
  /** When tick() next has work to do, or Infinity. */
  nextDeadline(): number;
  tick(now: number): void;
}

const RETRY_AFTER_ERROR_MS = 1000;

export class TickScheduler {
  readonly #driven: Ticking;
  readonly #now: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor = Number.POSITIVE_INFINITY;
  #stopped = false;
  readonly #onError: (error: Error) => void;

  constructor(driven: Ticking, now: () => number, onError: (error: Error) => void = () => {}) {
    this.#driven = driven;
    this.#now = now;
    this.#onError = onError;
  }

  /** Call after anything that may have moved the next deadline earlier. */
  schedule(): void {
    if (this.#stopped) return;
    const deadline = this.#driven.nextDeadline();
    if (deadline < this.#armedFor) this.#arm(deadline);
  }

  /** The one timer, set for `deadline` (none for infinity). */
  #arm(deadline: number): void {
    clearTimeout(this.#timer);
    this.#armedFor = deadline;
    if (deadline === Number.POSITIVE_INFINITY) return;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(deadline - this.#now())));
    // A deadline beyond the longest timer is simply re-armed when this one fires.
    this.#timer = setTimeout(() => this.#tick(), delay);
    this.#timer.unref?.();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #tick(): void {
    this.#timer = undefined;
    this.#armedFor = Number.POSITIVE_INFINITY;
    try {
      this.#driven.tick(this.#now());
    } catch (error) {
      // A timer has no caller to throw to: an escape here would end the process. Retry in a
      // second rather than at once, so that a lasting fault logs once a second, not spins.
      this.#onError(error as Error);
      if (!this.#stopped) this.#arm(this.#now() + RETRY_AFTER_ERROR_MS);
      return;
    }
    this.schedule();
  }
}
