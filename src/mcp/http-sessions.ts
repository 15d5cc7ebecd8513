/**
 * The MCP tools over Streamable HTTP at the daemon's /mcp. Responses are SSE
 * streams (never JSON-response mode), so progress notifications can flow on
 * the stream of the request they belong to. The endpoint checks the secret
 * and the Origin before a request gets here.
 *
 * Two revisions share the path. The 2025 ones open a session with initialize
 * (SDK 1.x, below). A 2026-07-28 request carries its revision in `_meta` and
 * has no session: it goes to the 2.x package's handler, loaded on first use,
 * which answers each POST on its own (modern-http.ts).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpErrorName } from '../protocol/errors.js';
import { MCP_REPLAY_BYTES, MCP_REPLAY_EVENTS, MCP_SSE_RETRY_MS } from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import { BoundedEventStore, streamOfEventId } from './event-store.js';
import { daemonStopping, jsonRpcError, sessionRefused } from './json-rpc-error.js';
import { createProgressMcpServer } from './mcp-server.js';
import type { ModernMcpHttp } from './modern-http.js';
import { HANDED_ON } from './progress-sends.js';
import type { ProgressSource } from './progress-source.js';
import {
  claimsSessionlessRevision,
  isSessionlessRevision,
  PROTOCOL_VERSION_HEADER,
} from './revision.js';
import type { McpSessionGrant, McpSessionHost } from './session-host.js';

type EndpointLog = Pick<Logger, 'info' | 'warn' | 'debug'>;

export { MCP_PATH } from './http-path.js';

/** The largest POST body /mcp reads (the SDK transport's own default). */
export const MAX_MCP_BODY_BYTES = 4 * 1024 * 1024;

export interface McpHttpOptions {
  readonly host: McpSessionHost;
  /**
   * For the sessionless 2026-07-28 requests: what they ask of the daemon. A request that watches
   * progress takes its place from `host` (modern-http.ts), so the hub's caps hold for it too.
   */
  readonly source: ProgressSource;
  /** A session with no request for this long is closed (clients that never send DELETE). */
  readonly idleMs: number;
  readonly defaultMinIntervalMs?: number | undefined;
}

/**
 * Bytes the SDK sent on one response and bytes that reached the response. The SDK's SSE stream
 * waits for 'drain', so what a client does not read piles up between the two, out of sight of
 * the socket's buffer.
 */
interface Outgoing {
  sent: number;
  written: number;
  /** The response's own write, under the counting one: a direct write counts its bytes itself. */
  writeRaw: (chunk: string) => boolean;
  /** Progress events put on the SDK's stream for this response, and how many of them reached it. */
  enqueued: number;
  enqueuedWritten: number;
  readonly ours: WeakSet<Uint8Array>;
  /** The SDK sent a message on this response itself: from then on every event keeps to its stream. */
  sdkSent: boolean;
}

/**
 * The response's outgoing figures, and from now on its writes counted: the bytes that reach it
 * (the SDK's stream writes them as drain allows), and which of them are progress events put on
 * that stream.
 */
function countedOutgoing(response: ServerResponse): Outgoing {
  const write = response.write.bind(response) as (...args: unknown[]) => boolean;
  const outgoing: Outgoing = {
    sent: 0,
    written: 0,
    writeRaw: write,
    enqueued: 0,
    enqueuedWritten: 0,
    ours: new WeakSet(),
    sdkSent: false,
  };
  response.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (typeof chunk === 'string') outgoing.written += Buffer.byteLength(chunk);
    else if (chunk instanceof Uint8Array) {
      outgoing.written += chunk.byteLength;
      if (outgoing.ours.has(chunk)) outgoing.enqueuedWritten++;
    }
    return write(chunk, ...rest);
  }) as ServerResponse['write'];
  return outgoing;
}

/**
 * Whether a progress event may be written to the response itself instead of through the SDK's
 * stream, whose pump (hono's node adapter) costs a reader promise and a microtask per event:
 * only once everything put on the stream has reached the response (so the order holds; the
 * first event, after the SDK's own priming, goes through the stream), while the response and its
 * socket take writes without waiting for drain (so the pump keeps the backpressure), and while the
 * SDK itself has sent nothing on it (its events are not counted one by one).
 */
