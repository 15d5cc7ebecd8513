/**
 * The stream table: token -> last value, ordinal, state and subscribers.
 * Pure and synchronous: frames, subscriptions and a clock go in; deliveries
 * come out through the sink given at construction, in the order they must
 * be sent. No I/O, no timers: the daemon calls tick() at nextDeadline().
 */
import type {
  DoneFrame,
  DoneParams,
  ProgressFrame,
  ProgressParams,
  ProgressToken,
  StreamEndStatus,
  StreamState,
  StreamSummary,
} from '../protocol/index.js';
import { DEFAULT_DONE_STATUS, MAX_SAFE_NUMBER } from '../protocol/limits.js';
import {
  type DoneNotification,
  doneNotification,
  type ProgressNotification,
  progressNotification,
  relabel,
} from '../protocol/notifications.js';
import {
  DEFAULT_ABANDON_GRACE_MS,
  DEFAULT_MAX_CLAIMS,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_CONNECTION,
  DEFAULT_MAX_SUBSCRIBE_ALL,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_RETENTION_MS,
  DEFAULT_STREAM_TTL_MS,
} from '../shared/defaults.js';
import {
  type DeliverySink,
  Gate,
  newSubscription,
  type SubscriberId,
  type Subscription,
} from './gate.js';
import { fillPage } from './list-page.js';
import { RateEstimator } from './rate-estimator.js';

export type ConnectionId = number;

/**
 * Told of every value and end the table accepts, in order, with the connection that sent it
 * (undefined for an end the table decided: abandonment, TTL). The backplane publishes them.
 */
export type StreamObserver = (
  connection: ConnectionId | undefined,
  notification: ProgressNotification | DoneNotification,
  last: ProgressNotification | undefined,
) => void;

export interface RouterOptions {
  /** How long a done stream is kept so that late watchers learn the outcome. */
  readonly retentionMs: number;
  /** An active stream with no update for this long ends as `abandoned`. */
  readonly streamTtlMs: number;
  /** A stream whose publishers all disconnected ends as `abandoned` after this. */
  readonly abandonGraceMs: number;
  /** Streams in the table (active and done; done ones are evicted first when full). */
  readonly maxStreams: number;
  /** Active streams one worker connection may publish to (and tokens it may claim). */
  readonly maxStreamsPerConnection: number;
  /** Claims held by all worker connections together (one per connection and token). */
  readonly maxClaims: number;
  /** Subscriptions one session may hold. */
  readonly maxSubscriptionsPerSubscriber: number;
  /** Coalescing interval of a subscription that does not choose one. */
  readonly defaultMinIntervalMs: number;
  /**
   * Sessions subscribed to every stream at once (`subscribeAll`). Each holds one subscription
   * per active stream, outside its own cap, so this bounds what they cost together.
   */
  readonly maxSubscribeAllSessions: number;
}

/** The router's defaults, each the daemon option's (src/shared/defaults.ts). */
export const DEFAULT_ROUTER_OPTIONS: RouterOptions = {
  retentionMs: DEFAULT_RETENTION_MS,
  streamTtlMs: DEFAULT_STREAM_TTL_MS,
  abandonGraceMs: DEFAULT_ABANDON_GRACE_MS,
  maxStreams: DEFAULT_MAX_STREAMS,
  maxStreamsPerConnection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
  maxClaims: DEFAULT_MAX_CLAIMS,
  maxSubscriptionsPerSubscriber: DEFAULT_MAX_SUBSCRIPTIONS,
  defaultMinIntervalMs: DEFAULT_MIN_INTERVAL_MS,
  maxSubscribeAllSessions: DEFAULT_MAX_SUBSCRIBE_ALL,
};

/** What a done's journal needs of the stream it ends. */
export interface EndingStream {
  readonly last: ProgressParams | undefined;
  readonly startedAt: number;
}

/** Makes an accepted done durable before it is applied, or refuses it. */
export type DoneCommit = (
  ending: EndingStream,
) => { ok: false; code: 'journal_failed'; message: string } | undefined;

