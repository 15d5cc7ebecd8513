/**
 * The subscriptions of one gateway session, by label: the token a
 * subscriber's notifications arrive under (its `as`, or the stream's own
 * token). A session holds one subscription per label. Used by the gateway
 * client and by the daemon's in-process sessions, so both route, filter and
 * end subscriptions the same way.
 */
import type { ProgressToken, SubscribeParams } from '../protocol/frames.js';
import {
  DONE_METHOD,
  type Notification,
  type NotificationHandler,
} from '../protocol/notifications.js';
import { BridgeError } from './errors.js';

export interface LabelledSubscription {
  readonly label: ProgressToken;
  readonly params: SubscribeParams;
  readonly handler: NotificationHandler;
  /** The last progress delivered: a replayed snapshot (after a resubscribe) is not repeated. */
  lastProgress: number | undefined;
  ended: boolean;
}

export function labelOf(params: SubscribeParams): ProgressToken {
  return params.as ?? params.progressToken;
}

export class SubscriptionLabels {
  readonly #byLabel = new Map<ProgressToken, LabelledSubscription>();

  get size(): number {
    return this.#byLabel.size;
  }

  /** Adds a subscription; throws duplicate_subscription when its label is taken. */
  add(params: SubscribeParams, handler: NotificationHandler): LabelledSubscription {
    const label = labelOf(params);
    if (this.#byLabel.has(label)) {
      throw new BridgeError(
        'duplicate_subscription',
        `already subscribed under token ${JSON.stringify(label)}`,
      );
    }
    const entry: LabelledSubscription = {
      label,
      params,
      handler,
      lastProgress: undefined,
      ended: false,
    };
    this.#byLabel.set(label, entry);
    return entry;
  }

  /** Ends `entry`; false when it had already ended (done, removed, or replaced). */
  remove(entry: LabelledSubscription): boolean {
    if (this.#byLabel.get(entry.label) !== entry) return false;
    this.#byLabel.delete(entry.label);
    entry.ended = true;
    return true;
  }

  /** The subscriptions still live, for a resubscribe after a reconnect. */
  live(): LabelledSubscription[] {
    return [...this.#byLabel.values()].filter((entry) => !entry.ended);
  }

  /** Whether a subscription delivers under this label (it takes the label's notifications). */
  has(label: ProgressToken): boolean {
    return this.#byLabel.has(label);
  }

  clear(): void {
    for (const entry of this.#byLabel.values()) entry.ended = true;
    this.#byLabel.clear();
  }

  /**
   * Hands a notification to the subscription of its label: progress only
   * when it increases on what was delivered, and done ends the subscription.
   * Returns false when nothing took it.
   */
  deliver(notification: Notification): boolean {
    const entry = this.#byLabel.get(notification.params.progressToken);
    if (entry === undefined || entry.ended) return false;
    if (notification.method === DONE_METHOD) {
      this.remove(entry);
    } else {
      const { progress } = notification.params;
      if (entry.lastProgress !== undefined && !(progress > entry.lastProgress)) return false;
      entry.lastProgress = progress;
    }
    entry.handler(notification);
    return true;
  }
}

/**
 * A subscription to every stream (progress/subscribeAll), held with those by
 * label: per token, progress only when it increases on what was delivered (a
 * resubscribe's snapshot is not repeated), until that stream's done.
 */
export class EveryStream {
  readonly handler: NotificationHandler;
  readonly #lastProgress = new Map<ProgressToken, number>();

  constructor(handler: NotificationHandler) {
    this.handler = handler;
  }

  deliver(notification: Notification): void {
    const token = notification.params.progressToken;
    if (notification.method === DONE_METHOD) {
      // The token may start a new stream later, from any value.
      this.#lastProgress.delete(token);
    } else {
      const { progress } = notification.params;
      const last = this.#lastProgress.get(token);
      if (last !== undefined && !(progress > last)) return;
      this.#lastProgress.set(token, progress);
    }
    this.handler(notification);
  }
}
