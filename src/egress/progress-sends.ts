/**
 * The progress notifications of one MCP request, sent in order through its
 * request-scoped send, and the gap kept between the last one and the result.
 */
import type { ProgressParams } from '../protocol/frames.js';
import { RESULT_GAP_MS } from '../protocol/limits.js';
import { PROGRESS_METHOD } from '../router/notifications.js';

export interface McpProgressNotification {
  method: 'notifications/progress';
  params: ProgressParams;
}

export type SendProgress = (notification: McpProgressNotification) => Promise<void>;

export class ProgressSends {
  readonly #send: SendProgress;
  readonly #onFailure: (error: unknown) => void;
  #chain: Promise<void> = Promise.resolve();
  #lastSentAt: number | undefined;
  #failed = false;

  /** `onFailure` is called once, at the first send that rejects; nothing is sent after it. */
  constructor(send: SendProgress, onFailure: (error: unknown) => void = () => {}) {
    this.#send = send;
    this.#onFailure = onFailure;
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
      } catch (error) {
        this.#failed = true;
        this.#onFailure(error);
      }
    });
  }

  /**
   * Settles once every notification pushed so far has been handed to the
   * transport and, if the last went out less than RESULT_GAP_MS ago, once
   * that gap has passed: the result may follow then.
   */
  async drain(): Promise<void> {
    await this.#chain;
    if (this.#lastSentAt === undefined) return;
    const wait = this.#lastSentAt + RESULT_GAP_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, Math.ceil(wait)));
  }
}
