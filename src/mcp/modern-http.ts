/**
 * /mcp for the 2026-07-28 revision: each POST is answered on its own by the
 * 2.x package's handler (createMcpHandler) from a fresh server, with no
 * session; progress flows on the POST's own SSE response, as for 2025.
 * Loaded only when such a request arrives.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { BridgeError } from '../shared/errors.js';
import type { ProgressServerOptions } from './mcp-server.js';
import { createModernProgressMcpServer } from './modern-server.js';
import {
  type ListenMessage,
  refusedListen,
  type TaskListenRequest,
  TaskListens,
  taskListenRequest,
} from './tasks-extension.js';

export class ModernMcpHttp {
  readonly #handler: McpHttpHandler;
  /** Every task listen stream of /mcp: a cancel on any request is told to them all. */
  readonly #listens: TaskListens;

  constructor(options: ProgressServerOptions) {
    this.#listens = new TaskListens(options.source);
    // 'reject': http-sessions.ts keeps serving the 2025 revisions with their sessions.
    this.#handler = createMcpHandler(() => createModernProgressMcpServer(options, this.#listens), {
      legacy: 'reject',
    });
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
    response.once('close', () => {
      if (!response.writableFinished) gone.abort();
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
    }
    const answer = await this.#handler.fetch(
      new Request(`http://${request.headers.host ?? 'localhost'}${request.url ?? '/mcp'}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: gone.signal,
      }),
      { parsedBody: body },
    );
    response.writeHead(answer.status, Object.fromEntries(answer.headers));
    if (answer.body === null) {
      response.end();
      return;
    }
    const reader = answer.body.getReader();
    const stop = () => reader.cancel().catch(() => {});
    response.once('close', stop);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        // Honour backpressure: an unread client must not grow the daemon.
        if (!response.write(value)) await writable(response);
      }
      response.end();
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

  /** Serves a listen for tasks as the POST's SSE stream, until the client closes it. */
  #listen(listen: TaskListenRequest, response: ServerResponse): void {
    if (!listen.declared) {
      // As the 2.x entry answers a missing capability: 400 with the JSON-RPC error.
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify(refusedListen(listen)));
      return;
    }
    response.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
    });
    const write = async (message: ListenMessage): Promise<void> => {
      if (response.destroyed || response.writableEnded)
        throw new BridgeError('client_went_away', 'the listen stream closed: the client went away');
      if (!response.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)) {
        await writable(response);
      }
      // The graceful end (the listen's result) closes the stream.
      if ('result' in message) response.end();
    };
    const gone = new AbortController();
    response.once('close', () => gone.abort());
    this.#listens.listen(listen, write, gone.signal).catch(() => response.destroy());
  }
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
