/**
 * The daemon's network face on loopback: an HTTP server whose /ws path
 * upgrades to the WebSocket gateway. The only module that imports ws.
 * Every request must carry the secret; browser Origins must be allowed.
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { MAX_WS_MESSAGE_BYTES, WS_SUBPROTOCOL } from '../protocol/limits.js';
import type { Notification } from '../protocol/notifications.js';
import type { Logger } from '../shared/log.js';
import { type GatewayBackend, handleRpcText, rpcError, type SessionId } from './rpc.js';

// Required, not imported: an ESM import of node:http reads every export, and its lazy
// WebSocket and fetch getters load undici, about 10 MiB and 90 ms at every daemon start.
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

export const WS_PATH = '/ws';

/** How long a slow consumer has to read its backlog and the close frame before it is cut off. */
const SLOW_CONSUMER_GRACE_MS = 10_000;

/** Close codes the gateway uses; docs/PROTOCOL.md lists them. */
export const CLOSE_CODES = {
  /** The daemon is stopping. */
  goingAway: 1001,
  /** The session did not read its notifications and its buffer passed the cap. */
  slowConsumer: 4008,
} as const;

export interface EndpointOptions {
  readonly host: string;
  readonly port: number;
  readonly secret: string;
  readonly allowOrigins: readonly string[];
  readonly maxSessions: number;
  readonly maxSessionBufferBytes: number;
}

export type EndpointLog = Pick<Logger, 'info' | 'warn' | 'debug'>;

export type HttpHandler = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * A session inside the daemon's process (the MCP tools, the embedded daemon):
 * it subscribes through the backend like a WebSocket session and shares their
 * id space, but receives notifications as calls instead of frames.
 */
export interface LocalSession {
  readonly id: SessionId;
  /** Ends the session: its subscriptions end and nothing more is delivered. */
  close(): void;
}

export type LocalReceiver = (notification: Notification) => void;

interface Session {
  readonly id: SessionId;
  readonly ws: WebSocket;
  readonly socket: Socket;
  corked: boolean;
}

export class GatewayEndpoint {
  readonly #options: EndpointOptions;
  readonly #backend: GatewayBackend;
  readonly #onClose: (session: SessionId) => void;
  readonly #log: EndpointLog;
  readonly #wss: WebSocketServer;
  readonly #http: Server;
  readonly #sessions = new Map<SessionId, Session>();
  /** Sessions closed as slow consumers, still within their grace: a stop ends them at once. */
  readonly #closingSlow = new Set<WebSocket>();
  readonly #localSessions = new Map<SessionId, LocalReceiver>();
  readonly #routes = new Map<string, HttpHandler>();
  readonly #secretDigest: Buffer;
  #nextId = 1;
  /** Sessions corked in this turn of the event loop; uncorked together on the next tick. */
  #corked: Session[] = [];
  #uncorkScheduled = false;
  #lastNotification: Notification | undefined;
  #lastPayload: Buffer = Buffer.alloc(0);
  notificationsSent = 0;
  slowConsumersClosed = 0;