/** A done read back from the journal: what it ended, how, and when. */
export interface RestoredDone {
  readonly progressToken: ProgressToken;
  readonly status: StreamEndStatus;
  readonly message?: string | undefined;
  /** The last value, without its token. */
  readonly last?: Omit<ProgressParams, 'progressToken'> | undefined;
  readonly startedAt: number;
  readonly at: number;
}

export type FrameRefusal = 'non_monotonic' | 'stream_closed' | 'too_many_streams';
export type SubscribeRefusal = 'too_many_subscriptions' | 'too_many_streams';

export type Outcome<Code extends string> =
  | { ok: true }
  | { ok: false; code: Code; message: string };

const ACCEPTED = Object.freeze({ ok: true as const });

interface Stream {
  readonly token: ProgressToken;
  /** When the stream entered the table, counted: list pages follow it (the table's own order). */
  readonly order: number;
  state: StreamState;
  lastProgress: number | undefined;
  last: ProgressNotification | undefined;
  done: DoneNotification | undefined;
  startedAt: number;
  updatedAt: number;
  readonly subscriptions: Set<Subscription>;
  /** Live worker connections that published to this stream while it was active. */
  readonly publishers: Set<ConnectionId>;
  /** Its rate and ETA, from the values accepted (made at the first). */
  rate: RateEstimator | undefined;
}

export interface SubscribeRequest {
  readonly progressToken: ProgressToken;
  readonly as?: ProgressToken | undefined;
  readonly minIntervalMs?: number | undefined;
}

/** A session subscribed to every stream: its interval, and the subscriptions that made. */
interface SubscribeAll {
  minIntervalMs: number;
  readonly attached: Set<Subscription>;
}

export interface StreamPage {
  readonly streams: StreamSummary[];
  /** The position to continue after; undefined on the last page. */
  readonly next: number | undefined;
}

export interface RouterStats {
  streams: { waiting: number; active: number; done: number };
  subscriptions: number;
  subscribers: number;
  subscribedToAll: number;
  /** Tokens claimed by worker connections (`claim`), one per connection and token. */
  claims: number;
  /** Subscriptions holding a value back for the end of their interval. */
  held: number;
  /** Progress values replaced by a newer one before they were sent. */
  coalesced: number;
}

export class Router {
  readonly #options: RouterOptions;
  readonly #gate: Gate;
  readonly #streams = new Map<ProgressToken, Stream>();
  #nextOrder = 0;
  /** Active and done streams; waiting ones (subscribers only) do not count. */
  #liveStreams = 0;
  #activeStreams = 0;
  /** Done streams in the order they ended, so the oldest is evicted first. */
  readonly #doneOrder = new Set<Stream>();
  /** Active streams with no live publisher or claimant, in the order they were orphaned. */
  readonly #orphans = new Map<Stream, number>();
  readonly #published = new Map<ConnectionId, Set<Stream>>();
  /** Tokens each connection claimed (`claim`): it hears cancels for them without publishing. */
  readonly #claimsByConnection = new Map<ConnectionId, Set<ProgressToken>>();
  readonly #claimants = new Map<ProgressToken, Set<ConnectionId>>();
  /** Claims held, one per connection and token. */
  #claimCount = 0;
  readonly #subscribers = new Map<SubscriberId, Map<ProgressToken, Subscription>>();
  #subscriptionCount = 0;
  readonly #subscribedToAll = new Map<SubscriberId, SubscribeAll>();
  /** No active stream can reach its TTL before this time. */
  #idleCheckAt = Number.POSITIVE_INFINITY;
  #observer: StreamObserver | undefined;
  #endObserver: ((ended: StreamSummary, now: number) => void) | undefined;

  constructor(options: RouterOptions, deliver: DeliverySink) {
    this.#options = options;
    this.#gate = new Gate(deliver, (subscription) => this.#forget(subscription));
  }

  /** Sets the one observer of accepted values and ends (the backplane), or removes it. */
  observe(observer: StreamObserver | undefined): void {
    this.#observer = observer;
  }

  /** Sets the one listener told of each stream's end, with its summary then (the task table). */
  observeEnds(listener: ((ended: StreamSummary, now: number) => void) | undefined): void {
    this.#endObserver = listener;
  }

