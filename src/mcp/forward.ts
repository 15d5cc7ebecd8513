/**
 * The one forwarding loop of the MCP side, shared by watch_progress and
 * relayProgress: subscribe to a stream, forward each update into one MCP
 * request through its request-scoped send, and drain before the result.
 *
 * Its guarantees, for both callers:
 * - updates go out in the order they arrived, each one handed to the SDK
 *   before the next;
 * - nothing is forwarded once the loop ends (done, stop, a failed send, or
 *   the request was cancelled);
 * - before the result, every update was handed to the transport, the client
 *   was pinged at most once (see PingRecord), and RESULT_GAP_MS has passed
 *   since the last update.
 */
import type {
  DoneParams,
  ProgressParams,
  ProgressToken,
  SubscribeParams,
} from '../protocol/frames.js';
import { RESULT_CONFIRM_TIMEOUT_MS } from '../protocol/limits.js';
import { PROGRESS_METHOD } from '../protocol/notifications.js';
import {
  MAX_REMEMBERED_SESSIONS,
  PING_WAIT_FACTOR,
  PING_WAIT_FLOOR_MS,
  UNANSWERED_CLIENT_GAP_MS,
} from '../shared/defaults.js';
import type { BridgeError } from '../shared/errors.js';
import {
  type ForwardEffect,
  type ForwardEnd,
  type ForwardEvent,
  forwardStep,
  forwardsUpdates,
  INITIAL_FORWARD_STATE,
} from './forward-state.js';
import { type ConfirmDelivery, ProgressSends, type SendProgress } from './progress-sends.js';
import type { ProgressSession, ProgressSource } from './progress-source.js';

/**
 * What one MCP client has shown about answering the server's pings. A client
 * behind a gateway that rewrites the ids of its replies (supergateway's
 * stdio->WebSocket) never answers one: once a ping went unanswered and none
 * was ever answered, later calls skip it and wait UNANSWERED_CLIENT_GAP_MS
 * after the last notification instead. One that
 * answers is given a bounded multiple of its slowest answer.
 */
export class PingRecord {
  #answered = 0;
  #unanswered = 0;
  #slowestMs = 0;

