/**
 * The node-ipc adapter: the only module that imports node-ipc, so that it can
 * be replaced. It owns framing (node-ipc's Guarded parser, 64 KiB frames),
 * answers framing errors with `rejected` before it closes the connection,
 * enforces the connection cap with an answer instead of a silent drop, and
 * batches the replies of one read into one write.
 */
import type { Socket } from 'node:net';
import { GuardedParser, IPCModule, IPCProtocolError, type IpcConfig } from 'node-ipc';
import {
  FRAME_DELIMITER,
  MAX_TYPE_BYTES,
  type RejectCode,
  utf8ByteLength,
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

/** node-ipc lifecycle events: the Guarded parser refuses these names from the wire. */
const LIFECYCLE = new Set([
  'start',
  'connect',
  'disconnect',
  'destroy',
  'close',
  'socket.disconnected',
  'error',
  'data',
]);

const FRAMING_CODES: Record<string, RejectCode> = {
  ERR_IPC_INVALID_JSON: 'invalid_json',
  ERR_IPC_INVALID_MESSAGE: 'invalid_envelope',
  ERR_IPC_INVALID_EVENT: 'invalid_envelope',
  ERR_IPC_EVENT_TOO_LARGE: 'invalid_envelope',
  ERR_IPC_RESERVED_EVENT: 'reserved_event',
  ERR_IPC_FRAME_TOO_LARGE: 'frame_too_large',
};

/** A framing error surfaced by our parser; only this module can make one. */
class FramingFault {
  readonly code: RejectCode;
  readonly message: string;
  constructor(code: RejectCode, message: string) {
    this.code = code;
    this.message = message;
  }
}

function framingMessage(code: RejectCode, maxFrameBytes: number): string {
  switch (code) {
    case 'invalid_json':
      return 'the frame is not valid JSON: send one JSON object per frame, each followed by a form feed (0x0C)';
    case 'invalid_envelope':
      return `the frame must be a JSON object {"type": "<event>", "data": {...}} with a non-empty string type of at most ${MAX_TYPE_BYTES} UTF-8 bytes`;
    case 'reserved_event':
      return "the event type is one of node-ipc's reserved names: workers send progress, done, claim, ping or status";
    case 'frame_too_large':
      return `the frame exceeds ${maxFrameBytes} bytes: shorten message or _meta (a frame is at most ${maxFrameBytes} UTF-8 bytes before its form feed)`;
    default:
      return code;
  }
}

/**
 * node-ipc's Guarded parser closes a connection without telling the peer why.
 * This one surfaces the error as a FramingFault dispatched under the reserved
 * name 'error' (which no wire frame can carry), so the adapter answers first.
 * It also owns the split loop: the same checks as GuardedParser.read, but a
 * frame's bytes are counted only when its length could exceed the limit.
 */
function makeParser(maxFrameBytes: number) {
  return class SurfacingParser extends GuardedParser {
    override read(buffer: string, data: string, receive: (message: unknown) => void): string {
      try {
        return this.#split(buffer, data, receive);
      } catch (error) {
        if (error instanceof FramingFault) {
          receive({ type: 'error', data: error });
          return '';
        }
        if (!(error instanceof IPCProtocolError)) throw error;
        const code = FRAMING_CODES[error.code] ?? 'invalid_envelope';
        receive({
          type: 'error',
          data: new FramingFault(code, framingMessage(code, maxFrameBytes)),
        });
        return '';
      }
    }

    #split(buffer: string, data: string, receive: (message: unknown) => void): string {
      const combined = buffer ? buffer + data : data;
      let start = 0;
      let end = combined.indexOf(FRAME_DELIMITER);
      while (end !== -1) {
        const frame = combined.slice(start, end);
        this.#checkSize(frame);
        receive(this.#decode(frame));
        start = end + 1;
        end = combined.indexOf(FRAME_DELIMITER, start);
      }
      const remainder = start === 0 ? combined : combined.slice(start);
      this.#checkSize(remainder);
      return remainder;
    }

    /** node-ipc counts the type in UTF-16 units; protocol v1 counts UTF-8 bytes (MAX_TYPE_BYTES). */
    #decode(frame: string): unknown {
      const message = this.decodeMessage(frame) as { type: string };
      if (
        message.type.length * 3 > MAX_TYPE_BYTES &&
        utf8ByteLength(message.type) > MAX_TYPE_BYTES
      ) {
        throw new FramingFault(
          'invalid_envelope',
          framingMessage('invalid_envelope', maxFrameBytes),
        );
      }
      return message;
    }

    /** Bytes are at most 3 per UTF-16 unit, so most frames skip the byte count. */
    #checkSize(text: string): void {
      if (text.length * 3 <= this.maxMessageSize) return;
      this.assertFrameSize(text.length, Buffer.byteLength(text));
    }
  };
}