  /** A worker's `progress` frame. */
  publish(connection: ConnectionId, frame: ProgressFrame, now: number): Outcome<FrameRefusal> {
    const token = frame.progressToken;
    let stream = this.#streams.get(token);
    if (stream === undefined || stream.state === 'waiting') {
      const refusal = this.#admit(connection, token, true);
      if (refusal !== undefined) return refusal;
      stream = this.#activate(stream, token, now);
    } else if (stream.state === 'done') {
      return this.#closed(stream);
    } else if (!stream.publishers.has(connection)) {
      const refusal = this.#admit(connection, token, true);
      if (refusal !== undefined) return refusal;
    }
    const last = stream.lastProgress;
    const progress = frame.progress ?? (last ?? 0) + 1;
    if (progress > MAX_SAFE_NUMBER) {
      return {
        ok: false,
        code: 'non_monotonic',
        message: `last + 1 would exceed ${MAX_SAFE_NUMBER} for token ${show(token)}: the stream cannot go higher; send done`,
      };
    }
    if (last !== undefined && !(progress > last)) {
      return {
        ok: false,
        code: 'non_monotonic',
        message:
          `progress ${progress} is not greater than the last accepted progress ${last} for token ${show(token)}: ` +
          'MCP requires progress to increase with every notification; send a larger value, or omit progress to get last + 1',
      };
    }
    stream.lastProgress = progress;
    stream.updatedAt = now;
    stream.rate ??= new RateEstimator();
    stream.rate.observe(now, progress);
    this.#addPublisher(stream, connection);
    const notification = progressNotification(frame, progress);
    stream.last = notification;
    this.#observer?.(connection, notification, undefined);
    for (const subscription of stream.subscriptions) {
      this.#gate.offer(subscription, labelled(notification, subscription), now);
    }
    return ACCEPTED;
  }

  /**
   * A worker's `done` frame. A token never seen becomes a stream that is already done.
   * `commit` (the daemon's journal) is called once the done is known to be accepted and before
   * anything changes; a refusal from it refuses the done, and the stream stays as it was.
   */
  finish(
    connection: ConnectionId,
    frame: DoneFrame,
    now: number,
    commit?: DoneCommit,
  ): Outcome<FrameRefusal | 'journal_failed'> {
    const token = frame.progressToken;
    let stream = this.#streams.get(token);
    if (stream?.state === 'done') return this.#closed(stream);
    const starts = stream === undefined || stream.state === 'waiting';
    if (starts) {
      const refusal = this.#admit(connection, token, false);
      if (refusal !== undefined) return refusal;
    }
    // A stream that starts with its done has no value yet, and starts now.
    const refused = commit?.(
      stream === undefined || starts
        ? { last: undefined, startedAt: now }
        : { last: stream.last?.params, startedAt: stream.startedAt },
    );
    if (refused !== undefined) return refused;
    if (stream === undefined || stream.state === 'waiting')
      stream = this.#activate(stream, token, now);
    const params: DoneParams = {
      progressToken: token,
      status: frame.status ?? DEFAULT_DONE_STATUS,
    };
    if (frame.message !== undefined) params.message = frame.message;
    this.#end(stream, params, now, connection);
    return ACCEPTED;
  }

