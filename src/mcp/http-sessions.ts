/**
 * The MCP tools over Streamable HTTP at the daemon's /mcp. Responses are SSE
 * streams (never JSON-response mode), so progress notifications can flow on
 * the stream of the request they belong to. The endpoint checks the secret
 * and the Origin before a request gets here.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Logger } from '../shared/log.js';
import { createProgressMcpServer } from './mcp-server.js';
import type { ProgressSource } from './progress-source.js';

type EndpointLog = Pick<Logger, 'info' | 'warn' | 'debug'>;

export { MCP_PATH } from './http-path.js';

/** The largest POST body /mcp reads (the SDK transport's own default). */
export const MAX_MCP_BODY_BYTES = 4 * 1024 * 1024;

export interface McpHttpOptions {
  readonly source: ProgressSource;
  /** MCP sessions held at once; more are refused with 503 until one ends. */
  readonly maxSessions: number;
  /** A session with no request for this long is closed (clients that never send DELETE). */
  readonly idleMs: number;
  readonly defaultMinIntervalMs?: number | undefined;
}

interface McpSession {
  readonly server: McpServer;
  readonly transport: StreamableHTTPServerTransport;
  lastUsed: number;
  /** Requests being answered (an SSE stream open counts until it ends). */
  busy: number;
}

export class McpHttpSessions {
  readonly #options: McpHttpOptions;
  readonly #log: EndpointLog;
  readonly #sessions = new Map<string, McpSession>();
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(options: McpHttpOptions, log: EndpointLog) {
    this.#options = options;
    this.#log = log;
    this.#sweeper = setInterval(() => this.#sweep(), Math.max(1000, options.idleMs / 4));
    this.#sweeper.unref();
  }

  get sessionCount(): number {
    return this.#sessions.size;
  }

  /** Handles POST, GET and DELETE on /mcp. */
  handle(request: IncomingMessage, response: ServerResponse): void {
    this.#handle(request, response).catch((error: Error) => {
      this.#log.warn(`MCP over HTTP: ${error.message}`);
      if (!response.headersSent) {
        jsonRpcError(response, 500, -32603, `internal error: ${error.message}`);
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
    await Promise.all(sessions.map((session) => session.server.close().catch(() => {})));
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (this.#closed) {
      jsonRpcError(response, 503, -32000, 'the daemon is stopping');
      return;
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
          -32001,
          'session not found: it ended or the daemon restarted; initialize a new session',
        );
        return;
      }
      await this.#serve(session, request, response);
      return;
    }
    if (request.method !== 'POST') {
      jsonRpcError(
        response,
        400,
        -32000,
        'no Mcp-Session-Id header: start a session with an initialize request (POST)',
      );
      return;
    }
    if (this.#sessions.size >= this.#options.maxSessions) {
      jsonRpcError(
        response,
        503,
        -32000,
        `the daemon holds ${this.#sessions.size} MCP sessions, its cap (--max-sessions): end idle sessions first`,
      );
      return;
    }
    await this.#open(request, response);
  }

  /** A request without a session: the transport accepts only initialize, which creates one. */
  async #open(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const server = createProgressMcpServer({
      source: this.#options.source,
      defaultMinIntervalMs: this.#options.defaultMinIntervalMs,
    });
    let registered = false;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: false,
      onsessioninitialized: (id) => {
        registered = true;
        this.#sessions.set(id, session);
        this.#log.debug(`MCP session ${id} opened`);
      },
    });
    const session: McpSession = { server, transport, lastUsed: performance.now(), busy: 0 };
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && this.#sessions.get(id) === session) {
        this.#sessions.delete(id);
        this.#log.debug(`MCP session ${id} closed`);
      }
    };
    await server.connect(transport);
    await this.#serve(session, request, response);
    // Anything but a good initialize leaves no session behind.
    if (!registered) await server.close();
  }

  async #serve(
    session: McpSession,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<void> {
    session.busy++;
    session.lastUsed = performance.now();
    try {
      let body: unknown;
      if (request.method === 'POST') {
        const read = await readJson(request);
        if (!read.ok) {
          jsonRpcError(response, read.status, read.code, read.message);
          return;
        }
        body = read.value;
        // SDK 1.x does not abort a handler when its SSE response closes, so a client that goes
        // away mid tools/call would leave its watch (and subscription) running until timeoutMs:
        // cancel its requests as a notifications/cancelled from the client would.
        const ids = requestIds(body);
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
      session.server.close().catch(() => {});
    }
  }
}

type JsonRead =
  | { ok: true; value: unknown }
  | { ok: false; status: number; code: number; message: string };

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
      if (!request.complete) reject(new Error('the client went away before the whole request'));
    });
    request.once('end', () => {
      if (size > MAX_MCP_BODY_BYTES) {
        resolve({
          ok: false,
          status: 413,
          code: -32000,
          message: `the request body is larger than ${MAX_MCP_BODY_BYTES} bytes`,
        });
        return;
      }
      try {
        resolve({ ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      } catch {
        resolve({ ok: false, status: 400, code: -32700, message: 'Parse error: Invalid JSON' });
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

function jsonRpcError(
  response: ServerResponse,
  status: number,
  code: number,
  message: string,
): void {
  response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  response.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }));
}