const STATE = Symbol('mcp-progress.connection');

interface Connection extends WorkerConnection {
  readonly socket: Socket;
  closing: boolean;
  /** Frames completed in the current read, to tell a stalled frame from a busy stream. */
  framesThisRead: number;
  partialTimer: NodeJS.Timeout | undefined;
}

interface Envelope {
  type: string;
  data: unknown;
}

/** node-ipc keeps its per-socket state on the socket: the unread tail, and the frame dispatcher. */
type TaggedSocket = Socket & {
  [STATE]?: Connection;
  ipcBuffer?: string;
  ipcDispatch?: (message: Envelope) => void;
};

export class IngressServer {
  readonly #options: IngressOptions;
  readonly #handlers: IngressHandlers;
  readonly #log: IngressLog;
  readonly #ipc = new IPCModule();
  readonly #connections = new Map<ConnectionId, Connection>();
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
    config.unlink = false;
    config.parser = makeParser(this.#options.maxFrameBytes);
    config.maxMessageSize = this.#options.maxFrameBytes;
    config.maxPendingBytes = this.#options.maxPendingReplyBytes;
    // Our own timer replaces node-ipc's, which would also close busy connections (see #afterRead).
    config.messageTimeout = 0;
    // node-ipc drops connections past its cap silently; ours answers, so node-ipc's must never bite.
    config.maxConnections = Number.MAX_SAFE_INTEGER;
    config.readableAll = false;
    config.writableAll = false;
    config.socketRoot = `${this.#options.socketPath}.d/`; // never an ancestor: node-ipc must not chmod it
    const path =
      process.platform === 'win32'
        ? this.#options.socketPath.replace(/^\\\\\.\\pipe\\/, '')
        : this.#options.socketPath;
    this.#ipc.serve(path);
    const server = this.#ipc.server;
    if (server === false) return Promise.reject(new Error('node-ipc did not create a server'));
    return new Promise<void>((resolve, reject) => {
      let started = false;
      server.on('*', ((type: string, data: unknown, socket: TaggedSocket | undefined) => {
        if (!LIFECYCLE.has(type)) {
          if (socket !== undefined) this.#frame(socket, type, data);
          return;
        }
        if (type === 'error' && data instanceof FramingFault && socket !== undefined) {
          this.#fault(socket, data);
        } else if (type === 'connect') {
          this.#accept(data as TaggedSocket);
        } else if (type === 'error' && !started) {
          reject(data);
        } else if (type === 'error') {
          this.#log.debug(`worker socket error: ${(data as Error).message}`);
        }
      }) as (...args: never[]) => void);
      server.on('start', (() => {
        started = true;
        resolve();
      }) as (...args: never[]) => void);
      // The socket is created by bind(); a umask around the synchronous bind makes it 0600 from birth.
      const previous = process.platform === 'win32' ? undefined : process.umask(0o177);
      try {
        server.start();
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
    const server = this.#ipc.server;
    const net = server === false ? false : server.server;
    const closed =
      net === false
        ? Promise.resolve()
        : new Promise<void>((resolve) => net.close(() => resolve()));
    const open = [...this.#connections.values()];
    const ends = open.map(
      (connection) =>
        new Promise<void>((resolve) => {
          if (connection.socket.destroyed) return resolve();
          connection.socket.once('close', () => resolve());
          connection.closing = true;
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

  #accept(socket: TaggedSocket): void {
    const id = this.#nextId++;
    const server = this.#ipc.server as Exclude<IPCModule['server'], false>;
    const connection: Connection = {
      id,
      socket,
      closing: false,
      framesThisRead: 0,
      partialTimer: undefined,
      send: (type, data) => {
        if (connection.closing || socket.destroyed) return;
        try {
          server.emit(socket, type, data);
        } catch (error) {
          // node-ipc refuses to encode a frame over the cap: that reply is lost, the connection is not.
          this.#log.warn(`connection ${id}: ${type} not sent: ${(error as Error).message}`);
        }
      },
    };
    socket[STATE] = connection;
    // node-ipc hands each frame to its event emitter (a rest-args array, a type check and a
    // wildcard loop per frame); frames of our connections go straight to #dispatch instead.
    socket.ipcDispatch = (message) => this.#dispatch(socket, message);
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
    // Cork before node-ipc reads the chunk, uncork after: all replies of one read go out in one write.
    socket.prependListener('data', () => socket.cork());
    socket.on('data', () => this.#afterRead(connection));
    socket.once('close', () => {
      clearTimeout(connection.partialTimer);
      connection.closing = true;
      this.#connections.delete(id);
      this.#handlers.closed(connection);
    });
  }

  #dispatch(socket: TaggedSocket, message: Envelope): void {
    if (message.type === 'error' && message.data instanceof FramingFault) {
      this.#fault(socket, message.data);
    } else {
      this.#frame(socket, message.type, message.data);
    }
  }

  #frame(socket: TaggedSocket, type: string, data: unknown): void {
    const connection = socket[STATE];
    if (connection === undefined || connection.closing) return;
    connection.framesThisRead++;
    try {
      this.#handlers.frame(connection, type, data);
    } catch (error) {
      // A bug in handling one frame must cost only that connection, never the daemon.
      this.#log.warn(`internal error while handling a frame: ${(error as Error).stack ?? error}`);
      socket.destroy();
    }
  }

  #afterRead(connection: Connection): void {
    const socket = connection.socket as TaggedSocket;
    if (socket.writableCorked > 0) socket.uncork();
    // node-ipc keeps the unfinished tail of the stream in socket.ipcBuffer.
    if (!socket.ipcBuffer) {
      clearTimeout(connection.partialTimer);
      connection.partialTimer = undefined;
    } else if (connection.framesThisRead > 0 || connection.partialTimer === undefined) {
      // A new frame started in this read: its clock starts now.
      clearTimeout(connection.partialTimer);
      connection.partialTimer = setTimeout(
        () => this.#timeout(connection),
        this.#options.frameTimeoutMs,
      );
      connection.partialTimer.unref();
    }
    connection.framesThisRead = 0;
    this.#handlers.batchEnd();
  }

  #timeout(connection: Connection): void {
    connection.partialTimer = undefined;
    this.#handlers.framingRejected('frame_timeout');
    this.#closeWith(connection, {
      code: 'frame_timeout',
      message: `an incomplete frame waited more than ${this.#options.frameTimeoutMs} ms for its form feed: end every frame with 0x0C`,
    });
  }

  #fault(socket: TaggedSocket, fault: FramingFault): void {
    const connection = socket[STATE];
    if (connection === undefined || connection.closing) return;
    this.#handlers.framingRejected(fault.code);
    this.#closeWith(connection, { code: fault.code, message: fault.message });
  }

  /** Answers `rejected`, then closes once the answer has been written. */
  #closeWith(connection: Connection, rejection: { code: RejectCode; message: string }): void {
    const { socket } = connection;
    const server = this.#ipc.server as Exclude<IPCModule['server'], false>;
    if (!connection.closing && !socket.destroyed) server.emit(socket, 'rejected', rejection);
    connection.closing = true;
    clearTimeout(connection.partialTimer);
    if (socket.writableCorked > 0) socket.uncork();
    // Linger: destroying while the peer still writes fails its writes, and a failed write
    // discards our answer unread in its buffer. Keep reading (frames are ignored now) until
    // the peer closes; a peer that never does is cut off after a second.
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  }
}
