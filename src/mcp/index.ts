/**
 * mcp-progress-bridge/mcp: the MCP side of the bridge for Node programs.
 * relayProgress for tool handlers of your own MCP server, and the server
 * that `mcp-progress mcp` runs, for embedding.
 */
export {
  createProgressMcpServer,
  DEFAULT_WATCH_TIMEOUT_MS,
  type ProgressServerOptions,
} from './mcp-server.js';
export {
  type ProgressSession,
  type ProgressSource,
  RemoteProgressSource,
} from './progress-source.js';
export {
  DEFAULT_RELAY_MIN_INTERVAL_MS,
  type McpProgressNotification,
  type ProgressRelay,
  type RelayContext,
  type RelayEnv,
  type RelayOptions,
  relayProgress,
  type SdkV1RequestContext,
  type SdkV2RequestContext,
} from './relay.js';
export {
  type RelayedTaskHandler,
  type RelayedWork,
  type RelayTaskOptions,
  relayTask,
} from './relay-task.js';