  /** How long to wait for the answer to the ping before a result; 0: do not ping. */
  waitMs(): number {
    if (this.#answered === 0) return this.#unanswered > 0 ? 0 : RESULT_CONFIRM_TIMEOUT_MS;
    return Math.min(
      RESULT_CONFIRM_TIMEOUT_MS,
      Math.max(PING_WAIT_FLOOR_MS, Math.ceil(PING_WAIT_FACTOR * this.#slowestMs)),
    );
  }

  answered(afterMs: number): void {
    this.#answered++;
    this.#slowestMs = Math.max(this.#slowestMs, afterMs);
  }

  unanswered(): void {
    this.#unanswered++;
  }

  /** Pings through `ping` within what this client has shown, and records how it went. */
  confirm(ping: ConfirmDelivery | undefined): ConfirmDelivery | undefined {
    if (ping === undefined) return undefined;
    return async () => {
      const waitMs = this.waitMs();
      if (waitMs === 0) {
        await new Promise((resolve) => setTimeout(resolve, UNANSWERED_CLIENT_GAP_MS));
        return;
      }
      const started = performance.now();
      try {
        await ping(waitMs);
        this.answered(performance.now() - started);
      } catch {
        this.unanswered();
      }
    };
  }
}

const sessionRecords = new Map<string, PingRecord>();
let processRecord: PingRecord | undefined;

/**
 * The PingRecord of the client a request came from, for a server that does
 * not keep one itself (relayProgress): by MCP session id when there is one,
 * for the whole process over stdio (one client), and none to remember for a
 * stateless HTTP request (its next request may be anyone's).
 */
export function pingRecordOf(request: {
  sessionId?: string | undefined;
  overHttp: boolean;
}): PingRecord {
  if (request.sessionId !== undefined) {
    let record = sessionRecords.get(request.sessionId);
    if (record === undefined) {
      record = new PingRecord();
      sessionRecords.set(request.sessionId, record);
      // Bounded: the oldest session is forgotten first.
      if (sessionRecords.size > MAX_REMEMBERED_SESSIONS) {
        const oldest = sessionRecords.keys().next().value;
        if (oldest !== undefined) sessionRecords.delete(oldest);
      }
    }
    return record;
  }
  if (request.overHttp) return new PingRecord();
  processRecord ??= new PingRecord();
  return processRecord;
}

/** The MCP request updates are forwarded into. */
export interface RequestChannel {
  /**
   * The caller's progressToken, delivered as `as`; undefined: the stream's own
   * token is the label (nothing to relabel, or a send that adds the token itself).
   */
  readonly label: ProgressToken | undefined;
  /** Sends one progress notification within the request; undefined: updates are only counted. */
  readonly send: SendProgress | undefined;
  /** Pings the client within the request (bounded by the timeout). */
  readonly ping: ConfirmDelivery | undefined;
  readonly pings: PingRecord;
  /** Aborted when the client cancels the request. */
  readonly signal: AbortSignal | undefined;
}

export type { ForwardEnd } from './forward-state.js';

export interface Forwarding {
  /** The last update received (forwarded or not). */
  readonly last: ProgressParams | undefined;
  /** How many updates were received. */
  readonly updates: number;
  /** The done params, once done arrived. */
  readonly doneParams: DoneParams | undefined;
  /** Why forwarding ended without done when its daemon was lost (gateway_lost). */
  readonly error: BridgeError | undefined;
  /** Settles with the done params once done arrived and the drain is over; undefined when it ended otherwise. */
  readonly done: Promise<DoneParams | undefined>;
  /** Settles at the end of forwarding, before the drain: done, stop, a failed send, or a cancel. */
  readonly ended: Promise<ForwardEnd>;
  /**
   * Ends forwarding (nothing is forwarded after), releases the subscription
   * and drains; settles when the result may follow. Idempotent.
   */
  stop(): Promise<void>;
}

export interface ForwardOptions {
  /** Ends the subscription (closes its session); called once, at stop. */
  readonly release: () => Promise<void>;
  /** Called once when the client cancels the request, before the loop stops (tell the worker). */
  readonly onAbort?: (() => Promise<void>) | undefined;
}

/** A promise and the function that settles it, for a settlement that comes from an effect. */
function settleable<T>(): { promise: Promise<T>; settle: (value: T) => void } {
  let settle: (value: T) => void = () => {};
  const promise = new Promise<T>((resolve) => {
    settle = resolve;
  });
  return { promise, settle };
}

/**
 * Subscribes `stream` on `session` and forwards into `channel` until done, stop, failure or
 * cancel. The rules are forwardStep's (forward-state.ts); this carries out its effects.
 */
export async function forwardProgress(
  session: Pick<ProgressSession, 'subscribe'>,
  stream: { progressToken: ProgressToken; minIntervalMs: number },
  channel: RequestChannel,
  options: ForwardOptions,
): Promise<Forwarding> {
  let state = INITIAL_FORWARD_STATE;
  /** The last update forwarded, and how many were. */
  let last: ProgressParams | undefined;
  let updates = 0;
  const ended = settleable<ForwardEnd>();
  const done = settleable<DoneParams | undefined>();
  const stopped = settleable<void>();
  const sends =
    channel.send === undefined
      ? undefined
      : new ProgressSends(channel.send, {
          onFailure: () => dispatch({ type: 'sendFailed' }),
          confirm: channel.pings.confirm(channel.ping),
        });
  const onCancel = (): void => dispatch({ type: 'cancel' });

  const forward = (params: ProgressParams): void => {
    last = params;
    updates++;
    sends?.push(params);
  };
  const run = (effect: ForwardEffect): void => {
    switch (effect.type) {
      case 'forward':
        forward(effect.params);
        return;
      case 'announceEnd':
        ended.settle(effect.end);
        return;
      case 'tellWorker':
        void (options.onAbort?.() ?? Promise.resolve())
          .catch(() => {})
          .then(() => dispatch({ type: 'workerTold' }));
        return;
      case 'stopListeningForCancel':
        channel.signal?.removeEventListener('abort', onCancel);
        return;
      case 'release':
        void options
          .release()
          .catch(() => {})
          .then(() => dispatch({ type: 'released' }));
        return;
      case 'drain':
        // A cancelled request is not pinged: its client stopped waiting for the result.
        void (sends?.drain({ confirm: !channel.signal?.aborted }) ?? Promise.resolve()).then(() =>
          dispatch({ type: 'drained' }),
        );
        return;
      case 'settle':
        done.settle(effect.doneParams);
        return;
      case 'stopComplete':
        stopped.settle();
        return;
    }
  };
  // Events raised while effects run (a synchronous callback) wait their turn: one step at a time.
  const queue: ForwardEvent[] = [];
  let stepping = false;
  const dispatch = (event: ForwardEvent): void => {
    queue.push(event);
    if (stepping) return;
    stepping = true;
    try {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        const step = forwardStep(state, next);
        state = step.state;
        for (const effect of step.effects) run(effect);
      }
    } finally {
      stepping = false;
    }
  };

  const params: SubscribeParams = {
    progressToken: stream.progressToken,
    minIntervalMs: stream.minIntervalMs,
    ...(channel.label === undefined ? {} : { as: channel.label }),
  };
  await session.subscribe(
    params,
    (notification) => {
      if (notification.method !== PROGRESS_METHOD) {
        dispatch({ type: 'done', params: notification.params });
      } else if (stepping) {
        dispatch({ type: 'update', params: notification.params });
      } else if (forwardsUpdates(state)) {
        // No step is running, so none is queued: an update changes no state, and forwardStep's
        // rule applies here without an event, a step and an effect per update (1k/s).
        forward(notification.params);
      }
    },
    (lost) => dispatch({ type: 'lost', error: lost }),
  );
  if (channel.signal?.aborted) onCancel();
  else channel.signal?.addEventListener('abort', onCancel, { once: true });

  return {
    get last() {
      return last;
    },
    get updates() {
      return updates;
    },
    get doneParams() {
      return state.doneParams;
    },
    get error() {
      return state.error;
    },
    done: done.promise,
    ended: ended.promise,
    stop: () => {
      dispatch({ type: 'stop' });
      return stopped.promise;
    },
  };
}

/**
 * Forwards `stream` into `channel` over a session of its own: opened here, closed when
 * forwarding stops, or at once when subscribing fails.
 */
export async function forwardOnOwnSession(
  source: Pick<ProgressSource, 'openSession'>,
  stream: { progressToken: ProgressToken; minIntervalMs: number },
  channel: RequestChannel,
): Promise<Forwarding> {
  const session = await source.openSession();
  try {
    return await forwardProgress(session, stream, channel, { release: () => session.close() });
  } catch (error) {
    await session.close();
    throw error;
  }
}

/**
 * A channel outside any MCP request (a task outlives its call): no ping before a result, no
 * cancel; `send` undefined: updates are only counted.
 */
export function outsideRequest(
  label: ProgressToken | undefined,
  send: SendProgress | undefined,
): RequestChannel {
  return { label, send, ping: undefined, pings: new PingRecord(), signal: undefined };
}
