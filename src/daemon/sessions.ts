/**
 * The session hub: every kind of session (WebSocket, /mcp, in-process, the page's stream) gets
 * its subscriber ids, its place under --max-sessions and its unread-buffer
 * cap here. Transports only move bytes; the router only sees subscriber ids.
 */
import { DAEMON_STOPPING_MESSAGE } from '../protocol/errors.js';
import { type Notification, PROGRESS_METHOD } from '../protocol/notifications.js';
import { BridgeError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import type { DeliverySink, SubscriberId } from './gate.js';

export type SessionKind = 'websocket' | 'mcp' | 'in-process' | 'page';

export const SESSION_KINDS: readonly SessionKind[] = ['websocket', 'mcp', 'in-process', 'page'];

const SETTLED = Promise.resolve();

/** How long a slow consumer has to read its backlog and the close before it is cut off. */
export const SLOW_CONSUMER_GRACE_MS = 10_000;

/** A notification's JSON text and its length in UTF-8 bytes, made once for every session it goes to. */
export interface Payload {
  readonly text: string;
  readonly bytes: number;
}

export function payloadOf(text: string): Payload {
  return { text, bytes: Buffer.byteLength(text) };
}

/** What a transport gives the hub for one of its sessions. */
export interface SessionTransport {
  /**
   * Writes one notification; `payload` is its JSON text, serialised once for every session.
   * Called from inside the router's delivery loop: it must not call back into the router.
   * A WebSocket session's own; /mcp and in-process sessions receive through their members.
   */
  write?(notification: Notification, payload: Payload): void;
  /** Bytes written to the client and not yet read by it. */
  unreadBytes(): number;
  /** Closes the transport as a slow consumer; the hub has already let the session go. */
  closeSlow(graceMs: number): void;
  /** What the session is, when its kind does not say it all: named in the log (a task listen). */
  readonly what?: string;
}

/**
 * A session's receiver inside the daemon's process, called in delivery order. A progress with
 * nothing waiting before it for the same receiver is handed over inside the router's delivery
 * loop, so the receiver must not call back into the router on it (subscribe, unsubscribe,
 * publish); a done, and anything queued behind one, arrives after the delivery.
 */
export type LocalReceiver = (notification: Notification) => void;

/** A subscriber inside the daemon's process (the MCP tools' watches). */
export interface LocalSession {
  readonly id: SubscriberId;
  /** Ends it: its subscriptions end and nothing more is delivered. */
  close(): void;
}

export interface SessionHubOptions {
  /** Sessions of every kind together. */
  readonly maxSessions: number;
  /** Unread bytes past which a session is closed as a slow consumer. */
  readonly maxSessionBufferBytes: number;
}

export type HubLog = Pick<Logger, 'warn' | 'debug'>;

/**
 * Why a new session is refused: the daemon is stopping (for a moment: connect again once it is
 * back), or at --max-sessions.
 */
export interface SessionRefusal {
  readonly code: 'daemon_stopping' | 'too_many_sessions';
  readonly message: string;
}

/**
 * What `open` answers: the session's id, or why it was refused (`refused` set, `id` not), so
 * that every kind of session says the same reason, the hub's own.
 */
export type SessionAdmission =
  | { readonly id: SubscriberId; readonly refused: undefined }
  | { readonly id: undefined; readonly refused: SessionRefusal };

/** A notification queued for an in-process receiver. */
interface Queued {
  readonly notification: Notification;
  /** Its JSON's length, counted once another message queues behind it (#countNewest). */
  bytes: number | undefined;
}

/**
 * One subscriber id of a session: the session itself, or one of its in-process members. A
 * member takes no payload: it receives the notification object, handed over at once or queued
 * (its queue counted apart).
 */
type Subscriber =
  | {
      readonly id: SubscriberId;
      readonly session: Session;
      readonly write: (notification: Notification, payload: Payload) => void;
      readonly member: false;
    }
  | {
      readonly id: SubscriberId;
      readonly session: Session;
      /** Whether `notification` may be handed over now: nothing waits before it. */
      readonly takesNow: (notification: Notification) => boolean;
      readonly handOver: (notification: Notification) => void;
      /** Queues it, to be handed over after the delivery, in order. */
      readonly queue: (notification: Notification) => void;
      readonly member: true;
    };

interface Session {
  readonly id: SubscriberId;
  readonly kind: SessionKind;
  readonly transport: SessionTransport;
  /** Subscriber ids of this session: its own (WebSocket) or its members'. */
  readonly subscribers: Set<SubscriberId>;
  /**
   * Bytes queued for its in-process receivers and not yet taken, the newest message excluded:
   * that one is counted only once another queues behind it. At 1k updates/s each drains alone,
   * so no member message is serialised just to be counted.
   */
  queuedBytes: number;
  /** The newest message queued for a member, not yet in queuedBytes. */
  newest: Queued | undefined;
}

export class SessionHub {
  readonly #options: SessionHubOptions;
  readonly #removeSubscriber: (id: SubscriberId) => void;
  readonly #log: HubLog;
  readonly #sessions = new Map<SubscriberId, Session>();
  readonly #subscribers = new Map<SubscriberId, Subscriber>();
  /** Subscribers let go during a delivery; the router forgets them once the delivery returned. */
  #released: SubscriberId[] = [];
  #nextId = 1;
  #lastNotification: Notification | undefined;
  #lastPayload: Payload = { text: '', bytes: 0 };
  notificationsSent = 0;
  slowSessionsClosed = 0;
  /** The daemon is stopping: no new session of any kind, while those open get what is left. */
  #stopping = false;

  /** `removeSubscriber` is the router's: the hub calls it after a delivery, never inside one. */
  constructor(
    options: SessionHubOptions,
    removeSubscriber: (id: SubscriberId) => void,
    log: HubLog,
  ) {
    this.#options = options;
    this.#removeSubscriber = removeSubscriber;
    this.#log = log;
  }

  /** Open sessions of every kind. */
  get count(): number {
    return this.#sessions.size;
  }

  countOf(kind: SessionKind): number {
    let n = 0;
    for (const session of this.#sessions.values()) if (session.kind === kind) n++;
    return n;
  }

  /** Why a new session would be refused now, or undefined when it would be admitted. */
  refusal(): SessionRefusal | undefined {
    if (this.#stopping) return { code: 'daemon_stopping', message: DAEMON_STOPPING_MESSAGE };
    if (this.#sessions.size < this.#options.maxSessions) return undefined;
    return {
      code: 'too_many_sessions',
      message: `the daemon serves at most ${this.#options.maxSessions} sessions of all kinds together (--max-sessions): end idle sessions, or restart the daemon with a higher --max-sessions`,
    };
  }

  /**
   * The daemon is stopping: every new session is refused from now on, whatever its kind or the
   * way it came in, so that none opens only to be closed a moment later.
   */
  refuseNewSessions(): void {
    this.#stopping = true;
  }

  /**
   * Admits a session, or refuses it with the reason `refusal` gives (at the cap, or stopping). A
   * session whose transport writes (WebSocket) is its own subscriber; an /mcp or in-process one
   * subscribes through members (`openMember`).
   */
  open(kind: SessionKind, transport: SessionTransport): SessionAdmission {
    const refused = this.refusal();
    if (refused !== undefined) return { id: undefined, refused };
    const id = this.#nextId++;
    const session: Session = {
      id,
      kind,
      transport,
      subscribers: new Set(),
      queuedBytes: 0,
      newest: undefined,
    };
    this.#sessions.set(id, session);
    const write = transport.write;
    if (write !== undefined) {
      session.subscribers.add(id);
      this.#subscribers.set(id, { id, session, write: write.bind(transport), member: false });
    }
    this.#log.debug(`${kind} session ${id} opened`);
    return { id, refused: undefined };
  }

  /**
   * An in-process session of its own (the embedded daemon's tools): one subscriber, counted
   * under --max-sessions, its unread bytes those queued for `receive`.
   */
  openLocal(receive: LocalReceiver): LocalSession {
    const { id, refused } = this.open('in-process', {
      unreadBytes: () => 0,
      closeSlow: () => {},
    });
    if (refused !== undefined) throw new BridgeError(refused.code, refused.message);
    let session: SubscriberId | undefined = id;
    const member = this.openMember(session, receive);
    return {
      id: member.id,
      close: () => {
        if (session !== undefined) this.close(session);
        session = undefined;
      },
    };
  }

  /**
   * A subscriber inside `parent`'s session (one watch of an /mcp session): it shares the
   * session's place under the cap and its unread bytes, and ends with it.
   */
  openMember(parent: SubscriberId, receive: LocalReceiver): LocalSession {
    const session = this.#sessions.get(parent);
    const id = this.#nextId++;
    if (session === undefined) return { id, close: () => {} };
    const queue: Queued[] = [];
    let draining = false;
    const handOver = (notification: Notification) => {
      try {
        receive(notification);
      } catch (error) {
        this.#log.warn(
          `in-process session ${id} failed on a notification: ${(error as Error).message}`,
        );
      }
    };
    const drain = () => {
      draining = false;
      for (const queued of queue.splice(0)) {
        if (session.newest === queued) session.newest = undefined;
        else session.queuedBytes -= queued.bytes ?? 0;
        if (this.#subscribers.has(id)) handOver(queued.notification);
      }
    };
    this.#subscribers.set(id, {
      id,
      session,
      member: true,
      // A progress with nothing waiting before it is handed over inside the delivery (a watch
      // only writes to its transport; a member let go meanwhile leaves the router after the
      // publish). With this microtask and the send's promise reaction both taken out of a copy,
      // /mcp used a tenth less CPU at 1,000 updates a second (docs/MCP-PATH.md, thirteenth round, says
      // how sure that is). A done runs after the router's update.
      takesNow: (notification) => !draining && notification.method === PROGRESS_METHOD,
      handOver,
      queue: (notification) => {
        countNewest(session);
        const queued: Queued = { notification, bytes: undefined };
        queue.push(queued);
        session.newest = queued;
        // A resolved promise, not queueMicrotask, which makes an AsyncResource per call.
        if (!draining) {
          draining = true;
          void SETTLED.then(drain);
        }
      },
    });
    session.subscribers.add(id);
    return { id, close: () => this.#release(id) };
  }

  /** The transport ended the session (client closed, idle, stop): it and its members go. */
  close(id: SubscriberId): void {
    const session = this.#sessions.get(id);
    if (session === undefined) return;
    this.#sessions.delete(id);
    for (const subscriber of [...session.subscribers]) this.#release(subscriber);
    this.#log.debug(`${session.kind} session ${id} closed`);
  }

  /** The router's sink: writes the notification, then closes the session if it reads too slowly. */
  readonly deliver: DeliverySink = (id, notification) => {
    const subscriber = this.#subscribers.get(id);
    if (subscriber === undefined) return;
    if (subscriber.member) {
      this.notificationsSent++;
      // What the member left unread before this message decides: its bytes do not count yet.
      if (subscriber.takesNow(notification)) {
        if (!this.#closeIfSlow(subscriber.session, 0)) subscriber.handOver(notification);
      } else {
        subscriber.queue(notification);
        this.#closeIfSlow(subscriber.session, 0);
      }
      return;
    }
    if (notification !== this.#lastNotification) {
      // Both cache fields change together or not at all: a half-updated cache would send one
      // stream's payload under another's notification.
      const payload = payloadOf(JSON.stringify(notification));
      this.#lastNotification = notification;
      this.#lastPayload = payload;
    }
    subscriber.write(notification, this.#lastPayload);
    this.notificationsSent++;
    this.#closeIfSlow(subscriber.session, this.#lastPayload.bytes);
  };

  /**
   * Closes the session (code 4008 on a WebSocket) once what it has not read passes the cap;
   * `justWritten` bytes of it are the message just sent, which does not count against it.
   */
  closeIfSlow(id: SubscriberId, justWritten: number): void {
    const session = this.#sessions.get(id);
    if (session !== undefined) this.#closeIfSlow(session, justWritten);
  }

  /**
   * A session is slow when what it left unread before the newest message passes the cap: one
   * message larger than the room left is no sign of a slow reader, a backlog that grows is.
   * Memory per session stays under the cap plus one message. True: it was closed.
   */
  #closeIfSlow(session: Session, justWritten: number): boolean {
    const unread = session.transport.unreadBytes() + session.queuedBytes;
    if (unread - justWritten <= this.#options.maxSessionBufferBytes) return false;
    countNewest(session);
    const id = session.id;
    this.slowSessionsClosed++;
    const what = session.transport.what === undefined ? '' : ` (${session.transport.what})`;
    this.#log.warn(
      `${session.kind} session ${id}${what} closed: ${session.transport.unreadBytes() + session.queuedBytes} bytes unread, more than --max-session-buffer-bytes`,
    );
    this.close(id);
    session.transport.closeSlow(SLOW_CONSUMER_GRACE_MS);
    return true;
  }

  /** Stops delivering to `id` now; the router forgets it once the current delivery returned. */
  #release(id: SubscriberId): void {
    const subscriber = this.#subscribers.get(id);
    if (subscriber === undefined) return;
    this.#subscribers.delete(id);
    subscriber.session.subscribers.delete(id);
    if (this.#released.push(id) === 1) queueMicrotask(() => this.settle());
  }

  /** Removes from the router the subscribers let go since the last call; runs after each delivery. */
  settle(): void {
    const released = this.#released;
    this.#released = [];
    for (const id of released) this.#removeSubscriber(id);
  }
}

/** Counts the newest member message in the session's queued bytes: another queues behind it. */
function countNewest(session: Session): void {
  const newest = session.newest;
  if (newest === undefined) return;
  newest.bytes = Buffer.byteLength(JSON.stringify(newest.notification));
  session.queuedBytes += newest.bytes;
  session.newest = undefined;
}
