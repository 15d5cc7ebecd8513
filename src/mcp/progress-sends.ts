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

/**
 * Sends one notification; settles once the transport has it. A send that handed it to the
 * transport at once may return HANDED_ON: the next one then follows without waiting a turn.
 */
export type SendProgress = (notification: McpProgressNotification) => Promise<void>;

/** What a SendProgress returns when the transport took the notification at once (a settled promise). */
export const HANDED_ON: Promise<void> = Promise.resolve();

/** Pings the client within the request (bounded by the timeout); settles when it answers. */
export type ConfirmDelivery = (timeoutMs: number) => Promise<unknown>;

export class ProgressSends {
  readonly #send: SendProgress;
  readonly #onFailure: (error: unknown) => void;
  readonly #confirm: ConfirmDelivery | undefined;
  readonly #maxWaiting: number;
  /** Values not yet handed to the transport, oldest first. */
  #waiting: ProgressParams[] = [];
  /** A send is in flight: later values wait for it. */
  #sending = false;
  /** Called when the send in flight settles with nothing waiting (drain waits for that). */
  #whenIdle: Array<() => void> = [];
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
    if (!this.#sending) {
      this.#sendNow(params);
    } else if (this.#waiting.length >= this.#maxWaiting) {
      // Values only increase, so the newest may stand in for the last one waiting.
      this.#waiting[this.#waiting.length - 1] = params;
      this.coalesced++;
    } else {
      this.#waiting.push(params);
    }
  }

  /**
   * Hands values to the transport, oldest first: while each is taken at once (HANDED_ON), the
   * next follows now; otherwise it waits until that send settles. Nothing left: idle. Callbacks,
   * not an async loop: at 1k updates/s each value goes out alone, and a loop started per value
   * cost more than the send.
   */
  #sendNow(first: ProgressParams | undefined): void {
    let next = first;
    while (next !== undefined) {
      this.#sending = true;
      let sent: Promise<void>;
      try {
        sent = this.#send({ method: PROGRESS_METHOD, params: next });
      } catch (error) {
        sent = Promise.reject(error);
      }
      if (sent !== HANDED_ON) {
        sent.then(this.#onSent, this.#onSendFailed);
        return;
      }
      this.#counted();
      next = this.#waiting.shift();
    }
    this.#idle();
  }

  readonly #onSent = (): void => {
    this.#counted();
    this.#sendNow(this.#waiting.shift());
  };

  /** One more value reached the transport, now. */
  #counted(): void {
    this.#lastSentAt = performance.now();
    this.#sent++;
  }

  /** The first failure stops sending: nothing is sent after it. */
  readonly #onSendFailed = (error: unknown): void => {
    this.#failed = true;
    this.#waiting = [];
    this.#idle();
    this.#onFailure(error);
  };

  #idle(): void {
    this.#sending = false;
    const waiters = this.#whenIdle;
    this.#whenIdle = [];
    for (const resolve of waiters) resolve();
  }

  /**
   * Settles once every notification pushed so far has been handed to the
   * transport and, when one was sent, once the client answered a ping (or
   * did not within RESULT_CONFIRM_TIMEOUT_MS) and RESULT_GAP_MS has passed
   * since the last: the result may follow then. `confirm: false` skips the
   * ping (the request was cancelled: no result follows).
   */
  async drain(options: { confirm?: boolean } = {}): Promise<void> {
    while (this.#sending) await new Promise<void>((resolve) => this.#whenIdle.push(resolve));
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
