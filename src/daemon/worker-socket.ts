/**
 * The worker socket: the only module that imports node-ipc, so that it can be
 * replaced. The daemon owns the listening socket (for its backlog) and the
 * framing (protocol's byte-counted FrameDecoder); node-ipc, in its raw
 * profile, carries each accepted connection's bytes in and the replies out.
 * Framing errors are answered with `rejected` before the connection closes,
 * the connection cap is an answer instead of a silent drop, the replies of one
 * read leave in one write, and a read budget per turn of the event loop
 * keeps flooding connections, however many, from delaying the others.
 */

import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import type { IpcConfig, IpcSocketServer } from 'node-ipc';
import type { RejectCode } from '../protocol/errors.js';
import { type Envelope, encodeFrame, FrameDecoder, FrameError } from '../protocol/wire.js';
import { BridgeError } from '../shared/errors.js';
import { missingPackage } from './installed.js';
import { listenOwnerOnly } from './runtime-dir.js';

export type ConnectionId = number;

/** What the daemon may send to a worker. */
export type WorkerReply = 'rejected' | 'ack' | 'cancel' | 'pong' | 'status';

export interface WorkerConnection {
  readonly id: ConnectionId;
  /** Queues a reply; replies of one read leave in one write. */
  send(type: WorkerReply, data: object): void;
  /**
   * Holds this connection's replies, from this read on, until a sync that
   * started after this read (`IngressHandlers.sync`) has returned: for an ack
   * that promises what the frame said is on disk. Replies keep their order.
   */
  holdRepliesForSync(): void;
}

export interface IngressHandlers {
  /** Every well-formed envelope, whatever its event type. Must not throw. */
  frame(connection: WorkerConnection, type: string, data: unknown): void;
  /** After the frames of one read have been handled. */
  batchEnd(): void;
  /**
   * Makes durable what the held replies acknowledge, and calls `synced` once
   * it is; one at a time, started at the end of a turn in which connections
   * held replies (holdRepliesForSync). Must not throw.
   */
  sync(synced: () => void): void;
  /** The same at once, before returning: a holding connection closes, or the daemon stops. */
  syncNow(): void;
  closed(connection: WorkerConnection): void;
  /** A framing error answered with `rejected` before the connection closes; counted like any refusal. */
  framingRejected(code: RejectCode): void;
}

export interface IngressOptions {
  readonly socketPath: string;
  readonly maxConnections: number;
  readonly maxFrameBytes: number;
  readonly frameTimeoutMs: number;
  /** Replies a worker has not read yet, past which it is disconnected. */
  readonly maxPendingReplyBytes: number;
}

export interface IngressLog {
  warn(message: string): void;
  debug(message: string): void;
}

/**
 * Pending connections the kernel queues for us (listen(2)); Linux caps it at
 * net.core.somaxconn. Node's default, 511, refused bursts of 1,000 connects.
 */
export const WORKER_SOCKET_BACKLOG = 4096;

/**
 * Bytes of frames the worker socket handles in one turn of the event loop,
 * all connections together. Past it what connections read is held (cut at a
 * form feed) and they are paused; the next turn serves what they held, oldest
 * first. Bounding the turn bounds how long a new connection's accept, or an
 * honest worker's frame, waits behind a flood of any number of connections:
 * 256 KiB are about 1,700 typical frames, a few milliseconds of work.
 */
export const ROUND_BUDGET_BYTES = 256 * 1024;

/**
 * Bytes any connection may have in a turn, even once the turn's budget is
 * spent: a connection that sends a frame now and then (a ping, an honest
 * worker) is served in the turn that read it, never queued behind a flood.
 */
export const READ_BUDGET_BYTES = 4 * 1024;

const FORM_FEED = 0x0c;
const NO_BYTES = Buffer.alloc(0);

const STATE = Symbol('mcp-progress.connection');

interface Connection extends WorkerConnection {
  readonly socket: Socket;
  readonly decoder: FrameDecoder;
  closing: boolean;
  partialTimer: NodeJS.Timeout | undefined;
  /** Bytes handled in turn `turn`. */
  spent: number;
  turn: number;
  /** Bytes read but held back by the budget; they start at a frame boundary. */
  held: Buffer;
  /** Paused by the budget, queued until a turn has room for what it holds. */
  waiting: boolean;
  /** holdRepliesForSync was called in the read being handled. */
  holdAsked: boolean;
  /** The socket stays corked (one level) until sync number `holdUntil` has returned. */
  holding: boolean;
  holdUntil: number;
}