function canWriteDirectly(response: ServerResponse, outgoing: Outgoing): boolean {
  return (
    !outgoing.sdkSent &&
    outgoing.enqueued > 0 &&
    outgoing.enqueuedWritten === outgoing.enqueued &&
    response.headersSent &&
    !response.writableNeedDrain &&
    !response.writableEnded &&
    !response.destroyed &&
    response.socket?.writableNeedDrain !== true
  );
}

/** The parts of node:http's response that say whether a chunk may go straight to its socket. */
interface ChunkedResponse {
  readonly chunkedEncoding?: unknown;
  readonly outputData?: unknown;
  readonly socket: (Socket & { readonly _httpMessage?: unknown }) | null;
}

/**
 * Writes `text` (`bytes` long in UTF-8) as one chunk of a chunked response: straight to its
 * socket, framed as node:http would, when the response owns the socket and holds nothing back
 * (the bytes then follow everything written before). node:http's own write costs a cork, a
 * nextTick and a three-part writev per event: at 1,000 events a second, a tenth of /mcp's CPU.
 * Anything else goes through the response.
 */
function writeChunk(
  response: ServerResponse,
  outgoing: Outgoing,
  text: string,
  bytes: number,
): void {
  const raw = response as unknown as ChunkedResponse;
  const socket = raw.socket;
  if (
    socket !== null &&
    raw.chunkedEncoding === true &&
    socket._httpMessage === response &&
    Array.isArray(raw.outputData) &&
    raw.outputData.length === 0
  ) {
    socket.write(`${bytes.toString(16)}\r\n${text}\r\n`);
  } else {
    outgoing.writeRaw(text);
  }
}

interface McpSession {
  readonly server: McpServer;
  readonly transport: StreamableHTTPServerTransport;
  readonly grant: McpSessionGrant;
  /** Its responses still being written, with what was sent on each and what reached it. */
  readonly responses: Map<ServerResponse, Outgoing>;
  /** The response each request id's messages go out on. */
  readonly streams: Map<string | number, ServerResponse>;
  /**
   * The response of the session's standalone SSE stream (its GET), while open: what belongs to no
   * request (a task's progress and status) goes out on it.
   */
  standalone: ServerResponse | undefined;
  lastUsed: number;
  /** Requests being answered (an SSE stream open counts until it ends). */
  busy: number;
}

export class McpHttpSessions {
  readonly #options: McpHttpOptions;
  readonly #log: EndpointLog;
  readonly #sessions = new Map<string, McpSession>();
  readonly #sweeper: NodeJS.Timeout;
  #modern: Promise<ModernMcpHttp> | undefined;
  #closed = false;

  constructor(options: McpHttpOptions, log: EndpointLog) {
    this.#options = options;
    this.#log = log;
    this.#sweeper = setInterval(() => this.#sweep(), Math.max(1000, options.idleMs / 4));
    this.#sweeper.unref();
  }

