/**
 * The coalescing gate: per subscription, at most one progress notification
 * per `minIntervalMs`, always the newest, with a trailing flush so the newest
 * value is never dropped. A done notice always follows the final value.
 */
import type { ProgressToken } from '../protocol/index.js';
import type {
  DoneNotification,
  Notification,
  ProgressNotification,
} from '../protocol/notifications.js';

export type SubscriberId = number;

/**
 * Where the router's deliveries go (the session hub). The router calls it from inside its own
 * loops (publish, finish, tick, subscribe), so a sink may write, count and decide that a
 * subscriber is gone, but must not call back into the router: no subscribe, unsubscribe or
 * removeSubscriber until the call that delivered has returned. It must not throw.
 */
export type DeliverySink = (subscriber: SubscriberId, notification: Notification) => void;

export interface Subscription {
  readonly subscriber: SubscriberId;
  readonly token: ProgressToken;
  /** Deliver under this token instead of the worker's (`as`). */
  label: ProgressToken | undefined;
  minIntervalMs: number;
  lastSentAt: number;
  /** Newest progress held back by the interval. */
  pending: ProgressNotification | undefined;
  /** A done notice waiting for `pending` to go first. */
  pendingDone: DoneNotification | undefined;
  dueAt: number;
}

export function newSubscription(
  subscriber: SubscriberId,
  token: ProgressToken,
  label: ProgressToken | undefined,
  minIntervalMs: number,
): Subscription {
  return {
    subscriber,
    token,
    label,
    minIntervalMs,
    lastSentAt: Number.NEGATIVE_INFINITY,
    pending: undefined,
    pendingDone: undefined,
    dueAt: Number.POSITIVE_INFINITY,
  };
}

export class Gate {
  readonly #deliver: DeliverySink;
  /** Called once a subscription has delivered its done notice. */
  readonly #ended: (subscription: Subscription) => void;
  readonly #due = new Set<Subscription>();
  /** A lower bound on the earliest dueAt in #due. */
  #earliest = Number.POSITIVE_INFINITY;
  coalesced = 0;

  constructor(deliver: DeliverySink, ended: (subscription: Subscription) => void) {
    this.#deliver = deliver;
    this.#ended = ended;
  }

  offer(subscription: Subscription, notification: ProgressNotification, now: number): void {
    if (
      subscription.pending === undefined &&
      now - subscription.lastSentAt >= subscription.minIntervalMs
    ) {
      subscription.lastSentAt = now;
      this.#deliver(subscription.subscriber, notification);
      return;
    }
    if (subscription.pending === undefined) {
      subscription.dueAt = subscription.lastSentAt + subscription.minIntervalMs;
      this.#due.add(subscription);
      if (subscription.dueAt < this.#earliest) this.#earliest = subscription.dueAt;
    } else {
      this.coalesced++;
    }
    subscription.pending = notification;
  }

  /** Ends the subscription with `done`, after any held-back value. */
  finish(subscription: Subscription, done: DoneNotification): void {
    if (subscription.pending !== undefined) {
      subscription.pendingDone = done;
      return;
    }
    this.#deliver(subscription.subscriber, done);
    this.#ended(subscription);
  }

  /** Forgets whatever the subscription still holds; nothing more is delivered for it. */
  drop(subscription: Subscription): void {
    subscription.pending = undefined;
    subscription.pendingDone = undefined;
    this.#due.delete(subscription);
  }

  /** Delivers every held-back value whose interval has ended (all of them when `force`). */
  flush(now: number, force = false): void {
    if (!force && now < this.#earliest) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const subscription of this.#due) {
      if (!force && subscription.dueAt > now) {
        if (subscription.dueAt < earliest) earliest = subscription.dueAt;
        continue;
      }
      this.#due.delete(subscription);
      const pending = subscription.pending;
      const done = subscription.pendingDone;
      subscription.pending = undefined;
      subscription.pendingDone = undefined;
      if (pending !== undefined) {
        subscription.lastSentAt = now;
        this.#deliver(subscription.subscriber, pending);
      }
      if (done !== undefined) {
        this.#deliver(subscription.subscriber, done);
        this.#ended(subscription);
      }
    }
    this.#earliest = earliest;
  }

  nextDeadline(): number {
    return this.#due.size === 0 ? Number.POSITIVE_INFINITY : this.#earliest;
  }

  get held(): number {
    return this.#due.size;
  }
}
