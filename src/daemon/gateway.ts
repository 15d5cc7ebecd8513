/**
 * The daemon's network face on loopback: an HTTP server whose /ws path
 * upgrades to the WebSocket gateway. The only module that imports ws.
 * The local link (a Unix socket in the runtime dir) feeds its connections to
 * the same HTTP server: one path for checks, caps and keepalive.
 * Transport only: sessions, their ids and fan-out belong to the session hub.
 * Every request must carry the secret; browser Origins must be allowed; a
 * connection that has not shown the secret is capped and timed out.
 */

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import {
  type AddressInfo,
  createServer as createNetServer,
  type Server as NetServer,
  type Socket,
} from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer as WebSocketServerType } from 'ws';
import { CLOSE_CODES } from '../protocol/errors.js';
import { MAX_WS_MESSAGE_BYTES, WS_SUBPROTOCOL } from '../protocol/limits.js';
import { NOTIFICATION_LINGER_MS, PAUSE_TOLERANCE_PERIODS } from '../shared/defaults.js';
import type { Logger } from '../shared/log.js';
import { PauseWatch } from '../shared/pause-watch.js';
import {
  hostRefusal,
  LOCAL_LINK_NAMES,
  type OwnNames,
  ownNames,
  REFUSAL_CONTENT_TYPE,
  type Refusal,
  refusalBody,
  refusalStatus,
  sendRefusal,
} from './access.js';
import { missingPackage } from './installed.js';
import { PeerUids } from './peer-uid.js';
import type { GatewayBackend, SessionId } from './rpc.js';
import { listenOwnerOnly } from './runtime-dir.js';
import type { Payload, SessionHub } from './sessions.js';
import { WritePacer } from './write-pacer.js';

// Required, not imported: an ESM import of node:http reads every export, and its lazy
// WebSocket and fetch getters load undici, about 10 MiB and 90 ms at every daemon start.
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/**
 * What only WebSocket sessions need: ws, and the JSON-RPC handlers with zod's schemas, about
 * 10 MiB together. A daemon loads them at its first upgrade, not at start: it may sit idle all day.
 */
interface WebSocketSide {
  readonly wss: WebSocketServerType;
  readonly rpc: typeof import('./rpc.js');
}

async function loadWebSocketSide(): Promise<WebSocketSide> {
  const rpc = await import('./rpc.js');
  // Required: ws's ESM wrapper costs about 10 MiB of resident memory more than its CommonJS entry.
  const { WebSocketServer } = createRequire(import.meta.url)('ws') as typeof import('ws');
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: MAX_WS_MESSAGE_BYTES,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
  });
  return { wss, rpc };
}

export const WS_PATH = '/ws';

export interface EndpointOptions {
  readonly host: string;
  readonly port: number;
  readonly secret: string;
  readonly allowOrigins: readonly string[];
  /**
   * Connections of one local user (one peer uid) that have not yet presented the secret; a new one
   * past it closes that user's oldest.
   */
  readonly maxPendingConnections: number;
  /** How long a connection has to present the secret (a request or an upgrade) before it is closed. */
  readonly handshakeTimeoutMs: number;
  /** A WebSocket session heard nothing from for this long is pinged; 0 turns keepalive off. */
  readonly pingIntervalMs: number;
  /** A pinged session that does not answer within this is closed. */
  readonly pongTimeoutMs: number;
}

export type EndpointLog = Pick<Logger, 'info' | 'warn' | 'debug'>;

export type HttpHandler = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * A route's own access check: why the request is refused, or undefined to serve it; a check that
 * must look something up (the user at the other end) answers later.
 */
export type Authorizer = (
  request: IncomingMessage,
) => Refusal | undefined | Promise<Refusal | undefined>;

interface WsSession {
  readonly id: SessionId;
  readonly ws: WebSocket;
  readonly socket: Socket;
  corked: boolean;
  /** When the client was last heard from (a message or a pong), performance.now(). */
  heardAt: number;
  /** When the unanswered ping was sent, if one is out. */
  pingedAt: number | undefined;
}

