/**
 * The Node publisher for workers: one progress stream over the daemon's
 * socket. It never throws into the worker over transport trouble: a missing
 * daemon, a restart or a refused frame is reported through `onError` (a
 * process warning by default, once per kind) while the job runs on. Here: the
 * connection (connect, reconnect with backoff, claim, resend the newest) and
 * the done that waits for its answer; the stream's updates are stream-state.ts,
 * what the answers mean done-answers.ts, the cancel cancellation.ts.
 */
import { connect, type Socket } from 'node:net';
import { isDoneStatus } from '../protocol/frame-guards.js';
import type { DoneStatus, ProgressToken, Rejected } from '../protocol/frames.js';
import {
  DEFAULT_DONE_STATUS,
  FRAME_DELIMITER,
  fitsUtf8Bytes,
  MAX_FRAME_BYTES,
  PROTOCOL_VERSION,
} from '../protocol/limits.js';
import { type Envelope, encodeFrame, FrameDecoder } from '../protocol/wire.js';
import {
  backoffDelayMs,
  CLOSE_LINGER_MS,
  DEFAULT_DONE_TIMEOUT_MS,
  DEFAULT_MIN_INTERVAL_MS,
  JOURNAL_RETRY_MS,
  NEVER_CONNECTED_GRACE_MS,
  RECONNECT_BACKOFF,
} from '../shared/defaults.js';
import { answeredCode, BridgeError, type BridgeErrorCode } from '../shared/errors.js';
import { ENV_TOKEN, plantedByAnotherUser, resolveSocketPath } from '../shared/locate.js';
import { connectError } from '../shared/socket-request.js';
import { type CancelCallback, Cancellation } from './cancellation.js';
import {
  type DoneAnswer,
  type DoneFailure,
  doneData,
  frameTooLarge,
  judgeDoneAnswer,
  notConnectedFailure,
  REFUSED_FRAME_CODES,
} from './done-answers.js';
import { readAck, readCancel, readRejected } from './replies.js';
import {
  fitMessage,
  type ProgressData,
  type ProgressUpdate,
  StreamUpdates,
  tokenProblem,
} from './stream-state.js';
import { Throttle } from './throttle.js';

export type { CancelCallback } from './cancellation.js';
export type { DoneFailure } from './done-answers.js';
export { fitMessage, type ProgressUpdate } from './stream-state.js';

export interface PublisherOptions {
  /** Default: $MCP_PROGRESS_TOKEN. Without a token the publisher does nothing (the job runs unobserved). */
  readonly token?: ProgressToken | undefined;
  /** Default: $MCP_PROGRESS_SOCKET, else the default socket of the runtime dir. */
  readonly socket?: string | undefined;
  /** Coalescing interval: at most one frame per interval, the newest (default {@link DEFAULT_MIN_INTERVAL_MS}; 0 sends every update). */
  readonly intervalMs?: number | undefined;
  /**
   * How long `done` keeps trying to be delivered, reconnecting if need be (default {@link DEFAULT_DONE_TIMEOUT_MS}), once
   * the publisher has been connected. One that never reached a daemon tries for at most
   * {@link NEVER_CONNECTED_GRACE_MS} more, then reports done as not delivered: no daemon is running.
   */
  readonly doneTimeoutMs?: number | undefined;
  /** Transport trouble and refused frames; default: a process warning, once per error code. */
  readonly onError?: ((error: BridgeError) => void) | undefined;
  /** Where the defaults come from (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined;
}

export interface DoneOutcome {
  /** The daemon acknowledged the done frame. */
  readonly delivered: boolean;
  /**
   * Done was written to a connected daemon that did not answer within
   * `doneTimeoutMs` (a stopped, SIGSTOPped or overloaded daemon): whether it
   * is delivered is not known. A daemon that resumes reads it and ends the
   * stream for its watchers.
   */
  readonly pending?: boolean;
  /** Why not, when not. */
  readonly error?: BridgeError;
}

