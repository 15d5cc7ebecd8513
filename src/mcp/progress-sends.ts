/**
 * The progress notifications of one MCP request, sent in order through its
 * request-scoped send, and the gap kept between the last one and the result.
 */
import type { ProgressParams } from '../protocol/frames.js';
import { RESULT_CONFIRM_TIMEOUT_MS, RESULT_GAP_MS } from '../protocol/limits.js';
import { PROGRESS_METHOD } from '../protocol/notifications.js';
import { MAX_WAITING_PROGRESS_SENDS } from '../shared/defaults.js';

export interface McpProgressNotification {
  method: 'notifications/progress';
  params: ProgressParams;
}

export type SendProgress = (notification: McpProgressNotification) => Promise<void>;

/** Pings the client within the request (bounded by the timeout); settles when it answers. */
export type ConfirmDelivery = (timeoutMs: number) => Promise<unknown>;

export class ProgressSends {
  readonly #send: SendProgress;
  readonly #onFailure: (error: unknown) => void;
  readonly #confirm: ConfirmDelivery | undefined;
  readonly #maxWaiting: number;
  /** Values not yet handed to the transport, oldest first. */
  #waiting: ProgressParams[] = [];
  /** The sending loop while one runs; drain awaits it. */
  #pumping: Promise<void> | undefined;
  /** Values replaced by a newer one while the transport was behind. */
  coalesced = 0;
  #lastSentAt: number | undefined;
  #sent = 0;
  #confirmed = 0;
  #failed = false;

  /**
   * `onFailure` is called once, at the first send that rejects; nothing is sent after it.
   * `confirm` pings the client before the result (see RESULT_CONFIRM_TIMEOUT_MS).
   */
  constructor(
    send: SendProgress,
    options: {
      onFailure?: (error: unknown) => void;
      confirm?: ConfirmDelivery | undefined;
      maxWaiting?: number;
    } = {},
  ) {
    this.#send = send;
    this.#maxWaiting = options.maxWaiting ?? MAX_WAITING_PROGRESS_SENDS;
    this.#onFailure = options.onFailure ?? (() => {});
    this.#confirm = options.confirm;
  }

  get failed(): boolean {
    return this.#failed;
  }

  push(params: ProgressParams): void {
    if (this.#failed) return;
    if (this.#waiting.length >= this.#maxWaiting) {
      // Values only increase, so the newest may stand in for the last one waiting.
      this.#waiting[this.#waiting.length - 1] = params;
      this.coalesced++;
    } else {
      this.#waiting.push(params);
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#pumping !== undefined) return;
    this.#pumping = this.#pump().finally(() => {
      this.#pumping = undefined;
      // A push between the loop's end and this callback still goes out.
      if (this.#waiting.length > 0 && !this.#failed) this.#schedule();
    });
  }

  /** Sends what is waiting, one at a time, in order; stops at the first failure. */
  async #pump(): Promise<void> {
    // One turn first: the pushes of this turn queue up before the first send.
    await Promise.resolve();
    for (let next = this.#waiting.shift(); next !== undefined; next = this.#waiting.shift()) {
      try {
        await this.#send({ method: PROGRESS_METHOD, params: next });
        this.#lastSentAt = performance.now();
        this.#sent++;
      } catch (error) {
        this.#failed = true;
        this.#waiting = [];
        this.#onFailure(error);
        return;
      }
    }
  }

  /**
   * Settles once every notification pushed so far has been handed to the
   * transport and, when one was sent, once the client answered a ping (or
   * did not within RESULT_CONFIRM_TIMEOUT_MS) and RESULT_GAP_MS has passed
   * since the last: the result may follow then. `confirm: false` skips the
   * ping (the request was cancelled: no result follows).
   */
  async drain(options: { confirm?: boolean } = {}): Promise<void> {
    while (this.#pumping !== undefined) await this.#pumping;
    if (this.#lastSentAt === undefined) return;
    const sent = this.#sent;
    const confirm = this.#confirm;
    if (confirm !== undefined && options.confirm !== false && sent > this.#confirmed) {
      // Inside then(): on a revision without server-to-client requests (2026-07-28) the 2.x
      // SDK throws at once rather than rejecting; that is no answer, like a timeout.
      await Promise.resolve()
        .then(() => confirm(RESULT_CONFIRM_TIMEOUT_MS))
        .then(
          () => {
            this.#confirmed = Math.max(this.#confirmed, sent);
          },
          () => {},
        );
    }
    const wait = this.#lastSentAt + RESULT_GAP_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, Math.ceil(wait)));
  }
}
