/** Messages between the harness and the helpers of the MCP-path workload. */
import type { LatencySummary } from './stats.ts';

export interface McpWorkerConfig {
  /** bridge: the Node client on the daemon's socket; telemetry: mcp-telemetry's SDK on its collector. */
  kind: 'bridge' | 'telemetry';
  socket: string;
  /** The bridge's token; for the relay it comes later, in a `token` message. */
  token?: string | undefined;
}

export interface McpWorkerDone {
  type: 'sent';
  sent: number;
  /** Host monotonic clock, microseconds: when the last update was handed to the client library. */
  lastUpdateUs: number;
  /** When the worker's done came back (the bridge's ack; mcp-telemetry's drain). */
  doneAckUs: number;
  warmups: number;
}

export interface McpClientConfig {
  command: string;
  args: string[];
  cwd?: string | undefined;
  env: Record<string, string>;
  tool: string;
  toolArgs: Record<string, unknown>;
  /** The server prints `ROUTE {env}` on stderr for the worker (the relay). */
  routeOnStderr: boolean;
}

export interface McpClientReady {
  type: 'ready';
  serverPid: number;
  /** From spawning the server to the `initialize` result, milliseconds. */
  startupMs: number;
}

export interface McpClientResult {
  type: 'result';
  /** Notifications of measured updates (`n=<i> t=<us>` in the message). */
  measured: number;
  /** Every progress notification the call received, warm-ups and the peer's extras included. */
  notifications: number;
  /** The highest n seen, and whether n only ever increased. */
  lastN: number;
  outOfOrder: number;
  /** When the tool result arrived, host monotonic microseconds. */
  resultAtUs: number;
  /**
   * Progress notifications the client got after the result, or that the SDK
   * dropped as an unknown token because they came in one read with it.
   */
  afterResult: number;
  latency: LatencySummary;
  isError: boolean;
  errors: string[];
}