interface PendingConnection {
  /** Closes it at --handshake-timeout-ms. */
  readonly timer: NodeJS.Timeout;
  /** The peer's uid, once looked up (only while more than the cap are pending). */
  peer: number | 'unknown' | undefined;
}

/** Figures the gateway counts for `status` and /metrics. */
export interface GatewayCounters {
  /** Pending connections closed to make room for a newer one of the same user (--max-pending-connections). */
  pendingConnectionsEvicted: number;
  /** Connections closed for not presenting the secret within --handshake-timeout-ms. */
  handshakeTimeouts: number;
  /** WebSocket sessions closed for not answering a keepalive ping. */
  keepaliveTimeouts: number;
}

export class GatewayEndpoint {
  readonly #options: EndpointOptions;
  readonly #backend: GatewayBackend;
  readonly #hub: SessionHub;
  readonly #log: EndpointLog;
  /** Loaded at the first WebSocket upgrade. */
  #webSocketSide: Promise<WebSocketSide> | undefined;
  readonly #http: Server;
  readonly #sessions = new Map<SessionId, WsSession>();
  /** Sessions closed as slow consumers, still within their grace: a stop ends them at once. */
  readonly #closingSlow = new Set<WebSocket>();
  readonly #routes = new Map<string, HttpHandler>();
  /** Each served path's methods, and the headers its refusals carry (the page's, on its paths). */
  readonly #paths = new Map<
    string,
    { methods: string[]; refusalHeaders: Readonly<Record<string, string>> }
  >();
  readonly #secretDigest: Buffer;
  /** The names and origins of this daemon, known once it listens (its port may be chosen then). */
  #names: OwnNames = { hosts: new Set(), origins: new Set() };
  /** The local link's listening socket, once it listens. */
  #local: NetServer | undefined;
  /** Connections that came in on the local link: they answer to its names, not the port's. */
  readonly #localSockets = new WeakSet<Socket>();
  /** Connections that have not presented the secret yet, oldest first. */
  readonly #pending = new Map<Socket, PendingConnection>();
  readonly #peerUids = new PeerUids();
  /** A sort of the pending connections by user is scheduled or running. */
  #sorting = false;
  #keepalive: NodeJS.Timeout | undefined;
  /** Between two keepalive checks: whether this daemon itself stood still. */
  #keepalivePause: PauseWatch | undefined;
  /** Sessions with notifications corked; uncorked together when the pacer says. */
  #corked: WsSession[] = [];
  readonly #pacer = new WritePacer(NOTIFICATION_LINGER_MS, () => this.#uncorkAll());
  /** The payload #frame carries (both change together). */
  #framedPayload: Payload | undefined;
  #frame: Buffer = Buffer.alloc(0);
  readonly counters: GatewayCounters = {
    pendingConnectionsEvicted: 0,
    handshakeTimeouts: 0,
    keepaliveTimeouts: 0,
  };