  /** Handles POST, GET and DELETE on /mcp. */
  handle(request: IncomingMessage, response: ServerResponse): void {
    this.#handle(request, response).catch((error: Error) => {
      this.#log.warn(`MCP over HTTP: ${error.message}`);
      if (!response.headersSent) {
        jsonRpcError(response, 500, 'internal_error', `internal error: ${error.message}`);
      } else {
        response.destroy();
      }
    });
  }

  /** Closes every session, ending their open SSE streams. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    const modern = this.#modern;
    await Promise.all([
      ...sessions.map((session) => this.#end(session)),
      modern?.then((handler) => handler.close()).catch(() => {}),
    ]);
  }

  /** The 2026-07-28 handler, built the first time such a request arrives. */
  #modernHttp(): Promise<ModernMcpHttp> {
    this.#modern ??= import('./modern-http.js').then(
      ({ ModernMcpHttp }) =>
        new ModernMcpHttp({
          host: this.#options.host,
          source: this.#options.source,
          defaultMinIntervalMs: this.#options.defaultMinIntervalMs,
        }),
    );
    return this.#modern;
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (this.#closed) {
      daemonStopping(response);
      return;
    }
    let body: unknown;
    if (request.method === 'POST') {
      const read = await readJson(request);
      if (!read.ok) {
        jsonRpcError(response, read.status, read.error, read.message);
        return;
      }
      body = read.value;
      if (claimsModernRevision(request, body)) {
        await (await this.#modernHttp()).serve(request, response, body);
        return;
      }
    }
    const header = request.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId !== undefined) {
      const session = this.#sessions.get(sessionId);
      if (session === undefined) {
        // 404 tells a Streamable HTTP client to start a new session.
        jsonRpcError(
          response,
          404,
          'session_not_found',
          'session not found: it ended or the daemon restarted; initialize a new session',
        );
        return;
      }
      await this.#serve(session, request, response, body);
      return;
    }
    if (request.method !== 'POST') {
      jsonRpcError(
        response,
        400,
        'refused',
        'no Mcp-Session-Id header: start a session with an initialize request (POST)',
      );
      return;
    }
    await this.#open(request, response, body);
  }

  /**
   * A request without a session: the transport accepts only initialize, which creates one.
   * Its place under the cap is taken before anything is awaited, so admissions never overshoot.
   */
  async #open(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void> {
    const responses = new Map<ServerResponse, Outgoing>();
    let slow: ((graceMs: number) => void) | undefined;
    const grant = this.#options.host.open({
      unreadBytes: () => {
        let unread = 0;
        for (const [open, outgoing] of responses) {
          // Bytes written that the SDK did not send through send() (headers, comments) move the
          // baseline, so they never hide a backlog.
          if (outgoing.written > outgoing.sent) outgoing.sent = outgoing.written;
          unread += outgoing.sent - outgoing.written + open.writableLength;
        }
        return unread;
      },
      closeSlow: (graceMs) => slow?.(graceMs),
    });
    if ('refused' in grant) {
      sessionRefused(response, grant);
      return;
    }
    const server = createProgressMcpServer({
      source: grant.source,
      defaultMinIntervalMs: this.#options.defaultMinIntervalMs,
    });
    let registered = false;
    const events = new BoundedEventStore(MCP_REPLAY_EVENTS, MCP_REPLAY_BYTES);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: false,
      // Priming events with an id and `retry` on every POST stream (SEP-1699), and a bounded replay.
      eventStore: events,
      retryInterval: MCP_SSE_RETRY_MS,
      onsessioninitialized: (id) => {
        registered = true;
        this.#sessions.set(id, session);
        this.#log.debug(`MCP session ${id} opened`);
      },
    });
    const session: McpSession = {
      server,
      transport,
      grant,
      responses,
      streams: new Map(),
      standalone: undefined,
      lastUsed: performance.now(),
      busy: 0,
    };
    slow = (graceMs) => {
      const id = transport.sessionId;
      if (id !== undefined && this.#sessions.get(id) === session) this.#sessions.delete(id);
      // The streams end now; what the client does not read within the grace is cut off.
      const cutOff = [...responses.keys()];
      void this.#end(session);
      setTimeout(() => {
        for (const open of cutOff) open.destroy();
      }, graceMs).unref();
    };
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && this.#sessions.get(id) === session) {
        this.#sessions.delete(id);
        this.#log.debug(`MCP session ${id} closed`);
      }
      grant.close();
    };
    await server.connect(transport);
    sendCounted(session, events);
    await this.#serve(session, request, response, body);
    // Anything but a good initialize leaves no session behind.
    if (!registered) await this.#end(session);
  }

  /** Ends a session: its MCP server and streams close, and its place under the cap is free. */
  async #end(session: McpSession): Promise<void> {
    session.grant.close();
    await session.server.close().catch(() => {});
  }

  /** `body` is the parsed POST body (undefined for GET and DELETE). */
  async #serve(
    session: McpSession,
    request: IncomingMessage,
    response: ServerResponse,
    body: unknown,
  ): Promise<void> {
    session.busy++;
    session.lastUsed = performance.now();
    const outgoing = countedOutgoing(response);
    session.responses.set(response, outgoing);
    response.once('close', () => session.responses.delete(response));
    try {
      if (request.method === 'POST') {
        const ids = requestIds(body);
        // What the SDK sends for these requests goes out on this response.
        for (const requestId of ids) session.streams.set(requestId, response);
        response.once('close', () => {
          for (const requestId of ids)
            if (session.streams.get(requestId) === response) session.streams.delete(requestId);
        });
        // SDK 1.x does not abort a handler when its SSE response closes, so a client that goes
        // away mid tools/call would leave its watch (and subscription) running until timeoutMs:
        // cancel its requests as a notifications/cancelled from the client would.
        if (ids.length > 0) {
          response.once('close', () => {
            if (response.writableFinished) return;
            for (const requestId of ids) {
              session.transport.onmessage?.({
                jsonrpc: '2.0',
                method: 'notifications/cancelled',
                params: { requestId, reason: 'the HTTP client disconnected before the answer' },
              });
            }
          });
        }
      } else if (request.method === 'GET') {
        claimStandalone(session, request, response);
      }
      await session.transport.handleRequest(request, response, body);
    } finally {
      session.busy--;
      session.lastUsed = performance.now();
    }
  }

  #sweep(): void {
    const now = performance.now();
    for (const [id, session] of this.#sessions) {
      if (session.busy > 0 || now - session.lastUsed < this.#options.idleMs) continue;
      this.#sessions.delete(id);
      this.#log.debug(`MCP session ${id} closed after ${this.#options.idleMs} ms idle`);
      void this.#end(session);
    }
  }
}

