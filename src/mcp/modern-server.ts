/**
 * The same tools on @modelcontextprotocol/server 2.x, for clients of the
 * 2026-07-28 revision: they open with server/discover instead of initialize
 * and carry their version and capabilities in every request's _meta, with
 * no session. The 2025 revisions stay on the SDK 1.x server (mcp-server.ts).
 */
import { McpServer, type ServerContext } from '@modelcontextprotocol/server';
import { VERSION } from '../shared/version.js';
import {
  type ProgressServerOptions,
  progressTools,
  SERVER_INSTRUCTIONS,
  SERVER_NAME,
  type ToolRequest,
} from './mcp-server.js';

export function createModernProgressMcpServer(options: ProgressServerOptions): McpServer {
  const server = new McpServer(
    { name: SERVER_NAME, version: VERSION },
    { instructions: SERVER_INSTRUCTIONS },
  );
  for (const tool of progressTools(options)) {
    server.registerTool(
      tool.name,
      tool.config,
      (args: Record<string, unknown>, ctx: ServerContext) => tool.run(args, modernRequest(ctx)),
    );
  }
  return server;
}

function modernRequest(ctx: ServerContext): ToolRequest {
  const request = ctx.mcpReq;
  return {
    progressToken: request._meta?.progressToken,
    signal: request.signal,
    notify: (notification) => request.notify(notification),
    // 2026-07-28 has no server-to-client requests (ping included): the order of one
    // stream is the only guarantee, which is what the 2.x client needs (see the tests).
    ping: undefined,
  };
}
