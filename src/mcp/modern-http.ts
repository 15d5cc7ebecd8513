/**
 * /mcp for the 2026-07-28 revision: each POST is answered on its own by the
 * 2.x package's handler (createMcpHandler) from a fresh server, with no
 * session; progress flows on the POST's own SSE response, as for 2025.
 * Loaded only when such a request arrives.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { ListParams, ProgressToken } from '../protocol/frames.js';
import type { TaskCreateParams, TaskListParams } from '../protocol/tasks.js';
import { BridgeError } from '../shared/errors.js';
import { sessionRefused } from './json-rpc-error.js';
import type { ProgressServerOptions } from './mcp-server.js';
import { createModernProgressMcpServer } from './modern-server.js';
import type { ProgressSession, ProgressSource } from './progress-source.js';
import type { McpSessionGrant, McpSessionHost, McpSessionTransport } from './session-host.js';
import {
  type ListenMessage,
  refusedListen,
  type TaskListenRequest,
  TaskListens,
  taskListenRequest,
} from './tasks-extension.js';

export interface ModernMcpOptions extends ProgressServerOptions {
  /** The daemon's session hub: a request that watches progress, or a task listen, takes a place. */
  readonly host: McpSessionHost;
}

/**
 * The progress source of one 2026-07-28 request. What it reads comes from the daemon's source;
 * its first progress session takes a place from the hub, with the request's SSE response as the
 * transport, as a 2025 session does. So the hub's caps hold for it: --max-sessions, and a client
 * that leaves more than --max-session-buffer-bytes of the response unread is closed as a slow
 * consumer.
 */
class RequestSource implements ProgressSource {
  readonly #shared: ProgressSource;
  readonly #host: McpSessionHost;
  readonly #transport: McpSessionTransport;
  #grant: McpSessionGrant | undefined;
  #released = false;

  constructor(shared: ProgressSource, host: McpSessionHost, transport: McpSessionTransport) {
    this.#shared = shared;
    this.#host = host;
    this.#transport = transport;
  }

  async openSession(): Promise<ProgressSession> {
    if (this.#released)
      throw new BridgeError('client_went_away', 'the request ended: its client went away');
    if (this.#grant === undefined) {
      const grant = this.#host.open(this.#transport);
      if ('refused' in grant) throw new BridgeError(grant.code, grant.refused);
      this.#grant = grant;
    }
    return this.#grant.source.openSession();
  }

  list(params?: ListParams) {
    return this.#shared.list(params);
  }

  get(token: ProgressToken) {
    return this.#shared.get(token);
  }

  cancel(token: ProgressToken, reason?: string) {
    return this.#shared.cancel(token, reason);
  }

  createTask(params: TaskCreateParams) {
    return this.#shared.createTask(params);
  }

  getTask(taskId: string) {
    return this.#shared.getTask(taskId);
  }

  cancelTask(taskId: string, reason?: string) {
    return this.#shared.cancelTask(taskId, reason);
  }

  listTasks(params?: TaskListParams) {
    return this.#shared.listTasks(params);
  }

  /** The daemon's source outlives the request: closing gives the request's place back only. */
  async close(): Promise<void> {
    this.release();
  }

  /** The request is over: its place goes back to the hub, and with it its progress sessions. */
  release(): void {
    this.#released = true;
    this.#grant?.close();
    this.#grant = undefined;
  }
}

export class ModernMcpHttp {
  readonly #options: ModernMcpOptions;
  readonly #handler: McpHttpHandler;
  /** Every task listen stream of /mcp: a cancel on any request is told to them all. */
  readonly #listens: TaskListens;
  /** The source of each request in flight, by the Request the handler hands its server factory. */
  readonly #sources = new WeakMap<Request, RequestSource>();

  constructor(options: ModernMcpOptions) {
    this.#options = options;
    this.#listens = new TaskListens(options.source);
    // 'reject': http-sessions.ts keeps serving the 2025 revisions with their sessions.
    this.#handler = createMcpHandler(
      (context) => {
        const own = context.requestInfo && this.#sources.get(context.requestInfo);
        return createModernProgressMcpServer(
          { ...options, source: own ?? options.source },
          this.#listens,
        );
      },
      { legacy: 'reject' },
    );
  }

