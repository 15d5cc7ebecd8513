/**
 * A stream's cancellation as its worker sees it: the flag, the reason, the AbortSignal, and the
 * onCancel callbacks, each called once (at once when added after the cancel); a callback that
 * throws is reported, never thrown into the worker.
 */
import { BridgeError } from '../shared/errors.js';

export type CancelCallback = (reason: string | undefined) => void;

export class Cancellation {
  readonly #abort = new AbortController();
  readonly #callbacks = new Set<CancelCallback>();
  readonly #report: (error: BridgeError) => void;
  #cancelled = false;
  #reason: string | undefined;

  constructor(report: (error: BridgeError) => void) {
    this.#report = report;
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  onCancel(callback: CancelCallback): () => void {
    if (this.#cancelled) {
      queueMicrotask(() => this.#call(callback));
      return () => {};
    }
    this.#callbacks.add(callback);
    return () => {
      this.#callbacks.delete(callback);
    };
  }

  /** The daemon said cancel: once, the signal aborts and every callback is called. */
  cancel(reason: string | undefined): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#reason = reason;
    this.#abort.abort(
      new BridgeError(
        'cancelled',
        reason === undefined ? 'the stream was cancelled' : `the stream was cancelled: ${reason}`,
      ),
    );
    for (const callback of this.#callbacks) this.#call(callback);
    this.#callbacks.clear();
  }

  #call(callback: CancelCallback): void {
    try {
      callback(this.#reason);
    } catch (error) {
      this.#report(
        new BridgeError('cancel_callback_failed', `an onCancel callback threw: ${String(error)}`, {
          cause: error,
        }),
      );
    }
  }
}