  constructor(
    options: EndpointOptions,
    backend: GatewayBackend,
    hub: SessionHub,
    log: EndpointLog,
  ) {
    this.#options = options;
    this.#backend = backend;
    this.#hub = hub;
    this.#log = log;
    this.#secretDigest = digest(options.secret);
    this.#http = createServer((request, response) => {
      try {
        this.#request(request, response);
      } catch (error) {
        // One bad request never takes the daemon down with it.
        this.#log.warn(`HTTP ${request.method} failed: ${(error as Error).message}`);
        if (!response.headersSent)
          sendRefusal(response, {
            code: 'internal_error',
            message: `the daemon failed on this request: ${(error as Error).message}`,
          });
        else response.destroy();
      }
    });
    this.#http.on('connection', (socket: Socket) => this.#connection(socket));
    this.#http.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      try {
        this.#upgrade(request, socket as Socket, head);
      } catch (error) {
        this.#log.warn(`WebSocket upgrade failed: ${(error as Error).message}`);
        socket.destroy();
      }
    });
    this.#http.on('clientError', (_error, socket) => socket.destroy());
  }

  /** Connections that have not presented the secret yet. */
  get pendingConnections(): number {
    return this.#pending.size;
  }

  /**
   * Adds an HTTP route; `authorized` routes require the secret like the WebSocket does, or pass
   * the check of their own (the page's cookie). A request that passes is no longer pending. A
   * refusal carries `refusalHeaders` too (the page's, on its routes).
   */
  route(
    method: string,
    path: string,
    handler: HttpHandler,
    authorized: boolean | Authorizer = false,
    refusalHeaders: Readonly<Record<string, string>> = {},
  ): void {
    const check =
      authorized === true
        ? (request: IncomingMessage) => this.#refusal(request)
        : authorized === false
          ? undefined
          : authorized;
    const served = this.#paths.get(path);
    if (served === undefined) this.#paths.set(path, { methods: [method], refusalHeaders });
    else served.methods.push(method);
    this.#routes.set(
      `${method} ${path}`,
      check !== undefined
        ? (request, response) => {
            const decide = (refusal: Refusal | undefined) => {
              // Closed (or evicted) while a later check looked it up: nothing to answer.
              if (request.socket.destroyed) return;
              if (refusal) {
                sendRefusal(response, refusal, refusalHeaders);
                return;
              }
              this.#authenticated(request.socket);
              handler(request, response);
            };
            const refusal = check(request);
            if (!(refusal instanceof Promise)) {
              decide(refusal);
              return;
            }
            refusal.then(decide, (error: Error) =>
              decide({
                code: 'internal_error',
                message: `the daemon cannot check this request: ${error.message}`,
              }),
            );
          }
        : handler,
    );
  }

  listen(): Promise<string> {
    // Found now, loaded at the first upgrade: a broken install fails the start, not a session.
    const missing = missingPackage('ws');
    if (missing !== undefined) return Promise.reject(missing);
    return new Promise((resolve, reject) => {
      this.#http.once('error', reject);
      this.#http.listen(this.#options.port, this.#options.host, () => {
        this.#http.off('error', reject);
        const address = this.#http.address() as AddressInfo;
        this.#names = ownNames(this.#options.host, address.port);
        const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        if (this.#options.pingIntervalMs > 0) {
          const every = Math.max(
            10,
            Math.min(this.#options.pingIntervalMs, this.#options.pongTimeoutMs) / 2,
          );
          this.#keepalivePause = new PauseWatch(performance.now(), PAUSE_TOLERANCE_PERIODS * every);
          this.#keepalive = setInterval(() => this.#checkKeepalive(), every);
          this.#keepalive.unref();
        }
        resolve(`ws://${host}:${address.port}${WS_PATH}`);
      });
    });
  }

  /**
   * Serves the gateway on a Unix socket too (the local link), bound at `path` (mode 0600 from
   * its birth); the caller publishes it under its name. Its connections are handed to the same
   * HTTP server as TCP's, so the same checks, caps, session hub and keepalive apply.
   */
  listenLocal(path: string): Promise<void> {
    const server = createNetServer((socket) => {
      this.#localSockets.add(socket);
      this.#http.emit('connection', socket);
    });
    this.#local = server;
    return listenOwnerOnly(server, { path }, (error) =>
      this.#log.debug(`local link error: ${error.message}`),
    );
  }

  /** Stops taking connections on the local link; those open stay. */
  closeLocal(): void {
    this.#local?.close();
    this.#local = undefined;
  }

  /** Open WebSocket sessions that came in on the local link. */
  get localLinkSessions(): number {
    let n = 0;
    for (const session of this.#sessions.values()) if (this.#localSockets.has(session.socket)) n++;
    return n;
  }

  /** Closes every session (1001) after what it was sent, then the server. */
  async stop(graceMs: number): Promise<void> {
    clearInterval(this.#keepalive);
    // No new connections on the local link; those open close with the HTTP server's below.
    this.closeLocal();
    this.#pacer.flushNow();
    const closing = [...this.#sessions.values()].map(
      (session) =>
        new Promise<void>((resolve) => {
          session.ws.once('close', () => resolve());
          session.ws.close(CLOSE_CODES.going_away.code, CLOSE_CODES.going_away.reason);
          setTimeout(() => {
            session.ws.terminate();
            resolve();
          }, graceMs).unref();
        }),
    );
    for (const ws of this.#closingSlow) ws.terminate();
    await Promise.all(closing);
    for (const [socket, { timer }] of this.#pending) {
      clearTimeout(timer);
      socket.destroy();
    }
    this.#pending.clear();
    // Idle keep-alive connections close now; a client that holds a request half-sent gets the grace, no more.
    const closed = new Promise<void>((resolve) => this.#http.close(() => resolve()));
    this.#http.closeIdleConnections();
    const cutOff = setTimeout(() => this.#http.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(cutOff);
  }

  /**
   * A new TCP connection: it counts as pending until it presents the secret. Each local user has
   * --max-pending-connections places; past them that user's oldest is closed, which an honest
   * client is not (its request arrives whole and authenticates at once). So a user who holds
   * connections half-sent only ever evicts their own, never the daemon owner's or another's.
   */
  #connection(socket: Socket): void {
    const timer = setTimeout(() => {
      if (!this.#pending.delete(socket)) return;
      this.counters.handshakeTimeouts++;
      socket.destroy();
    }, this.#options.handshakeTimeoutMs);
    timer.unref();
    // The local link's socket is 0600 in a 0700 dir: who connects there is the daemon's own user.
    const peer = this.#localSockets.has(socket) ? (process.getuid?.() ?? 'unknown') : undefined;
    this.#pending.set(socket, { timer, peer });
    socket.once('close', () => this.#authenticated(socket));
    // No user can be past the cap while fewer are pending in all: only then are peers looked up.
    if (this.#pending.size > this.#options.maxPendingConnections) this.#sortLater();
  }

  /** Sorts the pending connections by user once the peer table may be read again. */
  #sortLater(): void {
    if (this.#sorting) return;
    this.#sorting = true;
    const wait = Math.max(0, this.#peerUids.readyAt - performance.now());
    setTimeout(() => {
      this.#sortByUser().then(
        () => {
          this.#sorting = false;
          // Connections that arrived during the read are sorted in the next round.
          const unsorted = [...this.#pending.values()].some((p) => p.peer === undefined);
          if (unsorted && this.#pending.size > this.#options.maxPendingConnections)
            this.#sortLater();
        },
        (error: Error) => {
          this.#sorting = false;
          this.#log.warn(`cannot tell the users of pending connections: ${error.message}`);
        },
      );
    }, wait).unref();
  }

  /** Learns the user of each new pending connection, then closes each user's oldest past the cap. */
  async #sortByUser(): Promise<void> {
    const unsorted = [...this.#pending].filter(([, p]) => p.peer === undefined).map(([s]) => s);
    const uids = await this.#peerUids.lookup(unsorted);
    for (const socket of unsorted) {
      const pending = this.#pending.get(socket);
      if (pending !== undefined) pending.peer = uids.get(socket) ?? 'unknown';
    }
    const byUser = new Map<number | 'unknown', Socket[]>();
    for (const [socket, { peer }] of this.#pending) {
      if (peer === undefined) continue;
      const sockets = byUser.get(peer) ?? [];
      byUser.set(peer, sockets);
      sockets.push(socket);
    }
    const cap = this.#options.maxPendingConnections;
    for (const sockets of byUser.values())
      for (const oldest of sockets.slice(0, Math.max(0, sockets.length - cap))) this.#evict(oldest);
  }

  #evict(socket: Socket): void {
    this.#authenticated(socket);
    this.counters.pendingConnectionsEvicted++;
    socket.on('error', () => socket.destroy());
    const refusal: Refusal = {
      code: 'too_many_pending',
      message: `closed before it authenticated: ${this.#options.maxPendingConnections} newer connections of the same user were waiting (--max-pending-connections); send the request whole`,
    };
    socket.end(refusalResponse(refusal), () => socket.destroy());
  }

  /** The connection presented the secret (or closed): it is no longer pending. */
  #authenticated(socket: Socket): void {
    const pending = this.#pending.get(socket);
    if (pending === undefined) return;
    clearTimeout(pending.timer);
    this.#pending.delete(socket);
  }

  /** Pings sessions heard nothing from for a while; closes those whose ping went unanswered. */
  #checkKeepalive(): void {
    const now = performance.now();
    if (this.#keepalivePause?.resumed(now)) {
      // This daemon stood still: the pongs and messages sent meanwhile are still unread.
      for (const session of this.#sessions.values()) {
        session.heardAt = now;
        session.pingedAt = undefined;
      }
      return;
    }
    for (const session of this.#sessions.values()) {
      if (session.pingedAt !== undefined) {
        if (now - session.pingedAt < this.#options.pongTimeoutMs) continue;
        this.counters.keepaliveTimeouts++;
        this.#log.info(
          `session ${session.id} closed: no pong within ${this.#options.pongTimeoutMs} ms (--pong-timeout-ms)`,
        );
        this.#hub.close(session.id);
        session.ws.terminate();
      } else if (now - session.heardAt >= this.#options.pingIntervalMs) {
        session.pingedAt = now;
        session.ws.ping();
      }
    }
  }

  #uncorkAll(): void {
    const corked = this.#corked;
    this.#corked = [];
    for (const session of corked) {
      session.corked = false;
      session.socket.uncork();
    }
  }

  /** Writes a notification, corked: the pacer uncorks it with those that follow it closely. */
  #write(session: WsSession, payload: Payload): void {
    if (!session.corked) {
      session.corked = true;
      session.socket.cork();
      this.#corked.push(session);
    }
    this.#pacer.wrote();
    // After a close began, ws.send would drop it too.
    if (session.ws.readyState !== session.ws.OPEN) return;
    session.socket.write(this.#frameOf(payload));
  }

  /**
   * The notification's WebSocket frame: a fan-out writes the hub's one payload to each session,
   * so the newest frame is kept for the next session.
   */
  #frameOf(payload: Payload): Buffer {
    if (payload !== this.#framedPayload) {
      this.#frame = textFrame(payload);
      this.#framedPayload = payload;
    }
    return this.#frame;
  }

  #closeSlow(session: WsSession, graceMs: number): void {
    this.#sessions.delete(session.id);
    session.ws.close(CLOSE_CODES.slow_consumer.code, CLOSE_CODES.slow_consumer.reason);
    this.#closingSlow.add(session.ws);
    session.ws.once('close', () => this.#closingSlow.delete(session.ws));
    setTimeout(() => session.ws.terminate(), graceMs).unref();
  }

  /**
   * The uid of the process at the other end of a connection: the daemon's own on the local link
   * (its socket is 0600), from the kernel's table for loopback TCP on Linux, undefined elsewhere.
   */
  peerUid(socket: Socket): Promise<number | undefined> {
    if (this.#localSockets.has(socket)) return Promise.resolve(process.getuid?.());
    return this.#peerUids.uidOf(socket);
  }

  /** The daemon's own names and origins (after listen): the page's routes check them too. */
  get names(): OwnNames {
    return this.#names;
  }

  /** The names a request must use: the port's, or the local link's. */
  #namesOf(request: IncomingMessage): OwnNames {
    return this.#localSockets.has(request.socket as Socket) ? LOCAL_LINK_NAMES : this.#names;
  }

  #request(request: IncomingMessage, response: ServerResponse): void {
    const { path } = requestTarget(request);
    const served = this.#paths.get(path);
    const refusalHeaders = served?.refusalHeaders;
    const misnamed = hostRefusal(request, this.#namesOf(request));
    if (misnamed !== undefined) {
      sendRefusal(response, misnamed, refusalHeaders);
      return;
    }
    const handler = this.#routes.get(`${request.method} ${path}`);
    if (handler !== undefined) {
      handler(request, response);
      return;
    }
    if (served !== undefined) {
      const allowed = served.methods.join(', ');
      sendRefusal(
        response,
        {
          code: 'method_not_allowed',
          message: `${path} is not served to ${request.method}: ask it with ${allowed}`,
        },
        { ...refusalHeaders, allow: allowed },
      );
      return;
    }
    if (path === WS_PATH) {
      sendRefusal(response, {
        code: 'upgrade_required',
        message: `${WS_PATH} is a WebSocket endpoint: connect with subprotocol ${WS_SUBPROTOCOL}`,
      });
      return;
    }
    sendRefusal(response, {
      code: 'not_found',
      message: `nothing is served at ${path}: the WebSocket gateway is at ${WS_PATH}, MCP at /mcp, and the live page (\`mcp-progress open\`) at /`,
    });
  }

  /** Checks the secret (constant time) and the Origin of a request. */
  #refusal(request: IncomingMessage): Refusal | undefined {
    const origin = request.headers.origin;
    const names = this.#namesOf(request);
    // --allow-origin is for pages, which reach the port only: the local link allows no Origin.
    if (
      origin !== undefined &&
      !names.origins.has(origin) &&
      (names === LOCAL_LINK_NAMES || !this.#options.allowOrigins.includes(origin))
    ) {
      return {
        code: 'origin_not_allowed',
        message: `Origin ${origin} is not allowed: start the daemon with --allow-origin ${origin} to let that page connect`,
      };
    }
    const presented = presentedSecret(request);
    if (presented === undefined) {
      return {
        code: 'secret_missing',
        message:
          'the secret is missing: send `Authorization: Bearer <secret>` (or ?access_token=<secret>); it is in daemon.json',
      };
    }
    if (!timingSafeEqual(digest(presented), this.#secretDigest)) {
      return {
        code: 'secret_wrong',
        message:
          'the secret is wrong: read the current one from daemon.json (it changes at every start)',
      };
    }
    return undefined;
  }

  #upgrade(request: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const refusal = this.#upgradeRefusal(request);
    if (refusal !== undefined) {
      this.#refuseUpgrade(socket, refusal);
      return;
    }
    this.#authenticated(socket);
    this.#webSocketSide ??= loadWebSocketSide();
    this.#webSocketSide.then(
      (side) => {
        if (socket.destroyed) return;
        // The hub is asked here, in the turn that completes the handshake and admits the session
        // (handleUpgrade calls #open before it returns), not before the WebSocket side loaded:
        // a session that took the last place meanwhile, or a stop begun meanwhile, gets this
        // upgrade the same 503 as any other, never a session opened only to be closed.
        const refused = this.#hub.refusal();
        if (refused !== undefined) {
          this.#refuseUpgrade(socket, refused);
          return;
        }
        side.wss.handleUpgrade(request, socket, head, (ws) => this.#open(ws, socket, side.rpc));
      },
      (error: Error) => {
        this.#log.warn(
          `WebSocket upgrade failed: cannot load the WebSocket side: ${error.message}`,
        );
        socket.destroy();
      },
    );
  }

  /** Answers an upgrade with its refusal (4.9) and closes the connection. */
  #refuseUpgrade(socket: Socket, refusal: Refusal): void {
    // The client is told why; the log lets whoever runs the daemon count who was turned away.
    this.#log.debug(
      `refused a WebSocket upgrade (HTTP ${refusalStatus(refusal)}): ${refusal.message} (${refusal.code})`,
    );
    socket.end(refusalResponse(refusal));
  }

  #upgradeRefusal(request: IncomingMessage): Refusal | undefined {
    const misnamed = hostRefusal(request, this.#namesOf(request));
    if (misnamed !== undefined) return misnamed;
    const { path } = requestTarget(request);
    if (path !== WS_PATH)
      return { code: 'not_found', message: `no WebSocket endpoint at ${path}: use ${WS_PATH}` };
    const refusal = this.#refusal(request);
    if (refusal) return refusal;
    const offered = (request.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    if (!offered.includes(WS_SUBPROTOCOL)) {
      return {
        code: 'subprotocol_required',
        message: `offer the WebSocket subprotocol ${WS_SUBPROTOCOL} (Sec-WebSocket-Protocol)`,
      };
    }
    return undefined;
  }

  #open(ws: WebSocket, socket: Socket, rpc: WebSocketSide['rpc']): void {
    const { handleRpcText, rpcError } = rpc;
    let session: WsSession | undefined;
    const { id, refused } = this.#hub.open('websocket', {
      write: (_notification, payload) => {
        if (session !== undefined) this.#write(session, payload);
      },
      unreadBytes: () => socket.writableLength,
      closeSlow: (graceMs) => {
        if (session !== undefined) this.#closeSlow(session, graceMs);
      },
    });
    if (refused !== undefined) {
      // Not reached: #upgrade asked the hub in this same turn. Were it, the client sees a dropped
      // connection (1006) and connects again, to be refused with a 503 that says why.
      ws.terminate();
      return;
    }
    const opened: WsSession = {
      id,
      ws,
      socket,
      corked: false,
      heardAt: performance.now(),
      pingedAt: undefined,
    };
    session = opened;
    this.#sessions.set(id, opened);
    const heard = () => {
      opened.heardAt = performance.now();
      opened.pingedAt = undefined;
    };
    ws.on('pong', heard);
    const failed = (message: string) => this.#log.warn(`session ${id}: request failed: ${message}`);
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!this.#sessions.has(id)) return;
      heard();
      let answer: string | undefined;
      try {
        // A method that throws (a bug) fails its request only: handleRpcText answers it with
        // internal_error and the request's id.
        answer = isBinary
          ? rpcError(
              null,
              'invalid_request',
              'send JSON-RPC as WebSocket text messages, not binary',
            )
          : handleRpcText(id, data.toString('utf8'), this.#backend, failed);
      } catch (error) {
        // Never the daemon or the session: a failure before the request's id was read has no id
        // to answer with.
        failed((error as Error).message);
        answer = rpcError(
          null,
          'internal_error',
          `the daemon failed on this request: ${(error as Error).message}`,
        );
      }
      if (answer === undefined || ws.readyState !== ws.OPEN) return;
      ws.send(answer);
      // A reply goes out at the end of this turn, with whatever notifications were held before it.
      if (opened.corked) this.#pacer.flushSoon();
      // Replies count against the cap too: a client that asks and never reads is a slow consumer.
      this.#hub.closeIfSlow(id, Buffer.byteLength(answer));
    });
    ws.on('error', (error) => this.#log.debug(`session ${id} error: ${error.message}`));
    ws.on('close', () => {
      this.#sessions.delete(id);
      this.#hub.close(id);
    });
  }
}