type TaggedSocket = Socket & { [STATE]?: Connection };

export class IngressServer {
  readonly #options: IngressOptions;
  readonly #handlers: IngressHandlers;
  readonly #log: IngressLog;
  /** node-ipc's server, made at the first worker connection (#ipc). */
  #ipcServer: IpcSocketServer | undefined;
  #server: Server | undefined;
  readonly #connections = new Map<ConnectionId, Connection>();
  /** Connections paused by the read budget, in the order they ran out; served from #waitingHead. */
  #waiting: Connection[] = [];
  #waitingHead = 0;
  /** The current turn of the event loop (as the budget counts them) and what it has handled. */
  #turn = 0;
  #turnSpent = 0;
  #turnEndScheduled = false;
  /** Bytes handled while no turn was counted (light traffic); past READ_BUDGET_BYTES one is. */
  #uncounted = 0;
  /** Connections whose replies wait for the next sync (number #nextSync), and the one in flight. */
  #holding: Connection[] = [];
  #syncing: Connection[] | undefined;
  #nextSync = 0;
  #nextId = 1;
  #stopping = false;
  /** Connections answered with too_many_connections since start. */
  refusedConnections = 0;
  /** Connections closed for leaving more than --max-pending-reply-bytes of replies unread. */
  unreadRepliesClosed = 0;

  constructor(options: IngressOptions, handlers: IngressHandlers, log: IngressLog) {
    this.#options = options;
    this.#handlers = handlers;
    this.#log = log;
  }

  get connectionCount(): number {
    return this.#connections.size;
  }

  /** Binds the socket with mode 0600 and resolves when it accepts connections. */
  start(): Promise<void> {
    // Found now, loaded at the first connection: a broken install fails the start, not a worker.
    const missing = missingPackage('node-ipc');
    if (missing !== undefined) return Promise.reject(missing);
    const server = createServer((socket) => {
      let ipcServer: IpcSocketServer;
      try {
        ipcServer = this.#ipc();
      } catch (error) {
        // One failed load costs that connection only; the next one tries again.
        this.#log.warn(
          `worker connection refused: cannot load node-ipc: ${(error as Error).message}`,
        );
        socket.destroy();
        return;
      }
      // No encoding: the decoder gets bytes, so it counts and checks UTF-8 itself.
      ipcServer.addSocket(socket);
      this.#accept(socket);
    });
    this.#server = server;
    return listenOwnerOnly(
      server,
      { path: this.#options.socketPath, backlog: WORKER_SOCKET_BACKLOG },
      (error) => this.#log.debug(`worker socket error: ${error.message}`),
    );
  }