export interface Publisher {
  readonly token: ProgressToken | undefined;
  /** False when there is no token: every call is then a no-op. */
  readonly enabled: boolean;
  readonly connected: boolean;
  /** A gateway asked to cancel this stream (`progress/cancel`). */
  readonly cancelled: boolean;
  /** Aborted when the stream is cancelled, with the reason; pass it to fetch, streams, child processes. */
  readonly signal: AbortSignal;
  /**
   * Records an update; frames leave at most once per interval, the newest first. Never throws:
   * `update()` counts one up, and anything that is not an update object is reported and ignored.
   */
  update(update?: ProgressUpdate): void;
  /**
   * Sends the newest update, then done, and waits for the daemon's ack: for up to `doneTimeoutMs`
   * once connected, for up to 250 ms when no daemon was ever reached. Never rejects.
   */
  done(status?: DoneStatus, message?: string): Promise<DoneOutcome>;
  /** Calls `callback` when the stream is cancelled (at once if it already was); returns an unsubscribe. */
  onCancel(callback: CancelCallback): () => void;
  /** Sends the newest update and closes the connection without ending the stream. */
  close(): Promise<void>;
}

type State = 'open' | 'ending' | 'ended' | 'closed';

/**
 * Connects to the daemon and returns a publisher. Resolves even when the
 * daemon is not there: the publisher keeps trying in the background and
 * sends the newest update once it connects.
 */
export async function connectPublisher(options: PublisherOptions = {}): Promise<Publisher> {
  const publisher = new SocketPublisher(options);
  await publisher.start();
  return publisher;
}

class SocketPublisher implements Publisher {
  readonly token: ProgressToken | undefined;
  /** Why the token given is not one the daemon takes (then progress is off), if so. */
  readonly #tokenRefusal: BridgeError | undefined;
  readonly #socketPath: string;
  /** Why there is no socket to connect to ($MCP_PROGRESS_RUNTIME_DIR relative), if so. */
  #socketRefusal: BridgeError | undefined;
  readonly #doneTimeoutMs: number;
  readonly #onError: (error: BridgeError) => void;
  readonly #throttle: Throttle;
  readonly #cancellation: Cancellation;
  /** The stream's updates; undefined without a token (then nothing is ever recorded). */
  readonly #updates: StreamUpdates | undefined;
  #state: State = 'open';
  #socket: Socket | undefined;
  #attempt = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #connectedWaiters: Array<(socket: Socket | undefined) => void> = [];
  #nextSeq = 1;
  /** The seq of the update resent after a reconnect: a non_monotonic answer to it only means the daemon had it. */
  #resyncSeq = -1;
  /**
   * The daemon refused the last connection (a frame of it as malformed, or itself, being full):
   * the next one does not reset the backoff.
   */
  #refused = false;
  /** A connection was established at least once: only then does done wait out its full retry. */
  #everConnected = false;
  /** A connection attempt is under way. */
  #connecting = false;
  /** A connect found a daemon too busy to take it (EAGAIN): done waits its full timeout for it too. */
  #daemonBusy = false;
  #replyWaiter: { seq: number; resolve: (reply: DoneAnswer) => void } | undefined;
  #done: Promise<DoneOutcome> | undefined;

