/**
 * /mcp for the 2026-07-28 revision: each POST is answered on its own by the
 * 2.x package's handler (createMcpHandler) from a fresh server, with no
 * session; progress flows on the POST's own SSE response, as for 2025.
 * Loaded only when such a request arrives.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { ProgressServerOptions } from './mcp-server.js';
import { createModernProgressMcpServer } from './modern-server.js';

export class ModernMcpHttp {
  readonly #handler: McpHttpHandler;

  constructor(options: ProgressServerOptions) {
    // 'reject': http-sessions.ts keeps serving the 2025 revisions with their sessions.
    this.#handler = createMcpHandler(() => createModernProgressMcpServer(options), {
      legacy: 'reject',
    });
  }

  /** Answers one POST whose body the caller already read and parsed. */
  async serve(request: IncomingMessage, response: ServerResponse, body: unknown): Promise<void> {
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
    await this.#handler.close();
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