  /**
   * node-ipc, which loads tls and dgram with it (about 4 MiB), is loaded at the first
   * worker connection, synchronously (require of an ES module, Node 22.12+): a daemon may
   * sit idle all day with none.
   */
  #ipc(): IpcSocketServer {
    if (this.#ipcServer !== undefined) return this.#ipcServer;
    const { IPCModule } = createRequire(import.meta.url)('node-ipc') as typeof import('node-ipc');
    const ipc = new IPCModule();
    const config: IpcConfig = ipc.config;
    config.silent = true;
    // The raw profile: node-ipc delivers each read as it came and writes replies verbatim;
    // framing, limits and envelope checks are ours (test/contract/node-ipc.test.ts pins this).
    config.rawBuffer = true;
    ipc.serve(this.#options.socketPath);
    const ipcServer = ipc.server;
    if (ipcServer === false)
      throw new BridgeError(
        'start_failed',
        'node-ipc did not create a server (is the installed node-ipc 14.0.0? reinstall mcp-progress-bridge)',
      );
    ipcServer.on('data', ((bytes: Buffer, socket: TaggedSocket) => {
      const connection = socket[STATE];
      if (connection !== undefined) this.#read(connection, bytes);
    }) as (...args: never[]) => void);
    // node-ipc's own error listener on each socket reports here, without the socket; the close follows.
    ipcServer.on('error', ((error: Error) =>
      this.#log.debug(`worker socket error: ${error.message}`)) as (...args: never[]) => void);
    this.#ipcServer = ipcServer;
    return ipcServer;
  }

  send(id: ConnectionId, type: WorkerReply, data: object): boolean {
    const connection = this.#connections.get(id);
    if (connection === undefined || connection.closing) return false;
    connection.send(type, data);
    return true;
  }

  /**
   * Stops accepting, tells each worker nothing more will be read (end), lets
   * queued replies drain, and destroys what is still open after `graceMs`.
   */
  async stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.#releaseAllNow();
    const server = this.#server;
    const closed =
      server === undefined || !server.listening
        ? Promise.resolve()
        : new Promise<void>((resolve) => server.close(() => resolve()));
    const open = [...this.#connections.values()];
    const ends = open.map(
      (connection) =>
        new Promise<void>((resolve) => {
          if (connection.socket.destroyed) return resolve();
          connection.socket.once('close', () => resolve());
          connection.closing = true;
          connection.socket.resume();
          connection.socket.end();
        }),
    );
    const timer = setTimeout(() => {
      for (const connection of open) connection.socket.destroy();
    }, graceMs);
    await Promise.all(ends);
    clearTimeout(timer);
    await closed;
  }

  #write(connection: Connection, type: string, data: object): void {
    const { socket } = connection;
    if (socket.destroyed) return;
    const frame = encodeFrame(type, data);
    const bytes = Buffer.byteLength(frame);
    if (bytes - 1 > this.#options.maxFrameBytes) {
      // A reply over the frame limit would be refused by the worker's reader: that reply is lost, the connection is not.
      this.#log.warn(
        `connection ${connection.id}: ${type} not sent: it exceeds ${this.#options.maxFrameBytes} bytes`,
      );
      return;
    }
    if (socket.writableLength + bytes > this.#options.maxPendingReplyBytes) {
      // A worker that does not read its replies is cut off before they fill the daemon's memory.
      this.#log.warn(
        `connection ${connection.id}: closed: more than ${this.#options.maxPendingReplyBytes} bytes of replies unread`,
      );
      this.unreadRepliesClosed++;
      connection.closing = true;
      socket.destroy();
      return;
    }
    this.#ipcServer?.emit(socket, frame);
  }

