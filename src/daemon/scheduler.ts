/**
 * Drives the router's clock: one timer, armed for the router's next deadline
 * (a coalescing flush, an abandonment, an eviction), re-armed after each tick.
 * Kept apart from the daemon so that its timing can be tested with fake timers.
 */
import { MAX_TIMER_MS } from '../shared/defaults.js';
import type { Router } from './router.js';

const RETRY_AFTER_ERROR_MS = 1000;

export class TickScheduler {
  readonly #router: Router;
  readonly #now: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor = Number.POSITIVE_INFINITY;
  #stopped = false;
  readonly #onError: (error: Error) => void;

  constructor(router: Router, now: () => number, onError: (error: Error) => void = () => {}) {
    this.#router = router;
    this.#now = now;
    this.#onError = onError;
  }

  /** Call after anything that may have moved the router's next deadline earlier. */
  schedule(): void {
    if (this.#stopped) return;
    const deadline = this.#router.nextDeadline();
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
      this.#router.tick(this.#now());
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