/**
 * The parts of SDK 1.x's web-standard transport (exact-pinned) that its send() uses for a
 * notification: the SSE stream of its request (or the standalone stream's id, for one of no
 * request) and the streams a client may resume.
 */
interface SdkStreams {
  readonly _standaloneSseStreamId: string;
  readonly _requestToStreamMapping: Map<string | number, string>;
  readonly _streamMapping: Map<
    string,
    {
      controller?: { enqueue(chunk: Uint8Array): void };
      encoder?: { encode(text: string): Uint8Array };
    }
  >;
  readonly _resumableStreams: Set<string>;
}

/** The SDK transport's streams, or undefined if they are not where this version keeps them. */
export function sdkStreams(transport: StreamableHTTPServerTransport): SdkStreams | undefined {
  const inner = (transport as unknown as { _webStandardTransport?: Partial<SdkStreams> })
    ._webStandardTransport;
  return typeof inner?._standaloneSseStreamId === 'string' &&
    inner._requestToStreamMapping instanceof Map &&
    inner._streamMapping instanceof Map &&
    inner._resumableStreams instanceof Set
    ? (inner as SdkStreams)
    : undefined;
}

/**
 * Makes a GET's response the session's standalone stream, if the SDK will serve it as that: a
 * GET without Last-Event-ID (or resuming an event of that stream) while none is open (the SDK
 * refuses a second one). What belongs to no request is then counted against this response, so
 * the hub's cap holds for the GET stream as for a request's.
 */
function claimStandalone(
  session: McpSession,
  request: IncomingMessage,
  response: ServerResponse,
): void {
  const streams = sdkStreams(session.transport);
  if (streams === undefined) return;
  const standaloneId = streams._standaloneSseStreamId;
  const header = request.headers['last-event-id'];
  const lastEventId = Array.isArray(header) ? header[0] : header;
  if (
    lastEventId !== undefined &&
    lastEventId !== '' &&
    streamOfEventId(lastEventId) !== standaloneId
  )
    return;
  if (streams._streamMapping.has(standaloneId)) return;
  session.standalone = response;
  response.once('close', () => {
    if (session.standalone === response) session.standalone = undefined;
  });
}

/**
 * Counts, per response, the bytes of each SSE event the SDK sends on it; and sends a
 * notification onto its SSE stream (its request's, or the standalone GET stream for one of no
 * request: a task's progress and status) as the SDK's send() would (stored for Last-Event-ID,
 * then the same event on the same stream, or on its response once the stream has caught up:
 * canWriteDirectly), without its per-message cost: it checks every message against two zod
 * schemas, failing (with issues built) for each notification, awaits the store and serialises
 * the message again. Either way the event's bytes count against its response, where the hub
 * sees them (unreadBytes): the SDK's streams queue without bound. Anything else, or a request
 * with no stream, goes through the SDK.
 */