  /**
   * A done an earlier daemon acked (read back from its journal): the stream is done again with
   * its last value and its own times, so its retention counts from `at`, not from now.
   * Call in the order the dones were accepted, before any other frame.
   */
  restore(done: RestoredDone): void {
    const token = done.progressToken;
    const existing = this.#streams.get(token);
    // A later line for the same token (it was evicted and reused) replaces the earlier one.
    if (existing?.state === 'done') this.#evict(existing);
    else if (existing !== undefined) return;
    if (this.#liveStreams >= this.#options.maxStreams) {
      const oldestDone = this.#doneOrder.values().next();
      if (oldestDone.done) return;
      this.#evict(oldestDone.value);
    }
    const stream = newStream(token, 'done', done.startedAt, this.#nextOrder++);
    stream.updatedAt = done.at;
    if (done.last !== undefined) {
      stream.last = progressNotification(
        { v: 1, progressToken: token, ...done.last },
        done.last.progress,
      );
      stream.lastProgress = done.last.progress;
    }
    const params: DoneParams = { progressToken: token, status: done.status };
    if (done.message !== undefined) params.message = done.message;
    stream.done = doneNotification(params);
    this.#streams.set(token, stream);
    this.#liveStreams++;
    this.#doneOrder.add(stream);
  }

  subscribe(
    subscriber: SubscriberId,
    request: SubscribeRequest,
    now: number,
  ): Outcome<SubscribeRefusal> {
    const token = request.progressToken;
    const mine = this.#subscribers.get(subscriber);
    const existing = mine?.get(token);
    if (existing !== undefined) {
      // A repeated subscribe changes options only: resending the snapshot would repeat a value.
      existing.label = request.as;
      existing.minIntervalMs = request.minIntervalMs ?? this.#options.defaultMinIntervalMs;
      // Made by its token now: it outlives unsubscribeAll.
      this.#subscribedToAll.get(subscriber)?.attached.delete(existing);
      return ACCEPTED;
    }
    // Those subscribeAll made are bounded by the active streams, not by this cap.
    const held = (mine?.size ?? 0) - (this.#subscribedToAll.get(subscriber)?.attached.size ?? 0);
    if (held >= this.#options.maxSubscriptionsPerSubscriber) {
      return {
        ok: false,
        code: 'too_many_subscriptions',
        message: `this session already holds ${held} subscriptions, the cap (--max-subscriptions); unsubscribe from finished streams first`,
      };
    }
    let stream = this.#streams.get(token);
    // Waiting streams (subscribers, no worker yet) have a cap of their own, as large as the live one.
    if (
      stream === undefined &&
      this.#streams.size - this.#liveStreams >= this.#options.maxStreams
    ) {
      return {
        ok: false,
        code: 'too_many_streams',
        message: `${this.#options.maxStreams} streams are already waiting for their first frame, the cap (--max-streams): unsubscribe from tokens no worker will publish`,
      };
    }
    if (stream === undefined) {
      stream = newStream(token, 'waiting', now, this.#nextOrder++);
      this.#streams.set(token, stream);
    }
    this.#attach(
      subscriber,
      stream,
      request.as === token ? undefined : request.as,
      request.minIntervalMs ?? this.#options.defaultMinIntervalMs,
      now,
    );
    return ACCEPTED;
  }

  /**
   * Subscribes the session to every active stream (its last value now) and to every stream
   * that becomes active later, until `unsubscribeAll`. Done streams are not sent: they are
   * in `page`. A stream the session subscribed to by its token keeps that subscription.
   */
  subscribeAll(
    subscriber: SubscriberId,
    minIntervalMs: number | undefined,
    now: number,
  ): Outcome<'too_many_subscriptions'> {
    const interval = minIntervalMs ?? this.#options.defaultMinIntervalMs;
    let all = this.#subscribedToAll.get(subscriber);
    if (all !== undefined) {
      // Again: a new interval for what it holds and what comes, and nothing sent again.
      all.minIntervalMs = interval;
      for (const subscription of all.attached) subscription.minIntervalMs = interval;
      return ACCEPTED;
    }
    if (this.#subscribedToAll.size >= this.#options.maxSubscribeAllSessions) {
      return {
        ok: false,
        code: 'too_many_subscriptions',
        message: `${this.#subscribedToAll.size} sessions already subscribe to every stream, the cap (--max-subscribe-all): subscribe to tokens by name, or end one of those sessions`,
      };
    }
    all = { minIntervalMs: interval, attached: new Set() };
    this.#subscribedToAll.set(subscriber, all);
    for (const stream of this.#streams.values()) {
      if (stream.state === 'active') this.#attachToAll(subscriber, all, stream, now);
    }
    return ACCEPTED;
  }

  /** Ends `subscribeAll`: the subscriptions it made end, those made by token stay. */
  unsubscribeAll(subscriber: SubscriberId): void {
    const all = this.#subscribedToAll.get(subscriber);
    if (all === undefined) return;
    this.#subscribedToAll.delete(subscriber);
    for (const subscription of [...all.attached]) {
      this.#gate.drop(subscription);
      this.#forget(subscription);
    }
  }

  /** Ends one subscription and drops whatever it still held. Returns whether it existed. */
  unsubscribe(subscriber: SubscriberId, token: ProgressToken): boolean {
    const subscription = this.#subscribers.get(subscriber)?.get(token);
    if (subscription === undefined) return false;
    this.#gate.drop(subscription);
    this.#forget(subscription);
    return true;
  }

  /** A session went away: all its subscriptions end, nothing more is delivered to it. */
  removeSubscriber(subscriber: SubscriberId): void {
    this.#subscribedToAll.delete(subscriber);
    const mine = this.#subscribers.get(subscriber);
    if (mine === undefined) return;
    for (const subscription of [...mine.values()]) {
      this.#gate.drop(subscription);
      this.#forget(subscription);
    }
  }

  /** A worker connection closed: its streams start their abandonment grace period. */
  removeConnection(connection: ConnectionId, now: number): void {
    const streams = this.#published.get(connection);
    this.#published.delete(connection);
    for (const stream of streams ?? []) stream.publishers.delete(connection);
    for (const token of this.#claimsByConnection.get(connection) ?? []) {
      this.#claimCount--;
      const claimants = this.#claimants.get(token);
      claimants?.delete(connection);
      if (claimants?.size === 0) this.#claimants.delete(token);
      const stream = this.#streams.get(token);
      if (stream !== undefined) this.#orphanIfUnattended(stream, now);
    }
    this.#claimsByConnection.delete(connection);
    for (const stream of streams ?? []) this.#orphanIfUnattended(stream, now);
  }

  /**
   * An active stream with no live publisher and no claimant starts its abandonment grace; so does
   * a waiting one whose last claimant left before publishing, since its subscribers wait for that worker.
   */
  #orphanIfUnattended(stream: Stream, now: number): void {
    const attended =
      stream.state === 'active' || (stream.state === 'waiting' && stream.subscriptions.size > 0);
    if (!attended || stream.publishers.size > 0 || this.#orphans.has(stream)) return;
    if (this.#claimants.has(stream.token)) return;
    this.#orphans.set(stream, now);
  }

  /**
   * A worker's `claim`: the connection works for the token and hears its
   * cancels, whether or not it has published yet. Claims end with the connection.
   */
  claim(
    connection: ConnectionId,
    token: ProgressToken,
  ): Outcome<'too_many_streams' | 'too_many_claims'> {
    let mine = this.#claimsByConnection.get(connection);
    if (mine?.has(token)) return ACCEPTED;
    if (this.#claimCount >= this.#options.maxClaims) {
      return {
        ok: false,
        code: 'too_many_claims',
        message: `the daemon holds ${this.#claimCount} claims, the cap for all connections together (--max-claims): close connections whose jobs ended, or raise the cap`,
      };
    }
    if (mine !== undefined && mine.size >= this.#options.maxStreamsPerConnection) {
      return {
        ok: false,
        code: 'too_many_streams',
        message: `this connection already claims ${mine.size} tokens, the per-connection cap (--max-streams-per-connection)`,
      };
    }
    if (!this.#claimants.has(token) && this.#claimants.size >= this.#options.maxStreams) {
      return {
        ok: false,
        code: 'too_many_streams',
        message: `${this.#claimants.size} tokens are claimed already, the cap (--max-streams): send done for finished jobs, or close their connections`,
      };
    }
    if (mine === undefined) {
      mine = new Set();
      this.#claimsByConnection.set(connection, mine);
    }
    mine.add(token);
    this.#claimCount++;
    let claimants = this.#claimants.get(token);
    if (claimants === undefined) {
      claimants = new Set();
      this.#claimants.set(token, claimants);
    }
    claimants.add(connection);
    // A claimant that comes back (a reconnecting worker, a wrapper) keeps the stream from being abandoned.
    const stream = this.#streams.get(token);
    if (stream !== undefined) this.#orphans.delete(stream);
    return ACCEPTED;
  }

  /** Ends an active stream as abandoned, with the reason (the backplane: its host was lost). */
  abandon(token: ProgressToken, message: string, now: number): boolean {
    const stream = this.#streams.get(token);
    if (stream?.state !== 'active') return false;
    this.#end(stream, { progressToken: token, status: 'abandoned', message }, now);
    return true;
  }

  /** The worker connections to tell when a stream is cancelled: its publishers and claimants, unless it is done. */
  cancelTargets(token: ProgressToken): ConnectionId[] {
    const stream = this.#streams.get(token);
    if (stream?.state === 'done') return [];
    const targets = new Set<ConnectionId>(stream?.state === 'active' ? stream.publishers : []);
    for (const connection of this.#claimants.get(token) ?? []) targets.add(connection);
    return [...targets];
  }

  /** Runs every rule that is due at `now`: coalescing flushes, abandonment, eviction. */
  tick(now: number): void {
    this.#gate.flush(now);
    const { retentionMs, abandonGraceMs, streamTtlMs } = this.#options;
    for (const [stream, since] of this.#orphans) {
      if (since + abandonGraceMs > now) break;
      if (stream.state === 'waiting') {
        // Counted as live from here: a done stream is kept for the retention window like any other.
        stream.state = 'active';
        this.#liveStreams++;
        this.#activeStreams++;
      }
      this.#end(
        stream,
        {
          progressToken: stream.token,
          status: 'abandoned',
          message: `the worker disconnected without sending done and did not come back within ${seconds(abandonGraceMs)}`,
        },
        now,
      );
    }
    if (this.#idleCheckAt <= now) {
      let next = Number.POSITIVE_INFINITY;
      for (const stream of this.#streams.values()) {
        if (stream.state !== 'active') continue;
        const expiry = stream.updatedAt + streamTtlMs;
        if (expiry <= now) {
          this.#end(
            stream,
            {
              progressToken: stream.token,
              status: 'abandoned',
              message: `no update for ${seconds(streamTtlMs)} (the stream TTL)`,
            },
            now,
          );
        } else if (expiry < next) {
          next = expiry;
        }
      }
      this.#idleCheckAt = next;
    }
    for (const stream of this.#doneOrder) {
      if (stream.updatedAt + retentionMs > now) break;
      this.#evict(stream);
    }
  }

  /** When tick() next has work to do, or Infinity. */
  nextDeadline(): number {
    let next = Math.min(this.#gate.nextDeadline(), this.#idleCheckAt);
    const orphanedSince = oldest(this.#orphans);
    if (orphanedSince !== undefined)
      next = Math.min(next, orphanedSince + this.#options.abandonGraceMs);
    const oldestDone = oldest(this.#doneOrder);
    if (oldestDone !== undefined)
      next = Math.min(next, oldestDone.updatedAt + this.#options.retentionMs);
    return next;
  }

  /** Sends every held-back value now, for a graceful stop. */
  flushAll(now: number): void {
    this.#gate.flush(now, true);
  }

  /** Every stream; with `now`, an active one's rate and ETA too. */
  list(now?: number): StreamSummary[] {
    const out: StreamSummary[] = [];
    for (const stream of this.#streams.values()) out.push(summarise(stream, now));
    return out;
  }

  /**
   * One page of the stream table, in the order streams entered it: those
   * after `after` (a `next` of an earlier page), at most `limit` of them and,
   * past the first, at most `maxBytes` of JSON (each summary, as `present`
   * makes it, and its comma): list-page.ts. `next` is set when more follow.
   */
  page(
    after: number | undefined,
    limit: number,
    maxBytes: number,
    present: (summary: StreamSummary) => StreamSummary = (summary) => summary,
    now?: number,
  ): StreamPage {
    const page = fillPage(
      this.#streams.values(),
      (stream) => stream.order,
      { after, limit, maxBytes },
      // Measured as sent: with what the caller adds (another host's name).
      (stream) => present(summarise(stream, now)),
    );
    return { streams: page.items, next: page.next };
  }

  /** Positions (`order`) handed out so far: every page's `next` is below this. */
  get positionsIssued(): number {
    return this.#nextOrder;
  }

  /** One stream; with `now`, an active one's rate and ETA too. */
  get(token: ProgressToken, now?: number): StreamSummary | undefined {
    const stream = this.#streams.get(token);
    return stream === undefined ? undefined : summarise(stream, now);
  }

  stats(): RouterStats {
    return {
      streams: {
        waiting: this.#streams.size - this.#liveStreams,
        active: this.#activeStreams,
        done: this.#liveStreams - this.#activeStreams,
      },
      subscriptions: this.#subscriptionCount,
      subscribers: this.#subscribers.size,
      subscribedToAll: this.#subscribedToAll.size,
      claims: this.#claimCount,
      held: this.#gate.held,
      coalesced: this.#gate.coalesced,
    };
  }

  /**
   * Checks the caps before `connection` starts a stream or, when `publishes`,
   * adds one to the active streams it publishes to.
   */
  #admit(
    connection: ConnectionId,
    token: ProgressToken,
    publishes: boolean,
  ): Outcome<'too_many_streams'> | undefined {
    const isNew = this.#streams.get(token)?.state !== 'active';
    if (isNew && this.#liveStreams >= this.#options.maxStreams) {
      const oldestDone = this.#doneOrder.values().next();
      if (oldestDone.done) {
        return {
          ok: false,
          code: 'too_many_streams',
          message: `the daemon holds ${this.#liveStreams} active streams, its cap (--max-streams): finish streams with done, or raise the cap`,
        };
      }
      this.#evict(oldestDone.value);
    }
    const mine = this.#published.get(connection)?.size ?? 0;
    if (publishes && mine >= this.#options.maxStreamsPerConnection) {
      return {
        ok: false,
        code: 'too_many_streams',
        message: `this connection already publishes ${mine} active streams, the per-connection cap (--max-streams-per-connection): send done for finished streams`,
      };
    }
    return undefined;
  }

  #activate(waiting: Stream | undefined, token: ProgressToken, now: number): Stream {
    let stream = waiting;
    if (stream === undefined) {
      stream = newStream(token, 'active', now, this.#nextOrder++);
      this.#streams.set(token, stream);
    } else {
      stream.state = 'active';
      stream.startedAt = now;
      stream.updatedAt = now;
    }
    this.#liveStreams++;
    this.#activeStreams++;
    if (now + this.#options.streamTtlMs < this.#idleCheckAt) {
      this.#idleCheckAt = now + this.#options.streamTtlMs;
    }
    for (const [subscriber, all] of this.#subscribedToAll) {
      this.#attachToAll(subscriber, all, stream, now);
    }
    return stream;
  }

  /** A subscribeAll session's subscription to one stream, unless it has one by token. */
  #attachToAll(subscriber: SubscriberId, all: SubscribeAll, stream: Stream, now: number): void {
    if (this.#subscribers.get(subscriber)?.has(stream.token)) return;
    all.attached.add(this.#attach(subscriber, stream, undefined, all.minIntervalMs, now));
  }

  /** A new subscription to `stream`: its last value now, and its done if it has one. */
  #attach(
    subscriber: SubscriberId,
    stream: Stream,
    label: ProgressToken | undefined,
    minIntervalMs: number,
    now: number,
  ): Subscription {
    let mine = this.#subscribers.get(subscriber);
    if (mine === undefined) {
      mine = new Map();
      this.#subscribers.set(subscriber, mine);
    }
    const subscription = newSubscription(subscriber, stream.token, label, minIntervalMs);
    mine.set(stream.token, subscription);
    this.#subscriptionCount++;
    if (stream.last !== undefined) {
      this.#gate.offer(subscription, labelled(stream.last, subscription), now);
    }
    if (stream.done !== undefined) {
      this.#gate.finish(subscription, labelled(stream.done, subscription));
    } else {
      stream.subscriptions.add(subscription);
    }
    return subscription;
  }

  #addPublisher(stream: Stream, connection: ConnectionId): void {
    if (stream.publishers.has(connection)) return;
    stream.publishers.add(connection);
    this.#orphans.delete(stream);
    let mine = this.#published.get(connection);
    if (mine === undefined) {
      mine = new Set();
      this.#published.set(connection, mine);
    }
    mine.add(stream);
  }

  #end(stream: Stream, params: DoneParams, now: number, connection?: ConnectionId): void {
    stream.state = 'done';
    stream.updatedAt = now;
    const done = doneNotification(params);
    stream.done = done;
    this.#observer?.(connection, done, stream.last);
    this.#endObserver?.(summarise(stream), now);
    this.#activeStreams--;
    for (const connection of stream.publishers) this.#published.get(connection)?.delete(stream);
    stream.publishers.clear();
    this.#orphans.delete(stream);
    this.#doneOrder.add(stream);
    const subscriptions = [...stream.subscriptions];
    stream.subscriptions.clear();
    for (const subscription of subscriptions) {
      this.#gate.finish(subscription, labelled(done, subscription));
    }
  }

  #evict(stream: Stream): void {
    this.#doneOrder.delete(stream);
    this.#streams.delete(stream.token);
    this.#liveStreams--;
  }

  #closed(stream: Stream): Outcome<'stream_closed'> {
    return {
      ok: false,
      code: 'stream_closed',
      message:
        `the stream for token ${show(stream.token)} is done (status ${stream.done?.params.status}); ` +
        `the token can start a new stream once it is evicted, ${seconds(this.#options.retentionMs)} after done: use a fresh token for a new job`,
    };
  }

  /** Removes a subscription from every table; called when it ends for any reason. */
  #forget(subscription: Subscription): void {
    const mine = this.#subscribers.get(subscription.subscriber);
    if (mine?.get(subscription.token) !== subscription) return;
    mine.delete(subscription.token);
    this.#subscriptionCount--;
    this.#subscribedToAll.get(subscription.subscriber)?.attached.delete(subscription);
    if (mine.size === 0) this.#subscribers.delete(subscription.subscriber);
    const stream = this.#streams.get(subscription.token);
    if (stream === undefined) return;
    stream.subscriptions.delete(subscription);
    if (stream.state === 'waiting' && stream.subscriptions.size === 0) {
      this.#streams.delete(stream.token);
      this.#orphans.delete(stream);
    }
  }
}

function newStream(token: ProgressToken, state: StreamState, now: number, order: number): Stream {
  return {
    token,
    order,
    state,
    lastProgress: undefined,
    last: undefined,
    done: undefined,
    startedAt: now,
    updatedAt: now,
    subscriptions: new Set(),
    publishers: new Set(),
    rate: undefined,
  };
}

function labelled<N extends ProgressNotification | DoneNotification>(
  notification: N,
  subscription: Subscription,
): N {
  return subscription.label === undefined
    ? notification
    : relabel(notification, subscription.label);
}

/** A stream as the gateway methods show it; with `now`, an active stream's rate and ETA. */
function summarise(stream: Stream, now?: number): StreamSummary {
  const summary: StreamSummary = {
    progressToken: stream.token,
    state: stream.state,
    subscribers: stream.subscriptions.size,
    // The clock has sub-millisecond precision; the wire carries integer milliseconds.
    startedAt: Math.floor(stream.startedAt),
    updatedAt: Math.floor(stream.updatedAt),
  };
  if (stream.last !== undefined) summary.last = stream.last.params;
  if (now !== undefined && stream.state === 'active') {
    summary.rate = stream.rate?.rate(now) ?? null;
    summary.etaMs =
      stream.rate === undefined || stream.last === undefined
        ? null
        : stream.rate.etaMs(now, stream.last.params.progress, stream.last.params.total);
  }
  if (stream.done !== undefined) {
    summary.status = stream.done.params.status;
    if (stream.done.params.message !== undefined) summary.message = stream.done.params.message;
  }
  return summary;
}

function show(token: ProgressToken): string {
  return JSON.stringify(token);
}

function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

export type { StreamEndStatus };

/**
 * The first value of a Map or Set, its oldest entry (both keep insertion order). nextDeadline
 * runs after every read: no iterator is made for an empty one.
 */
function oldest<T>(entries: { readonly size: number; values(): Iterator<T> }): T | undefined {
  return entries.size === 0 ? undefined : entries.values().next().value;
}
