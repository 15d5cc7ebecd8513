/**
 * Drives the router's clock: one timer, armed for the router's next deadline
 * (a coalescing flush, an abandonment, an eviction), re-armed after each tick.
 * Kept apart from the daemon so that its timing can be tested with fake timers.
 */
import type { Router } from './router/router.js';

export class TickScheduler {
  readonly #router: Router;
  readonly #now: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #armedFor = Number.POSITIVE_INFINITY;
  #stopped = false;

  constructor(router: Router, now: () => number) {
    this.#router = router;
    this.#now = now;
  }

  /** Call after anything that may have moved the router's next deadline earlier. */
  schedule(): void {
    if (this.#stopped) return;
    const deadline = this.#router.nextDeadline();
    if (deadline >= this.#armedFor) return;
    clearTimeout(this.#timer);
    this.#armedFor = deadline;
    if (deadline === Number.POSITIVE_INFINITY) return;
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, Math.ceil(deadline - this.#now())));
    this.#timer.unref?.();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #tick(): void {
    this.#timer = undefined;
    this.#armedFor = Number.POSITIVE_INFINITY;
    this.#router.tick(this.#now());
    this.schedule();
  }
}
