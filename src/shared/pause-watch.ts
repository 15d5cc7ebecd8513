/**
 * Whether this process itself stood still between two runs of a periodic check: stopped
 * (SIGSTOP, a laptop asleep, swapped out) or its event loop blocked. Over such a gap a peer's
 * silence says nothing, since what the peer sent meanwhile is still unread in this process's
 * sockets: timers can run before I/O on waking (always after a blocked turn of the event loop;
 * a process stopped while idle in epoll mostly reads first), so a check that judged silence then
 * would condemn peers that did answer. A check that sees a pause gives every peer a fresh window.
 */
export class PauseWatch {
  readonly #toleranceMs: number;
  #last: number;

  /** `toleranceMs`: the longest gap between two checks that is not a pause (a few periods). */
  constructor(now: number, toleranceMs: number) {
    this.#last = now;
    this.#toleranceMs = toleranceMs;
  }

  /** Called at each check: true when more than the tolerance passed since the one before. */
  resumed(now: number): boolean {
    const gap = now - this.#last;
    this.#last = now;
    return gap > this.#toleranceMs;
  }
}
