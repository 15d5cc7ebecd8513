/**
 * The progress notifications of one MCP request, sent in order through its
 * request-scoped send, and the gap kept between the last one and the result.
 */
import type { ProgressParams } from '../protocol/frames.js';
import { RESULT_CONFIRM_TIMEOUT_MS, RESULT_GAP_MS } from '../protocol/limits.js';
import { PROGRESS_METHOD } from '../protocol/notifications.js';

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
  #chain: Promise<void> = Promise.resolve();
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
    options: { onFailure?: (error: unknown) => void; confirm?: ConfirmDelivery | undefined } = {},
  ) {
    this.#send = send;
    this.#onFailure = options.onFailure ?? (() => {});
    this.#confirm = options.confirm;
  }

  get failed(): boolean {
    return this.#failed;
  }

  push(params: ProgressParams): void {
    this.#chain = this.#chain.then(async () => {
      if (this.#failed) return;
      try {
        await this.#send({ method: PROGRESS_METHOD, params });
        this.#lastSentAt = performance.now();
        this.#sent++;
      } catch (error) {
        this.#failed = true;
        this.#onFailure(error);
      }
    });
  }

  /**
   * Settles once every notification pushed so far has been handed to the
   * transport and, when one was sent, once the client answered a ping (or
   * did not within RESULT_CONFIRM_TIMEOUT_MS) and RESULT_GAP_MS has passed
   * since the last: the result may follow then. `confirm: false` skips the
   * ping (the request was cancelled: no result follows).
   */
  async drain(options: { confirm?: boolean } = {}): Promise<void> {
    await this.#chain;
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