  constructor(options: PublisherOptions) {
    const env = options.env ?? process.env;
    const given = options.token ?? env[ENV_TOKEN];
    const token = given === '' ? undefined : given;
    const problem = token === undefined ? undefined : tokenProblem(token);
    // Every frame under it would be refused: progress is off instead, and done says why.
    this.#tokenRefusal =
      problem === undefined
        ? undefined
        : new BridgeError('invalid_token', `${problem}; progress is off`);
    this.token = problem === undefined ? token : undefined;
    let socketPath = '';
    try {
      socketPath = resolveSocketPath({ socket: options.socket }, env);
    } catch (error) {
      // A bad environment is reported at each connect, like a planted socket; the worker goes on.
      this.#socketRefusal = error as BridgeError;
    }
    this.#socketPath = socketPath;
    this.#doneTimeoutMs = options.doneTimeoutMs ?? DEFAULT_DONE_TIMEOUT_MS;
    this.#onError = options.onError ?? warnOncePerCode();
    this.#cancellation = new Cancellation((error) => this.#onErrorSafely(error));
    this.#updates = this.token === undefined ? undefined : new StreamUpdates(this.token);
    this.#throttle = new Throttle(options.intervalMs ?? DEFAULT_MIN_INTERVAL_MS, () =>
      this.#sendNewest(),
    );
  }

  get enabled(): boolean {
    return this.token !== undefined;
  }

  get connected(): boolean {
    return this.#socket !== undefined;
  }

  get cancelled(): boolean {
    return this.#cancellation.cancelled;
  }

  get signal(): AbortSignal {
    return this.#cancellation.signal;
  }

  async start(): Promise<void> {
    if (this.#tokenRefusal !== undefined) this.#onErrorSafely(this.#tokenRefusal);
    if (this.enabled) await this.#connect();
  }

  update(update: ProgressUpdate = {}): void {
    if (this.#state !== 'open' || this.#updates === undefined) return;
    try {
      const problem = this.#updates.record(update);
      if (problem !== undefined) this.#report(problem.code, problem.message);
      else this.#throttle.poke();
    } catch (error) {
      // A getter that throws, say: the worker's update is lost, never the worker.
      this.#report('invalid_field', `update ignored: it could not be read: ${String(error)}`);
    }
  }

  done(status: DoneStatus = DEFAULT_DONE_STATUS, message?: string): Promise<DoneOutcome> {
    if (this.#done !== undefined) return this.#done;
    if (this.token === undefined) {
      this.#done = Promise.resolve({
        delivered: false,
        error:
          this.#tokenRefusal ??
          new BridgeError('no_token', `no token: pass one or set ${ENV_TOKEN}`),
      });
    } else if (this.#state === 'closed') {
      this.#done = Promise.resolve({
        delivered: false,
        error: new BridgeError('closed', 'done after close(): the publisher is closed'),
      });
    } else {
      // Refused by the daemon, the done would be lost and the stream left to be abandoned: it
      // ends as an error instead, as the Python client's does, and the refusal is reported.
      if (!isDoneStatus(status)) {
        this.#report(
          'invalid_field',
          `done status must be ok, error or cancelled, got ${JSON.stringify(status) ?? String(status)}; sending error`,
        );
      }
      this.#done = this.#finish(
        this.token,
        isDoneStatus(status) ? status : 'error',
        message === undefined ? undefined : fitMessage(String(message)),
      );
    }
    return this.#done;
  }

  onCancel(callback: CancelCallback): () => void {
    return this.#cancellation.onCancel(callback);
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    if (this.#state === 'open') this.#throttle.flush();
    this.#state = 'closed';
    this.#throttle.cancel();
    clearTimeout(this.#reconnectTimer);
    this.#wakeConnectedWaiters(undefined);
    this.#replyWaiter?.resolve('closed');
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket === undefined) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        socket.destroy();
        resolve();
      }, CLOSE_LINGER_MS);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.end();
    });
  }

  async #finish(
    token: ProgressToken,
    status: DoneStatus,
    message: string | undefined,
  ): Promise<DoneOutcome> {
    this.#state = 'ending';
    this.#throttle.cancel();
    // Until done is settled the process must stay alive, connected or not.
    this.#socket?.ref();
    this.#reconnectTimer?.ref();
    const deadline = Date.now() + this.#doneTimeoutMs;
    // Never connected (no daemon runs): one attempt now, and a short grace for it, not the full retry.
    const graceDeadline = Math.min(deadline, Date.now() + NEVER_CONNECTED_GRACE_MS);
    if (!this.#everConnected && this.#socket === undefined && !this.#connecting) {
      clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = undefined;
      void this.#connect();
    }
    const done = { token, timeoutMs: this.#doneTimeoutMs, socketPath: this.#socketPath };
    let retried = false;
    let outcome: DoneOutcome;
    for (;;) {
      const everConnected = this.#everConnected || this.#daemonBusy;
      const socket = await this.#whenConnected(everConnected ? deadline : graceDeadline);
      // A connect refused as busy during the short grace: there is a daemon, so wait for it.
      if (socket === undefined && !everConnected && this.#daemonBusy && !this.#isClosed()) continue;
      if (socket === undefined) {
        outcome = this.#failDone(notConnectedFailure(done, this.#isClosed(), everConnected));
        break;
      }
      const unsent = this.#updates?.unsent;
      if (unsent !== undefined) this.#writeNewest(socket, unsent);
      const seq = this.#nextSeq++;
      const frame = this.#encode('done', doneData(token, status, message, seq));
      if (frame === undefined) {
        outcome = { delivered: false, error: new BridgeError(...frameTooLarge(token)) };
        break;
      }
      const reply = this.#waitReply(seq, deadline);
      socket.write(frame);
      const verdict = judgeDoneAnswer(await reply, done, { retried, closed: this.#isClosed() });
      if (verdict === 'retry') {
        retried = true;
        continue;
      }
      // The daemon's journal could not take it, so it was not applied: the done stays ours to resend.
      if (
        verdict.delivered === false &&
        verdict.failure.code === 'journal_failed' &&
        Date.now() + JOURNAL_RETRY_MS < deadline &&
        !this.#isClosed()
      ) {
        await new Promise((resolve) => setTimeout(resolve, JOURNAL_RETRY_MS));
        continue;
      }
      outcome =
        verdict.delivered === true
          ? { delivered: true }
          : this.#failDone(verdict.failure, verdict.pending);
      break;
    }
    if (!this.#isClosed()) {
      this.#state = 'ended';
      clearTimeout(this.#reconnectTimer);
      this.#socket?.end();
      this.#socket?.unref();
    }
    return outcome;
  }

  /** A method, not a field read, so that the type checker does not narrow across awaits. */
  #isClosed(): boolean {
    return this.#state === 'closed';
  }

  #failDone(failure: DoneFailure, pending = false): DoneOutcome {
    const error = new BridgeError(failure.code, failure.message);
    this.#onErrorSafely(error);
    return pending ? { delivered: false, pending: true, error } : { delivered: false, error };
  }

  #waitReply(seq: number, deadline: number): Promise<DoneAnswer> {
    return new Promise<DoneAnswer>((resolve) => {
      const timer = setTimeout(() => finish('timeout'), Math.max(0, deadline - Date.now()));
      const finish = (reply: DoneAnswer) => {
        clearTimeout(timer);
        if (this.#replyWaiter?.seq === seq) this.#replyWaiter = undefined;
        resolve(reply);
      };
      this.#replyWaiter = { seq, resolve: finish };
    });
  }

  #whenConnected(deadline: number): Promise<Socket | undefined> {
    if (this.#state === 'closed') return Promise.resolve(undefined);
    if (this.#socket !== undefined) return Promise.resolve(this.#socket);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), Math.max(0, deadline - Date.now()));
      const finish = (socket: Socket | undefined) => {
        clearTimeout(timer);
        this.#connectedWaiters = this.#connectedWaiters.filter((w) => w !== finish);
        resolve(socket);
      };
      this.#connectedWaiters.push(finish);
    });
  }

  #wakeConnectedWaiters(socket: Socket | undefined): void {
    for (const waiter of this.#connectedWaiters.splice(0)) waiter(socket);
  }

  /** One connection attempt; resolves when it is connected or has failed. */
  #connect(): Promise<void> {
    this.#connecting = true;
    const planted = this.#socketRefusal ?? plantedByAnotherUser(this.#socketPath);
    if (planted !== undefined) {
      this.#connecting = false;
      this.#onErrorSafely(planted);
      this.#scheduleReconnect();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const socket = connect({ path: this.#socketPath });
      socket.setEncoding('utf8');
      // A worker that finished its job must be able to exit with the connection open.
      if (this.#state !== 'ending') socket.unref();
      let attached = false;
      socket.once('connect', () => {
        this.#connecting = false;
        if (this.#state === 'closed' || this.#state === 'ended') {
          socket.destroy();
        } else {
          attached = true;
          this.#attach(socket);
        }
        resolve();
      });
      socket.on('error', (error: NodeJS.ErrnoException) => {
        if (attached) return;
        // EAGAIN: a daemon is there, its queue of connects full (a burst): retried, reported once.
        if (error.code !== 'EAGAIN') this.#onErrorSafely(connectError(this.#socketPath, error));
        else if (!this.#daemonBusy) {
          this.#daemonBusy = true;
          this.#onErrorSafely(
            new BridgeError(
              'connect_failed',
              `the daemon on ${this.#socketPath} is busy (its queue of connects is full): retrying with backoff`,
              { cause: error },
            ),
          );
        }
      });
      socket.on('close', () => {
        if (!attached) this.#connecting = false;
        resolve();
        if (attached) this.#detach(socket);
        else this.#scheduleReconnect();
      });
    });
  }

  #attach(socket: Socket): void {
    this.#socket = socket;
    this.#everConnected = true;
    if (!this.#refused) this.#attempt = 0;
    this.#refused = false;
    const decoder = new FrameDecoder(MAX_FRAME_BYTES);
    socket.on('data', (text: string) => {
      for (const envelope of decoder.push(text)) this.#receive(envelope);
    });
    socket.on('drain', () => {
      if (this.#state === 'open') this.#sendNewest();
    });
    // Claim the token first: a cancel then reaches this worker before, or without, any update.
    if (this.token !== undefined && this.#state !== 'ended') {
      this.#write(socket, 'claim', { v: PROTOCOL_VERSION, progressToken: this.token });
    }
    // After a reconnect (a restarted daemon knows nothing), the newest value goes first.
    const newest = this.#updates?.newest;
    if (newest !== undefined && this.#state !== 'ended') {
      this.#resyncSeq = this.#nextSeq++;
      this.#writeNewest(socket, { ...newest, seq: this.#resyncSeq });
    }
    this.#wakeConnectedWaiters(socket);
  }

  #detach(socket: Socket): void {
    if (this.#socket !== socket) return;
    this.#socket = undefined;
    this.#updates?.connectionChanged();
    this.#replyWaiter?.resolve('closed');
    if (this.#state === 'open' || this.#state === 'ending') {
      this.#onErrorSafely(
        new BridgeError(
          'daemon_disconnected',
          `lost the daemon on ${this.#socketPath}; reconnecting, and the newest update will be sent when it is back`,
        ),
      );
      this.#scheduleReconnect();
    }
  }

  #scheduleReconnect(): void {
    if (this.#state !== 'open' && this.#state !== 'ending') return;
    const delay = backoffDelayMs(RECONNECT_BACKOFF, this.#attempt);
    this.#attempt++;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      void this.#connect();
    }, delay);
    if (this.#state !== 'ending') this.#reconnectTimer.unref();
  }

  #sendNewest(): void {
    const socket = this.#socket;
    const unsent = this.#updates?.unsent;
    if (socket === undefined || unsent === undefined) return;
    // A daemon that does not read gets no backlog: the newest waits for 'drain'.
    if (socket.writableNeedDrain) return;
    this.#writeNewest(socket, unsent);
  }

  /** Writes the newest update; one too large to ever be accepted is dropped instead. */
  #writeNewest(socket: Socket, data: ProgressData): void {
    if (this.#write(socket, 'progress', data)) this.#updates?.sent();
    else this.#updates?.drop();
  }

  /** Writes a frame, unless it is larger than any daemon accepts: then it is reported and not sent. */
  #write(socket: Socket, type: string, data: unknown): boolean {
    const frame = this.#encode(type, data);
    if (frame === undefined) return false;
    socket.write(frame);
    return true;
  }

  /** The frame, or undefined (reported) when it is larger than any daemon accepts. */
  #encode(type: string, data: unknown): string | undefined {
    const frame = encodeFrame(type, data);
    if (fitsUtf8Bytes(frame, MAX_FRAME_BYTES + FRAME_DELIMITER.length)) return frame;
    this.#report(
      'frame_too_large',
      `a ${type} frame for token ${JSON.stringify(this.token)} is larger than ${MAX_FRAME_BYTES} bytes and was not sent: use a shorter token`,
    );
    return undefined;
  }

  #receive(envelope: Envelope | Error): void {
    if (envelope instanceof Error) {
      this.#report('bad_reply', `the daemon sent something unreadable: ${envelope.message}`);
      return;
    }
    switch (envelope.type) {
      case 'ack': {
        const ack = readAck(envelope.data);
        if (ack === undefined) {
          this.#badReply('ack', envelope.data);
          return;
        }
        if (this.#replyWaiter !== undefined && ack.seq === this.#replyWaiter.seq)
          this.#replyWaiter.resolve({ type: 'ack' });
        return;
      }
      case 'rejected': {
        const rejection = readRejected(envelope.data);
        if (rejection === undefined) {
          this.#badReply('rejected', envelope.data);
          return;
        }
        if (REFUSED_FRAME_CODES.has(rejection.code)) {
          this.#refusedFrame(rejection);
          return;
        }
        if (rejection.code === 'too_many_connections') {
          // It accepted the connect only to say so and close: coming back at once would not help.
          this.#refused = true;
          this.#report(
            'too_many_connections',
            `the daemon on ${this.#socketPath} serves --max-connections workers already: ${rejection.message}; reconnecting with backoff`,
          );
          return;
        }
        if (this.#replyWaiter !== undefined && rejection.seq === this.#replyWaiter.seq) {
          this.#replyWaiter.resolve({ type: 'rejected', rejection });
          return;
        }
        if (rejection.seq === this.#resyncSeq && rejection.code === 'non_monotonic') return;
        this.#report(
          answeredCode(rejection.code),
          `the daemon refused an update for token ${JSON.stringify(this.token)}: ${rejection.message}`,
        );
        return;
      }
      case 'cancel': {
        const cancel = readCancel(envelope.data);
        if (cancel === undefined) {
          this.#badReply('cancel', envelope.data);
          return;
        }
        if (cancel.progressToken === this.token) this.#cancellation.cancel(cancel.reason);
        return;
      }
      default:
        return;
    }
  }

  #badReply(type: string, data: unknown): void {
    let shown = String(data);
    try {
      shown = JSON.stringify(data) ?? shown;
    } catch {}
    this.#report(
      'bad_reply',
      `the daemon sent a ${type} that does not match its schema (${shown.slice(0, 200)}): is it another version of mcp-progress-bridge? It was ignored`,
    );
  }

  /**
   * The daemon refused a frame of this connection as malformed and closes it.
   * Which frame it was is not said, so nothing written on this connection is
   * sent again: the newest update is dropped, a done waiting for its answer
   * fails with the daemon's code, and the reconnect keeps its backoff.
   */
  #refusedFrame(rejection: Rejected): void {
    this.#refused = true;
    this.#updates?.dropIfSent();
    this.#report(
      answeredCode(rejection.code),
      `the daemon refused a frame for token ${JSON.stringify(this.token)} and closed the connection; it is not sent again: ${rejection.message}`,
    );
    this.#replyWaiter?.resolve({ type: 'rejected', rejection });
  }

  #report(code: BridgeErrorCode, message: string): void {
    this.#onErrorSafely(new BridgeError(code, message));
  }

  #onErrorSafely(error: BridgeError): void {
    try {
      this.#onError(error);
    } catch {
      // The reporter belongs to the worker; its failure must not become ours.
    }
  }
}

/** The default reporter: one process warning per error code, so a loop cannot flood stderr. */
function warnOncePerCode(): (error: BridgeError) => void {
  const seen = new Set<string>();
  return (error) => {
    if (seen.has(error.code)) return;
    seen.add(error.code);
    process.emitWarning(`mcp-progress: ${error.message}`, {
      code: `MCP_PROGRESS_${error.code.toUpperCase()}`,
    });
  };
}
