/**
 * The worker socket: the only module that imports node-ipc, so that it can be
 * replaced. The daemon owns the listening socket (for its backlog) and the
 * framing (protocol's byte-counted FrameDecoder); node-ipc, in its raw
 * profile, carries each accepted connection's bytes in and the replies out.
 * Framing errors are answered with `rejected` before the connection closes,
 * the connection cap is an answer instead of a silent drop, the replies of one
 * read leave in one write, and a per-connection read budget keeps one flooding
 * connection from delaying the others.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { IPCModule, type IpcConfig, type IpcSocketServer } from 'node-ipc';
import {
  type Envelope,
  encodeFrame,
  FrameDecoder,
  FrameError,
  type RejectCode,
} from '../protocol/index.js';

export type ConnectionId = number;

/** What the daemon may send to a worker. */
export type WorkerReply = 'rejected' | 'ack' | 'cancel' | 'pong' | 'status';

export interface WorkerConnection {
  readonly id: ConnectionId;
  /** Queues a reply; replies of one read leave in one write. */
  send(type: WorkerReply, data: object): void;
}

export interface IngressHandlers {
  /** Every well-formed envelope, whatever its event type. Must not throw. */
  frame(connection: WorkerConnection, type: string, data: unknown): void;
  /** After the frames of one read have been handled. */
  batchEnd(): void;
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
 * Bytes of frames one connection may have handled before the others are
 * served. A flooding connection past it is paused until every connection that
 * was ready has had its turn; 32 KiB are about 200 typical frames.
 */
export const READ_BUDGET_BYTES = 32 * 1024;

const FORM_FEED = 0x0c;
const NO_BYTES = Buffer.alloc(0);

const STATE = Symbol('mcp-progress.connection');

interface Connection extends WorkerConnection {
  readonly socket: Socket;
  readonly decoder: FrameDecoder;
  closing: boolean;
  partialTimer: NodeJS.Timeout | undefined;
  /** Bytes handled since this connection's budget was last renewed. */
  spent: number;
  /** Bytes read but held back by the budget; they start at a frame boundary. */
  held: Buffer;
  /** Paused by the budget, waiting for the next round. */
  waiting: boolean;
}

type TaggedSocket = Socket & { [STATE]?: Connection };

export class IngressServer {
  readonly #options: IngressOptions;
  readonly #handlers: IngressHandlers;
  readonly #log: IngressLog;
  readonly #ipc = new IPCModule();
  #ipcServer: IpcSocketServer | undefined;
  #server: Server | undefined;
  readonly #connections = new Map<ConnectionId, Connection>();
  /** Connections paused by the read budget, in the order they ran out. */
  #waiting: Connection[] = [];
  #roundScheduled = false;
  #nextId = 1;
  #stopping = false;
  /** Connections answered with too_many_connections since start. */
  refusedConnections = 0;

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
    const config: IpcConfig = this.#ipc.config;
    config.silent = true;
    // The raw profile: node-ipc delivers each read as it came and writes replies verbatim;
    // framing, limits and envelope checks are ours (test/contract/node-ipc.test.ts pins this).
    config.rawBuffer = true;
    this.#ipc.serve(this.#options.socketPath);
    const ipcServer = this.#ipc.server;
    if (ipcServer === false) return Promise.reject(new Error('node-ipc did not create a server'));
    this.#ipcServer = ipcServer;
    ipcServer.on('data', ((bytes: Buffer, socket: TaggedSocket) => {
      const connection = socket[STATE];
      if (connection !== undefined) this.#read(connection, bytes);
    }) as (...args: never[]) => void);
    // node-ipc's own error listener on each socket reports here, without the socket; the close follows.
    ipcServer.on('error', ((error: Error) =>
      this.#log.debug(`worker socket error: ${error.message}`)) as (...args: never[]) => void);
    const server = createServer((socket) => {
      // No encoding: the decoder gets bytes, so it counts and checks UTF-8 itself.
      ipcServer.addSocket(socket);
      this.#accept(socket);
    });
    this.#server = server;
    return new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // The socket is created by bind(), synchronously in listen(): a umask around it makes it 0600 from birth.
      const previous = process.platform === 'win32' ? undefined : process.umask(0o177);
      try {
        server.listen({ path: this.#options.socketPath, backlog: WORKER_SOCKET_BACKLOG }, () => {
          server.off('error', reject);
          server.on('error', (error) => this.#log.debug(`worker socket error: ${error.message}`));
          resolve();
        });
      } finally {
        if (previous !== undefined) process.umask(previous);
      }
    });
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
      held: NO_BYTES,
      waiting: false,
      send: (type, data) => {
        if (!connection.closing) this.#write(connection, type, data);
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
   * One read from one connection. Past its budget the rest of the read is held
   * (cut at a form feed, so only whole frames wait) and the socket is paused
   * until the next round; libuv then serves the other ready sockets first.
   */
  #read(connection: Connection, bytes: Buffer): void {
    if (connection.closing) return; // lingering after a rejection: read and ignore
    let now = bytes;
    const room = READ_BUDGET_BYTES - connection.spent;
    if (now.length > room) {
      const cut = now.indexOf(FORM_FEED, Math.max(room - 1, 0));
      if (cut !== -1 && cut + 1 < now.length) {
        connection.held = now.subarray(cut + 1);
        now = now.subarray(0, cut + 1);
      }
    }
    connection.spent += now.length;
    this.#handle(connection, now);
    if (connection.spent >= READ_BUDGET_BYTES && !connection.closing) this.#wait(connection);
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
    if (socket.writableCorked > 0) socket.uncork();
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

  #wait(connection: Connection): void {
    if (connection.waiting) return;
    connection.waiting = true;
    connection.socket.pause();
    this.#waiting.push(connection);
    if (!this.#roundScheduled) {
      this.#roundScheduled = true;
      // setImmediate runs after the poll phase, in which libuv read every other ready socket.
      setImmediate(() => this.#nextRound());
    }
  }

  /** Renews the budget of every paused connection, oldest first, and serves what they had held. */
  #nextRound(): void {
    this.#roundScheduled = false;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const connection of waiting) {
      connection.waiting = false;
      connection.spent = 0;
      if (connection.closing) continue;
      const held = connection.held;
      connection.held = NO_BYTES;
      if (held.length > 0) this.#read(connection, held);
      if (!connection.waiting && !connection.closing) connection.socket.resume();
    }
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