function sendCounted(session: McpSession, events: BoundedEventStore): void {
  const transport = session.transport;
  const send = transport.send.bind(transport);
  const streams = sdkStreams(transport);
  transport.send = (message, options) => {
    const requestId =
      options?.relatedRequestId ??
      ('id' in message && !('method' in message) ? (message.id as string | number) : undefined);
    const response = requestId === undefined ? session.standalone : session.streams.get(requestId);
    const outgoing = response === undefined ? undefined : session.responses.get(response);
    const streamId =
      streams === undefined || 'id' in message || !('method' in message)
        ? undefined
        : requestId === undefined
          ? streams._standaloneSseStreamId
          : streams._requestToStreamMapping.get(requestId);
    if (streams !== undefined && streamId !== undefined) {
      const json = JSON.stringify(message);
      // Kept even when the stream is gone, for the client that resumes it.
      const eventId = events.keep(streamId, message, json.length);
      const stream = streams._streamMapping.get(streamId);
      if (stream?.controller !== undefined && stream.encoder !== undefined) {
        try {
          const text = `event: message\nid: ${eventId}\ndata: ${json}\n\n`;
          if (
            response !== undefined &&
            outgoing !== undefined &&
            canWriteDirectly(response, outgoing)
          ) {
            const bytes = Buffer.byteLength(text);
            outgoing.sent += bytes;
            outgoing.written += bytes;
            writeChunk(response, outgoing, text, bytes);
          } else {
            const event = stream.encoder.encode(text);
            stream.controller.enqueue(event);
            if (outgoing !== undefined) {
              outgoing.sent += event.byteLength;
              outgoing.enqueued++;
              outgoing.ours.add(event);
            }
          }
          // As the SDK's send(): a request's stream may replay its stored answer on a resume.
          if (requestId !== undefined) streams._resumableStreams.add(streamId);
        } catch (error) {
          // The stream closed: as the SDK's writeSSEEvent, reported and not thrown.
          transport.onerror?.(error as Error);
        }
      }
      // Written, queued on the stream or kept for a resume, now: the next may follow at once.
      return HANDED_ON;
    }
    // The SDK's SSE event: "event: message\nid: <id>\ndata: <json>\n\n" (the id is counted when
    // it reaches the response, as a baseline move).
    if (outgoing !== undefined) {
      outgoing.sent += Buffer.byteLength(JSON.stringify(message)) + SSE_EVENT_FRAMING_BYTES;
      outgoing.sdkSent = true;
    }
    return send(message, options);
  };
}

const SSE_EVENT_FRAMING_BYTES = 'event: message\ndata: \n\n'.length;

type JsonRead =
  | { ok: true; value: unknown }
  | { ok: false; status: number; error: McpErrorName; message: string };

/** The POST body as JSON, read here so that the ids of its requests are known. */
function readJson(request: IncomingMessage): Promise<JsonRead> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the cap, read on (so that the answer can be sent) but keep nothing.
      if (size <= MAX_MCP_BODY_BYTES) chunks.push(chunk);
    });
    request.once('error', reject);
    request.once('close', () => {
      if (!request.complete)
        reject(
          new BridgeError(
            'client_went_away',
            'the client went away before the whole request arrived',
          ),
        );
    });
    request.once('end', () => {
      if (size > MAX_MCP_BODY_BYTES) {
        resolve({
          ok: false,
          status: 413,
          error: 'refused',
          message: `the request body is larger than ${MAX_MCP_BODY_BYTES} bytes`,
        });
        return;
      }
      try {
        resolve({ ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      } catch {
        resolve({
          ok: false,
          status: 400,
          error: 'parse_error',
          message: 'Parse error: Invalid JSON',
        });
      }
    });
  });
}

/** The ids of the JSON-RPC requests (not notifications or responses) in a message or batch. */
function requestIds(body: unknown): Array<string | number> {
  const messages = Array.isArray(body) ? body : [body];
  const ids: Array<string | number> = [];
  for (const message of messages) {
    if (typeof message !== 'object' || message === null) continue;
    const { id, method } = message as { id?: unknown; method?: unknown };
    if (typeof method === 'string' && (typeof id === 'string' || typeof id === 'number'))
      ids.push(id);
  }
  return ids;
}

/**
 * Whether a POST belongs to the 2026-07-28 handler: one of its messages carries the
 * per-request envelope, or the header names such a revision (the handler then answers
 * the missing envelope). The 2.x package's isLegacyRequest, without loading it for 2025.
 */
function claimsModernRevision(request: IncomingMessage, body: unknown): boolean {
  const header = request.headers[PROTOCOL_VERSION_HEADER];
  return (
    isSessionlessRevision(Array.isArray(header) ? header[0] : header) ||
    claimsSessionlessRevision(body)
  );
}
