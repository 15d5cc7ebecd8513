/** Messages between the harness and the helpers of the MCP-path workload. */
import type { LatencySummary } from './stats.ts';

export interface McpWorkerConfig {
  /**
   * bridge: the Node client on the daemon's socket; telemetry: mcp-telemetry's SDK on its
   * collector; floor: JSON lines on the floor relay's socket.
   */
  kind: 'bridge' | 'telemetry' | 'floor';
  socket: string;
  /** The bridge's token; for the relay it comes later, in a `token` message. */
  token?: string | undefined;
  /**
   * The bridge client's coalescing: 0 sends every update (the full-delivery rows); undefined is
   * the client's default, as a worker written against the client without options has it.
   */
  intervalMs?: number | undefined;
  /** The build whose Node client the bridge's worker imports: the --before build for its paths. */
  clientRoot: string;
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
  /** Instead of spawning the command: the daemon's /mcp over Streamable HTTP, with its secret. */
  http?: { url: string; secret: string } | undefined;
  /** Write every measured update's latency here: `<ms since the first> <latency ms>` lines. */
  samplesPath?: string | undefined;
  /** McpClientResult.steadyLatency leaves out the updates that arrived before this many ms had passed. */
  steadyFromMs?: number | undefined;
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
  /** When the notification with the highest n arrived, host monotonic microseconds. */
  finalAtUs: number;
  /** When the tool result arrived, host monotonic microseconds. */
  resultAtUs: number;
  /**
   * Progress notifications the client got after the result, or that the SDK
   * dropped as an unknown token because they came in one read with it.
   */
  afterResult: number;
  latency: LatencySummary;
  /** The same, of the updates that arrived from steadyFromMs after the first on: warm-up left out. */
  steadyLatency: LatencySummary;
  isError: boolean;
  errors: string[];
}
