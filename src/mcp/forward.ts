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
import { type ConfirmDelivery, ProgressSends, type SendProgress } from './progress-sends.js';
import type { ProgressSession } from './progress-source.js';

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

/** 'lost': the daemon went away and did not come back (gateway_lost, in `error`). */
export type ForwardEnd = 'done' | 'stopped' | 'failed' | 'aborted' | 'lost';

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

/** Subscribes `stream` on `session` and forwards into `channel` until done, stop, failure or cancel. */
export async function forwardProgress(
  session: Pick<ProgressSession, 'subscribe'>,
  stream: { progressToken: ProgressToken; minIntervalMs: number },
  channel: RequestChannel,
  options: ForwardOptions,
): Promise<Forwarding> {
  let forwarding = true;
  let last: ProgressParams | undefined;
  let doneParams: DoneParams | undefined;
  let error: BridgeError | undefined;
  let updates = 0;
  let endWith: (end: ForwardEnd) => void = () => {};
  const ended = new Promise<ForwardEnd>((resolve) => {
    endWith = resolve;
  });
  const end = (reason: ForwardEnd): void => {
    if (!forwarding) return;
    forwarding = false;
    endWith(reason);
  };
  let settle: (done: DoneParams | undefined) => void = () => {};
  const done = new Promise<DoneParams | undefined>((resolve) => {
    settle = resolve;
  });
  const send = channel.send;
  const sends =
    send === undefined
      ? undefined
      : new ProgressSends(send, {
          // A send that fails (the client went away) ends forwarding: nobody is listening any more.
          onFailure: () => end('failed'),
          confirm: channel.pings.confirm(channel.ping),
        });
  let drained: Promise<void> | undefined;
  // One drain per request, whoever asks first: so the client is pinged at most once.
  const drain = (): Promise<void> => {
    drained ??= sends?.drain({ confirm: !channel.signal?.aborted }) ?? Promise.resolve();
    return drained;
  };

  const params: SubscribeParams = {
    progressToken: stream.progressToken,
    minIntervalMs: stream.minIntervalMs,
    ...(channel.label === undefined ? {} : { as: channel.label }),
  };
  await session.subscribe(
    params,
    (notification) => {
      if (!forwarding) return;
      if (notification.method === PROGRESS_METHOD) {
        last = notification.params;
        updates++;
        sends?.push(notification.params);
      } else {
        const params = notification.params;
        doneParams = params;
        end('done');
        // Settled only once the result may follow the last update (RESULT_GAP_MS).
        drain().then(() => settle(params));
      }
    },
    (lost) => {
      if (!forwarding) return;
      error = lost;
      end('lost');
      drain().then(() => settle(undefined));
    },
  );

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      end('stopped');
      channel.signal?.removeEventListener('abort', onAbort);
      await options.release().catch(() => {});
      await drain();
      settle(undefined);
    })();
    return stopping;
  };
  let aborted = false;
  const onAbort = (): void => {
    if (aborted) return;
    aborted = true;
    end('aborted');
    void (async () => {
      await options.onAbort?.().catch(() => {});
      await stop();
    })();
  };
  if (channel.signal?.aborted) onAbort();
  else channel.signal?.addEventListener('abort', onAbort, { once: true });

  return {
    get last() {
      return last;
    },
    get updates() {
      return updates;
    },
    get doneParams() {
      return doneParams;
    },
    get error() {
      return error;
    },
    done,
    ended,
    stop,
  };
}