  constructor(
    options: EndpointOptions,
    backend: GatewayBackend,
    onClose: (session: SessionId) => void,
    log: EndpointLog,
  ) {
    this.#options = options;
    this.#backend = backend;
    this.#onClose = onClose;
    this.#log = log;
    this.#secretDigest = digest(options.secret);
    this.#wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      maxPayload: MAX_WS_MESSAGE_BYTES,
      perMessageDeflate: false,
      handleProtocols: (protocols) => (protocols.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
    });
    this.#http = createServer((request, response) => {
      try {
        this.#request(request, response);
      } catch (error) {
        // One bad request never takes the daemon down with it.
        this.#log.warn(`HTTP ${request.method} failed: ${(error as Error).message}`);
        if (!response.headersSent) sendText(response, 500, 'internal error\n');
        else response.destroy();
      }
    });
    this.#http.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      try {
        this.#upgrade(request, socket as Socket, head);
      } catch (error) {
        this.#log.warn(`WebSocket upgrade failed: ${(error as Error).message}`);
        socket.destroy();
      }
    });
    this.#http.on('clientError', (_error, socket) => socket.destroy());
    this.route('GET', '/', (_request, response) =>
      sendText(
        response,
        200,
        `mcp-progress daemon: connect a WebSocket to ${WS_PATH} with subprotocol ${WS_SUBPROTOCOL}\n`,
      ),
    );
  }

  get sessionCount(): number {
    return this.#sessions.size + this.#localSessions.size;
  }

  /** Opens an in-process session; `receive` gets its notifications in order, never re-entrantly. */
  openLocalSession(receive: LocalReceiver): LocalSession {
    const id = this.#nextId++;
    this.#localSessions.set(id, receive);
    return {
      id,
      close: () => {
        if (this.#localSessions.delete(id)) this.#onClose(id);
      },
    };
  }

  /** Adds an HTTP route; `authorized` routes require the secret like the WebSocket does. */
  route(method: string, path: string, handler: HttpHandler, authorized = false): void {
    this.#routes.set(
      `${method} ${path}`,
      authorized
        ? (request, response) => {
            const refusal = this.#refusal(request);
            if (refusal) sendText(response, refusal.status, `${refusal.message}\n`);
            else handler(request, response);
          }
        : handler,
    );
  }

  /** Checks the secret (constant time) and the Origin of a request. */
  authorize(request: IncomingMessage): { status: number; message: string } | undefined {
    return this.#refusal(request);
  }

  listen(): Promise<string> {
    return new Promise((resolve, reject) => {
      this.#http.once('error', reject);
      this.#http.listen(this.#options.port, this.#options.host, () => {
        this.#http.off('error', reject);
        const address = this.#http.address() as AddressInfo;
        const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        resolve(`ws://${host}:${address.port}${WS_PATH}`);
      });
    });
  }

  /** Sends a notification to a session; each notification is serialised once for all its sessions. */
  deliver(id: SessionId, notification: Notification): void {
    const receive = this.#localSessions.get(id);
    if (receive !== undefined) {
      this.notificationsSent++;
      // The router is mid-update when it delivers: run the receiver after it, in delivery order.
      queueMicrotask(() => {
        if (this.#localSessions.get(id) !== receive) return;
        try {
          receive(notification);
        } catch (error) {
          this.#log.warn(
            `in-process session ${id} failed on a notification: ${(error as Error).message}`,
          );
        }
      });
      return;
    }
    const session = this.#sessions.get(id);
    if (session === undefined) return;
    if (notification !== this.#lastNotification) {
      // Both cache fields change together or not at all: a half-updated cache would send one
      // stream's payload under another's notification.
      const payload = Buffer.from(JSON.stringify(notification));
      this.#lastNotification = notification;
      this.#lastPayload = payload;
    }
    if (!session.corked) {
      session.corked = true;
      session.socket.cork();
      this.#corked.push(session);
      if (!this.#uncorkScheduled) {
        this.#uncorkScheduled = true;
        process.nextTick(() => this.#uncorkAll());
      }
    }
    session.ws.send(this.#lastPayload, { binary: false });
    this.notificationsSent++;
    this.#closeIfSlow(session);
  }

  /** Closes every session (1001) after what it was sent, then the server. */
  async stop(graceMs: number): Promise<void> {
    this.#uncorkAll();
    const closing = [...this.#sessions.values()].map(
      (session) =>
        new Promise<void>((resolve) => {
          session.ws.once('close', () => resolve());
          session.ws.close(CLOSE_CODES.goingAway, 'daemon stopping');
          setTimeout(() => {
            session.ws.terminate();
            resolve();
          }, graceMs).unref();
        }),
    );
    for (const ws of this.#closingSlow) ws.terminate();
    await Promise.all(closing);
    // Idle keep-alive connections close now; a client that holds a request half-sent gets the grace, no more.
    const closed = new Promise<void>((resolve) => this.#http.close(() => resolve()));
    this.#http.closeIdleConnections();
    const cutOff = setTimeout(() => this.#http.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(cutOff);
  }

  #uncorkAll(): void {
    this.#uncorkScheduled = false;
    const corked = this.#corked;
    this.#corked = [];
    for (const session of corked) {
      session.corked = false;
      session.socket.uncork();
    }
  }

  /** Closes the session once what it has not read passes the cap. */
  #closeIfSlow(session: Session): void {
    if (session.socket.writableLength > this.#options.maxSessionBufferBytes)
      this.#closeSlow(session);
  }

  #closeSlow(session: Session): void {
    this.slowConsumersClosed++;
    this.#log.warn(
      `session ${session.id} closed: ${session.socket.writableLength} bytes unread, more than --max-session-buffer-bytes`,
    );
    this.#drop(session);
    session.ws.close(CLOSE_CODES.slowConsumer, 'slow consumer: notifications were not read');
    this.#closingSlow.add(session.ws);
    session.ws.once('close', () => this.#closingSlow.delete(session.ws));
    setTimeout(() => session.ws.terminate(), SLOW_CONSUMER_GRACE_MS).unref();
  }

  #drop(session: Session): void {
    if (this.#sessions.delete(session.id)) this.#onClose(session.id);
  }

  #request(request: IncomingMessage, response: ServerResponse): void {
    const { path } = requestTarget(request);
    const handler = this.#routes.get(`${request.method} ${path}`);
    if (handler !== undefined) {
      handler(request, response);
      return;
    }
    if (path === WS_PATH) {
      sendText(
        response,
        426,
        `${WS_PATH} is a WebSocket endpoint: connect with subprotocol ${WS_SUBPROTOCOL}\n`,
      );
      return;
    }
    sendText(
      response,
      404,
      `no ${request.method} ${path} here: the WebSocket gateway is at ${WS_PATH}\n`,
    );
  }

  #refusal(request: IncomingMessage): { status: number; message: string } | undefined {
    const origin = request.headers.origin;
    if (origin !== undefined && !this.#options.allowOrigins.includes(origin)) {
      return {
        status: 403,
        message: `Origin ${origin} is not allowed: start the daemon with --allow-origin ${origin} to let that page connect`,
      };
    }
    const presented = presentedSecret(request);
    if (presented === undefined) {
      return {
        status: 401,
        message:
          'the secret is missing: send "Authorization: Bearer <secret>" (or ?access_token=<secret>); it is in daemon.json',
      };
    }
    if (!timingSafeEqual(digest(presented), this.#secretDigest)) {
      return {
        status: 401,
        message:
          'the secret is wrong: read the current one from daemon.json (it changes at every start)',
      };
    }
    return undefined;
  }

  #upgrade(request: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const refusal = this.#upgradeRefusal(request);
    if (refusal) refuseUpgrade(socket, refusal.status, refusal.message);
    else this.#wss.handleUpgrade(request, socket, head, (ws) => this.#open(ws, socket));
  }

  #upgradeRefusal(request: IncomingMessage): { status: number; message: string } | undefined {
    const { path } = requestTarget(request);
    if (path !== WS_PATH)
      return { status: 404, message: `no WebSocket endpoint at ${path}: use ${WS_PATH}` };
    const refusal = this.#refusal(request);
    if (refusal) return refusal;
    const offered = (request.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    if (!offered.includes(WS_SUBPROTOCOL)) {
      return {
        status: 400,
        message: `offer the WebSocket subprotocol ${WS_SUBPROTOCOL} (Sec-WebSocket-Protocol)`,
      };
    }
    if (this.#sessions.size >= this.#options.maxSessions) {
      return {
        status: 503,
        message: `the daemon serves at most ${this.#options.maxSessions} sessions (--max-sessions)`,
      };
    }
    return undefined;
  }

  #open(ws: WebSocket, socket: Socket): void {
    const session: Session = { id: this.#nextId++, ws, socket, corked: false };
    this.#sessions.set(session.id, session);
    this.#log.debug(`session ${session.id} opened`);
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!this.#sessions.has(session.id)) return;
      let answer: string | undefined;
      try {
        answer = isBinary
          ? rpcError(
              null,
              'invalid_request',
              'send JSON-RPC as WebSocket text messages, not binary',
            )
          : handleRpcText(session.id, data.toString('utf8'), this.#backend);
      } catch (error) {
        // A bug or an oversized reply fails this request only, never the daemon or the session.
        this.#log.warn(`session ${session.id}: request failed: ${(error as Error).message}`);
        answer = rpcError(
          null,
          'internal_error',
          `the daemon failed on this request: ${(error as Error).message}`,
        );
      }
      if (answer === undefined || ws.readyState !== ws.OPEN) return;
      ws.send(answer);
      // Replies count against the cap too: a client that asks and never reads is a slow consumer.
      this.#closeIfSlow(session);
    });
    ws.on('error', (error) => this.#log.debug(`session ${session.id} error: ${error.message}`));
    ws.on('close', () => {
      this.#drop(session);
      this.#log.debug(`session ${session.id} closed`);
    });
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/**
 * The path and query of a request, split by hand: `new URL()` throws on targets such as `//`,
 * and any local process or web page can send one.
 */
export function requestTarget(request: IncomingMessage): { path: string; query: URLSearchParams } {
  const target = request.url ?? '/';
  const mark = target.indexOf('?');
  return mark === -1
    ? { path: target, query: new URLSearchParams() }
    : { path: target.slice(0, mark), query: new URLSearchParams(target.slice(mark + 1)) };
}

function presentedSecret(request: IncomingMessage): string | undefined {
  // The auth scheme is case-insensitive (RFC 9110 §11.1).
  const bearer = /^bearer\s+(.+)$/i.exec(request.headers.authorization ?? '');
  if (bearer?.[1] !== undefined) return bearer[1].trim();
  return requestTarget(request).query.get('access_token') ?? undefined;
}

function sendText(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
  });
  response.end(text);
}

function refuseUpgrade(socket: Socket, status: number, message: string): void {
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  503: 'Service Unavailable',
};
