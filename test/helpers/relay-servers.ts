/**
 * Someone else's MCP server, written with the SDK 1.x or the v2 server
 * package, hosted over Streamable HTTP on loopback. Its one tool, `render`,
 * is whatever the test passes: with relayProgress or without the bridge.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import {
  McpServer as McpServerV2,
  type ServerContext,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import * as z from 'zod';
import type { RelayedTaskHandler } from '../../src/mcp/relay-task.js';

export interface RenderArgs {
  steps: number;
  waitCancel?: boolean | undefined;
  /** The worker publishes only steps 1..stopAt (of `steps`), then waits for cancel or exits without done. */
  stopAt?: number | undefined;
}

export type ExtraV1 = RequestHandlerExtra<ServerRequest, ServerNotification>;
export type RenderV1 = (args: RenderArgs, extra: ExtraV1) => Promise<string>;
export type RenderV2 = (args: RenderArgs, ctx: ServerContext) => Promise<string>;

export interface HostedServer {
  readonly url: URL;
  close(): Promise<void>;
}

const DESCRIPTION = 'Renders a few frames in a worker process.';
/** The render tool's arguments, for both SDKs (1.x takes the shape, 2.x the object). */
const RENDER_INPUT = {
  steps: z.int().min(1),
  waitCancel: z.boolean().optional(),
  stopAt: z.int().min(1).optional(),
};
const textResult = (text: string) => ({ content: [{ type: 'text' as const, text }] });
/** A transport of each SDK keyed by a fresh session id, reporting it once initialized. */
const sessionOptions = (onsessioninitialized: (sessionId: string) => void) => ({
  sessionIdGenerator: () => randomUUID(),
  onsessioninitialized,
});

/**
 * One server and transport per MCP session, opened at the session's first request (its
 * initialize) and found again by its mcp-session-id.
 */
function perSession<Transport>(
  open: (
    onsessioninitialized: (sessionId: string) => void,
  ) => Promise<{ transport: Transport; close(): Promise<void> }>,
) {
  const sessions = new Map<string, Transport>();
  const closers: Array<() => Promise<void>> = [];
  return {
    async transportFor(request: IncomingMessage): Promise<Transport> {
      const id = request.headers['mcp-session-id'];
      const known = typeof id === 'string' ? sessions.get(id) : undefined;
      if (known !== undefined) return known;
      const opened = await open((sessionId) => sessions.set(sessionId, opened.transport));
      closers.push(opened.close);
      return opened.transport;
    },
    async closeAll(): Promise<void> {
      await Promise.all(closers.map((close) => close()));
    },
  };
}

/** A server built with @modelcontextprotocol/sdk 1.x: one McpServer per session. */
export function hostV1(render: RenderV1): Promise<HostedServer> {
  const sessions = perSession(async (onsessioninitialized) => {
    const server = new McpServerV1({ name: 'render-server', version: '1.0.0' });
    server.registerTool(
      'render',
      { description: DESCRIPTION, inputSchema: RENDER_INPUT },
      async (args, extra) => textResult(await render(args, extra)),
    );
    const transport = new StreamableHTTPServerTransport(sessionOptions(onsessioninitialized));
    await server.connect(transport);
    return { transport, close: () => server.close() };
  });
  return serveOnLoopback(
    async (request, response) => {
      await (await sessions.transportFor(request)).handleRequest(request, response);
    },
    () => sessions.closeAll(),
  );
}

/**
 * A server built with @modelcontextprotocol/sdk 1.x whose render tool is a task
 * (taskSupport "optional", SDK 1.x experimental tasks), one task store for all sessions.
 */
export function hostV1Tasks(handler: RelayedTaskHandler<RenderArgs>): Promise<HostedServer> {
  const taskStore = new InMemoryTaskStore();
  const sessions = perSession(async (onsessioninitialized) => {
    const server = new McpServerV1(
      { name: 'render-server', version: '1.0.0' },
      {
        capabilities: { tasks: { requests: { tools: { call: {} } }, cancel: {}, list: {} } },
        taskStore,
      },
    );
    server.experimental.tasks.registerToolTask(
      'render',
      {
        description: DESCRIPTION,
        inputSchema: RENDER_INPUT,
        execution: { taskSupport: 'optional' },
      },
      handler,
    );
    const transport = new StreamableHTTPServerTransport(sessionOptions(onsessioninitialized));
    await server.connect(transport);
    return { transport, close: () => server.close() };
  });
  return serveOnLoopback(
    async (request, response) => {
      await (await sessions.transportFor(request)).handleRequest(request, response);
    },
    async () => {
      await sessions.closeAll();
      taskStore.cleanup();
    },
  );
}

/** A server built with the v2 server package (@modelcontextprotocol/server), web-standard transport. */
export function hostV2(render: RenderV2): Promise<HostedServer> {
  const sessions = perSession(async (onsessioninitialized) => {
    const server = new McpServerV2({ name: 'render-server', version: '2.0.0' });
    server.registerTool(
      'render',
      { description: DESCRIPTION, inputSchema: z.object(RENDER_INPUT) },
      async (args, ctx) => textResult(await render(args, ctx)),
    );
    const transport = new WebStandardStreamableHTTPServerTransport(
      sessionOptions(onsessioninitialized),
    );
    await server.connect(transport);
    return { transport, close: () => server.close() };
  });
  return serveOnLoopback(
    async (request, response) => {
      const transport = await sessions.transportFor(request);
      await sendWebResponse(response, await transport.handleRequest(await webRequest(request)));
    },
    () => sessions.closeAll(),
  );
}

/**
 * Serves `handle` over HTTP on a loopback port at /mcp; a failed request is answered 500 with
 * its stack. `close` closes the servers, then the connections, then the port.
 */
export async function serveOnLoopback(
  handle: (request: IncomingMessage, response: ServerResponse) => Promise<void>,
  closeServers: () => Promise<void>,
  { standaloneStream = false } = {},
): Promise<HostedServer> {
  const http: Server = createServer((request, response) => {
    if (request.method === 'GET' && !standaloneStream) {
      // No standalone SSE stream: a notification not sent on its request's own stream is lost,
      // so the tests see only what the relay sent through the request-scoped send.
      response.writeHead(405, { allow: 'POST, DELETE' }).end();
      return;
    }
    handle(request, response).catch((error: Error) => {
      if (!response.headersSent) response.writeHead(500);
      response.end(String(error.stack));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    async close() {
      await closeServers();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** Node's request as a web Request, for the web-standard transport. */
export async function webRequest(request: IncomingMessage): Promise<Request> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.set(name, value);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
  return new Request(new URL(request.url ?? '/', 'http://127.0.0.1'), {
    method: request.method ?? 'GET',
    headers,
    ...(body !== undefined && request.method !== 'GET' ? { body } : {}),
  });
}

export async function sendWebResponse(response: ServerResponse, web: Response): Promise<void> {
  response.writeHead(web.status, Object.fromEntries(web.headers));
  response.flushHeaders();
  if (web.body !== null) {
    const reader = web.body.getReader();
    response.on('close', () => {
      reader.cancel().catch(() => {});
    });
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      response.write(value);
    }
  }
  response.end();
}