  #accept(socket: TaggedSocket): void {
    const id = this.#nextId++;
    const connection: Connection = {
      id,
      socket,
      decoder: new FrameDecoder(this.#options.maxFrameBytes),
      closing: false,
      partialTimer: undefined,
      spent: 0,
      turn: -1,
      held: NO_BYTES,
      waiting: false,
      holdAsked: false,
      holding: false,
      holdUntil: 0,
      send: (type, data) => {
        if (!connection.closing) this.#write(connection, type, data);
      },
      holdRepliesForSync: () => {
        connection.holdAsked = true;
      },
    };
    socket[STATE] = connection;
    if (this.#stopping || this.#connections.size >= this.#options.maxConnections) {
      this.refusedConnections++;
      this.#log.warn(
        `connection refused: ${this.#connections.size} worker connections is the cap (--max-connections)`,
      );
      this.#closeWith(connection, {
        code: 'too_many_connections',
        message: this.#stopping
          ? 'the daemon is stopping: reconnect when it is back'
          : `the daemon serves at most ${this.#options.maxConnections} worker connections (--max-connections): close idle connections or raise the cap`,
      });
      return;
    }
    this.#connections.set(id, connection);
    socket.once('close', () => {
      clearTimeout(connection.partialTimer);
      connection.closing = true;
      connection.held = NO_BYTES;
      this.#connections.delete(id);
      this.#handlers.closed(connection);
    });
  }

  /**
   * One read from one connection. It may handle what is left of the turn's
   * budget, and at least its own share (READ_BUDGET_BYTES) whatever the turn
   * has spent; the rest of the read is held (cut at a form feed, so only
   * whole frames wait) and the socket paused until a later turn serves it.
   */
  #read(connection: Connection, bytes: Buffer): void {
    if (connection.closing) return; // lingering after a rejection: read and ignore
    if (connection.waiting) {
      // Not expected (a paused socket emits nothing), but never lose or reorder bytes.
      connection.held = Buffer.concat([connection.held, bytes]);
      return;
    }
    if (!this.#enterTurn(connection, bytes.length)) {
      this.#handle(connection, bytes);
      return;
    }
    const room = Math.max(
      READ_BUDGET_BYTES - connection.spent,
      ROUND_BUDGET_BYTES - this.#turnSpent,
    );
    let now: Buffer = bytes;
    let held: Buffer = NO_BYTES;
    if (room <= 0) {
      held = now;
      now = NO_BYTES;
    } else if (now.length > room) {
      const cut = now.indexOf(FORM_FEED, room - 1);
      if (cut !== -1 && cut + 1 < now.length) {
        held = now.subarray(cut + 1);
        now = now.subarray(0, cut + 1);
      }
    }
    if (now.length > 0) {
      connection.spent += now.length;
      this.#turnSpent += now.length;
      this.#handle(connection, now);
    }
    if (held.length > 0 && !connection.closing) {
      connection.held = held;
      this.#wait(connection);
    }
  }

  #handle(connection: Connection, bytes: Buffer): void {
    const { socket } = connection;
    // Cork around the frames of one read: all their replies go out in one write.
    socket.cork();
    let completed = 0;
    for (const frame of connection.decoder.push(bytes)) {
      if (connection.closing) break;
      completed++;
      if (frame instanceof FrameError) {
        this.#fault(connection, frame.code, frame.message);
        break;
      }
      this.#frame(connection, frame);
    }
    if (connection.holdAsked && !connection.closing) this.#hold(connection);
    // A connection that holds keeps one cork until its sync: this read's own is released.
    else if (socket.writableCorked > (connection.holding ? 1 : 0)) socket.uncork();
    connection.holdAsked = false;
    if (!connection.closing) this.#armPartialTimer(connection, completed > 0);
    this.#handlers.batchEnd();
  }

  #frame(connection: Connection, frame: Envelope): void {
    try {
      this.#handlers.frame(connection, frame.type, frame.data);
    } catch (error) {
      // A bug in handling one frame must cost only that connection, never the daemon.
      this.#log.warn(`internal error while handling a frame: ${(error as Error).stack ?? error}`);
      connection.closing = true;
      connection.socket.destroy();
    }
  }

  /** Starts the incomplete-frame clock when a frame starts; whitespace between frames is not one. */
  #armPartialTimer(connection: Connection, completedFrames: boolean): void {
    if (!connection.decoder.partial) {
      clearTimeout(connection.partialTimer);
      connection.partialTimer = undefined;
    } else if (completedFrames || connection.partialTimer === undefined) {
      clearTimeout(connection.partialTimer);
      connection.partialTimer = setTimeout(
        () => this.#timeout(connection),
        this.#options.frameTimeoutMs,
      );
      connection.partialTimer.unref();
    }
  }

  /**
   * Counts this connection's bytes in the current turn, which ends in this loop iteration's check
   * phase; false: the read is let through uncounted. Light traffic (a frame now and then, a
   * worker at 1k/s) opens no turn: a setImmediate per read cost more than routing the read's
   * frame. Past READ_BUDGET_BYTES handled so, a turn opens with this read, so a flood is counted
   * from its first 4 KiB on; whatever the turn is, one connection's share is never less.
   */
  #enterTurn(connection: Connection, bytes: number): boolean {
    if (!this.#turnEndScheduled) {
      if (this.#uncounted + bytes <= READ_BUDGET_BYTES) {
        this.#uncounted += bytes;
        return false;
      }
      this.#scheduleTurnEnd();
      this.#turn++;
      this.#turnSpent = 0;
    }
    if (connection.turn !== this.#turn) {
      connection.turn = this.#turn;
      connection.spent = 0;
    }
    return true;
  }

  #scheduleTurnEnd(): void {
    if (this.#turnEndScheduled) return;
    this.#turnEndScheduled = true;
    // setImmediate runs after the poll phase, in which libuv read every other ready socket.
    setImmediate(() => this.#nextTurn());
  }

  #wait(connection: Connection): void {
    if (connection.waiting) return;
    connection.waiting = true;
    connection.socket.pause();
    this.#waiting.push(connection);
  }

  /**
   * Starts a turn: serves what paused connections held, oldest first, while
   * the turn's budget lasts; a connection whose held bytes are all handled is
   * resumed, one that still holds some goes to the back of the queue.
   */
  #nextTurn(): void {
    this.#turnEndScheduled = false;
    this.#uncounted = 0;
    this.#startSync();
    this.#turn++;
    this.#turnSpent = 0;
    const queue = this.#waiting;
    while (this.#waitingHead < queue.length && this.#turnSpent < ROUND_BUDGET_BYTES) {
      const connection = queue[this.#waitingHead++] as Connection;
      connection.waiting = false;
      if (connection.closing) continue;
      const held = connection.held;
      connection.held = NO_BYTES;
      this.#read(connection, held);
      if (!connection.waiting && !connection.closing) connection.socket.resume();
    }
    if (this.#waitingHead >= queue.length) {
      this.#waiting = [];
      this.#waitingHead = 0;
    } else {
      if (this.#waitingHead > 1024) {
        this.#waiting = queue.slice(this.#waitingHead);
        this.#waitingHead = 0;
      }
      this.#scheduleTurnEnd();
    }
  }

  /** What this read acknowledged waits for the next sync to start; the cork of the read stays. */
  #hold(connection: Connection): void {
    // Its sync starts when the turn ends: a read let through uncounted opened none.
    this.#scheduleTurnEnd();
    connection.holdUntil = this.#nextSync;
    if (connection.holding) {
      // Held already (for the sync in flight, or the next): one cork is enough.
      if (connection.socket.writableCorked > 1) connection.socket.uncork();
      if (this.#syncing?.includes(connection) !== true) return;
    } else {
      connection.holding = true;
      if (connection.socket.writableCorked === 0) connection.socket.cork();
    }
    if (!this.#holding.includes(connection)) this.#holding.push(connection);
  }

  /**
   * Group commit: one sync at a time, for every connection that held replies
   * until it starts; those that hold while it runs wait for the next one.
   */
  #startSync(): void {
    if (this.#syncing !== undefined || this.#holding.length === 0) return;
    const number = this.#nextSync++;
    const covered = this.#holding;
    this.#holding = [];
    this.#syncing = covered;
    this.#handlers.sync(() => {
      this.#syncing = undefined;
      for (const connection of covered) {
        // Held again since this sync started: its newer replies wait for the next one.
        if (!connection.holding || connection.holdUntil > number) continue;
        this.#release(connection);
      }
      this.#startSync();
    });
  }

  #release(connection: Connection): void {
    connection.holding = false;
    const { socket } = connection;
    if (!socket.destroyed && socket.writableCorked > 0) socket.uncork();
  }

  /** Syncs on this thread and lets every held reply go (a holding connection closes, the daemon stops). */
  #releaseAllNow(): void {
    const held = [...(this.#syncing ?? []), ...this.#holding];
    if (held.length === 0) return;
    this.#handlers.syncNow();
    this.#holding = [];
    for (const connection of held) if (connection.holding) this.#release(connection);
  }

  #timeout(connection: Connection): void {
    connection.partialTimer = undefined;
    this.#handlers.framingRejected('frame_timeout');
    this.#closeWith(connection, {
      code: 'frame_timeout',
      message: `an incomplete frame waited more than ${this.#options.frameTimeoutMs} ms for its form feed: end every frame with 0x0C`,
    });
  }

  #fault(connection: Connection, code: RejectCode, message: string): void {
    if (connection.closing) return;
    this.#handlers.framingRejected(code);
    this.#closeWith(connection, { code, message });
  }

  /** Answers `rejected`, then closes once the answer has been written. */
  #closeWith(connection: Connection, rejection: { code: RejectCode; message: string }): void {
    const { socket } = connection;
    // What this connection was acked waits for a sync still: done now, the rejection follows.
    if (connection.holdAsked || connection.holding) {
      connection.holdAsked = false;
      this.#handlers.syncNow();
      if (connection.holding) this.#release(connection);
    }
    if (!connection.closing && !socket.destroyed) this.#write(connection, 'rejected', rejection);
    connection.closing = true;
    connection.held = NO_BYTES;
    clearTimeout(connection.partialTimer);
    if (socket.writableCorked > 0) socket.uncork();
    // Linger: destroying while the peer still writes fails its writes, and a failed write
    // discards our answer unread in its buffer. Keep reading (frames are ignored now) until
    // the peer closes; a peer that never does is cut off after a second.
    if (connection.waiting) socket.resume();
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  }
}
