/**
 * The same tools on @modelcontextprotocol/server 2.x, for clients of the
 * 2026-07-28 revision: they open with server/discover instead of initialize
 * and carry their version and capabilities in every request's _meta, with
 * no session. The 2025 revisions stay on the SDK 1.x server (mcp-server.ts).
 * watch_progress is also a task here, through the tasks extension (tasks-extension.ts).
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
import {
  serveTasksExtension,
  TASKS_EXTENSION_CAPABILITIES,
  TaskListens,
} from './tasks-extension.js';

/** The listen streams of each server that owns its own (one per stdio connection). */
const ownListens = new WeakMap<McpServer, TaskListens>();

/**
 * A 2.x server of the tools. `listens`: the task listen streams it tells of its cancels, when
 * they outlive it (/mcp builds a server per request); none: its own, ended when it closes.
 */
export function createModernProgressMcpServer(
  options: ProgressServerOptions,
  listens?: TaskListens,
): McpServer {
  const server = new McpServer(
    { name: SERVER_NAME, version: VERSION },
    { instructions: SERVER_INSTRUCTIONS, capabilities: TASKS_EXTENSION_CAPABILITIES },
  );
  const tools = progressTools(options);
  for (const tool of tools) {
    server.registerTool(
      tool.name,
      tool.config,
      (args: Record<string, unknown>, ctx: ServerContext) => tool.run(args, modernRequest(ctx)),
    );
  }
  // Its own: one stdio connection's, capped at MAX_STDIO_TASK_LISTENS.
  const taskListens = listens ?? new TaskListens(options.source, true);
  serveTasksExtension(server, options.source, tools, taskListens);
  if (listens === undefined) {
    ownListens.set(server, taskListens);
    const close = server.close.bind(server);
    server.close = async () => {
      await taskListens.close();
      await close();
    };
  }
  return server;
}

/** The task listen streams a server made by createModernProgressMcpServer serves on its own. */
export function taskListensOf(server: McpServer): TaskListens | undefined {
  return ownListens.get(server);
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