  /** Answers one POST whose body the caller already read and parsed. */
  async serve(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void> {
    // The 2.x entry serves subscriptions/listen itself and knows no task ids: such a listen is ours.
    const listen = taskListenRequest(body);
    if (listen !== undefined) {
      this.#listen(listen, response);
      return;
    }
    // A client that goes away mid tools/call aborts its watch (and the subscription) at once.
    const gone = new AbortController();
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    let slow = false;
    const source = new RequestSource(this.#options.source, this.#options.host, {
      // Read eagerly below, so what the client has not taken is all here.
      unreadBytes: () => response.writableLength,
      closeSlow: (graceMs) => {
        slow = true;
        // Ending the watch unsubscribes.
        endSlowly(response, graceMs, () => {
          gone.abort();
          reader?.cancel().catch(() => {});
        });
      },
    });
    response.once('close', () => {
      if (!response.writableFinished) gone.abort();
      source.release();
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
    }
    const asked = new Request(
      `http://${request.headers.host ?? 'localhost'}${request.url ?? '/mcp'}`,
      {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: gone.signal,
      },
    );
    this.#sources.set(asked, source);
    const answer = await this.#handler.fetch(asked, { parsedBody: body });
    if (slow || response.destroyed) {
      await answer.body?.cancel().catch(() => {});
      return;
    }
    response.writeHead(answer.status, Object.fromEntries(answer.headers));
    if (answer.body === null) {
      response.end();
      return;
    }
    reader = answer.body.getReader();
    const stop = () => reader?.cancel().catch(() => {});
    response.once('close', stop);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || slow) break;
        // Without waiting for drain: the 2.x transport queues whatever is not read, with no bound
        // of its own, so what the client leaves unread is held here, where the hub counts it
        // (unreadBytes) and closes the request past --max-session-buffer-bytes.
        response.write(value);
      }
      if (!slow) response.end();
    } catch {
      response.destroy();
    } finally {
      response.off('close', stop);
    }
  }

  async close(): Promise<void> {
    await this.#listens.close();
    await this.#handler.close();
  }

  /**
   * Serves a listen for tasks as the POST's SSE stream, until the client closes it. It takes a
   * place from the session hub with the response as the transport, as a request that watches
   * progress does, and its follows are members of that place: each of its messages repeats the
   * client's request id (as long as the body limit allows), one held per task when the client
   * stops reading, so unbounded it could pin hundreds of MiB.
   */
  #listen(listen: TaskListenRequest, response: ServerResponse): void {
    if (!listen.declared) {
      // As the 2.x entry answers a missing capability: 400 with the JSON-RPC error.
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify(refusedListen(listen)));
      return;
    }
    const gone = new AbortController();
    // Taken before anything is awaited, so admissions never overshoot the cap.
    const grant = this.#options.host.open({
      what: 'a task listen',
      unreadBytes: () => response.writableLength,
      // Ending the listen stops its follows.
      closeSlow: (graceMs) => endSlowly(response, graceMs, () => gone.abort()),
    });
    if ('refused' in grant) {
      // As /mcp answers an initialize then: 503, the JSON-RPC error naming the flag, or saying the daemon stops.
      sessionRefused(response, grant, listen.id);
      return;
    }
    response.once('close', () => {
      gone.abort();
      grant.close();
    });
    response.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
    });
    const write = async (message: ListenMessage): Promise<void> => {
      if (response.destroyed || response.writableEnded)
        throw new BridgeError('client_went_away', 'the listen stream closed: the client went away');
      const frame = `event: message\ndata: ${JSON.stringify(message)}\n\n`;
      // The listen's end (its result, or the error naming a task it could no longer tell of)
      // closes the stream at once: what the client has not read goes out after it, and the
      // daemon's stop cuts it off after its grace.
      if ('result' in message || 'error' in message) {
        response.end(frame);
        return;
      }
      const drained = response.write(frame);
      // No delivery of the hub made this write, so the cap is checked here: past it the listen
      // is closed as a slow consumer (closeSlow above), and nothing more is written to it.
      grant.closeIfSlow(Buffer.byteLength(frame));
      if (!drained) await writable(response);
    };
    this.#listens
      .listen(listen, write, { ended: gone.signal, sessions: grant.source })
      .catch(() => response.destroy());
  }
}

/**
 * Ends a response the hub closed as a slow consumer, out of the hub's delivery that calls this:
 * `stop` ends what feeds it; it ends after what it holds (or at once, before its headers), and
 * what the client does not read within the grace is cut off.
 */
function endSlowly(response: ServerResponse, graceMs: number, stop: () => void): void {
  queueMicrotask(() => {
    stop();
    if (response.headersSent) response.end();
    else response.destroy();
    setTimeout(() => response.destroy(), graceMs).unref();
  });
}

/** Settles when the response drains, or closes (the read that follows then ends). */
function writable(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const settle = () => {
      response.off('drain', settle);
      response.off('close', settle);
      resolve();
    };
    response.once('drain', settle);
    response.once('close', settle);
  });
}