/**
 * A payload as one unmasked WebSocket text frame (RFC 6455 section 5.2), which the gateway writes
 * to the socket itself: one buffer and one write, where ws.send writes a header and the payload
 * as two (a writev): 2-4% of the daemon's CPU at 1,000 updates a second in A/B runs. It
 * cannot cut into a frame of ws's own: with perMessageDeflate off, and never fragmenting, ws
 * writes each of its frames (replies, pings, close) to the socket whole, at once.
 */
export function textFrame({ text, bytes: length }: Payload): Buffer {
  const header = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(header + length);
  frame[0] = FIN_TEXT;
  if (header === 2) {
    frame[1] = length;
  } else if (header === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  frame.write(text, header, length, 'utf8');
  return frame;
}

/** The first byte of a whole text frame: FIN, and opcode 1. */
const FIN_TEXT = 0x81;

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

/**
 * A refusal as a complete HTTP response that closes the connection, for a socket no HTTP response
 * object holds (an upgrade, a connection evicted before its request).
 */
function refusalResponse(refusal: Refusal): string {
  const status = refusalStatus(refusal);
  const body = refusalBody(refusal);
  return (
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: ${REFUSAL_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  421: 'Misdirected Request',
  426: 'Upgrade Required',
  503: 'Service Unavailable',
};
