/**
 * The MCP face of the daemon: tools a model can call to watch, list and read
 * progress streams. Served over stdio by `mcp-progress mcp` and over
 * Streamable HTTP at the daemon's /mcp; both build it here.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CallToolRequest,
  EmptyResultSchema,
  ErrorCode,
  McpError,
  RELATED_TASK_META_KEY,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import {
  type ProgressToken,
  progressTokenSchema,
  type StreamSummary,
  streamEndStatusSchema,
  streamStateSchema,
} from '../protocol/frames.js';
import { MAX_LIST_LIMIT, MAX_MIN_INTERVAL_MS } from '../protocol/limits.js';
import {
  DEFAULT_LIST_TOOL_LIMIT,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_WATCH_TIMEOUT_MS,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { VERSION } from '../shared/version.js';
import {
  describeStream,
  describeWatch,
  show,
  streamView,
  view,
  type WatchResult,
  watchResult,
} from './describe.js';
import { forwardOnOwnSession, PingRecord, type RequestChannel } from './forward.js';
import type { ConfirmDelivery, SendProgress } from './progress-sends.js';
import type { ProgressSource } from './progress-source.js';
import { DaemonTaskStore } from './tasks.js';

export { type WatchResult, watchResult };

export const SERVER_NAME = 'mcp-progress-bridge';

export { DEFAULT_WATCH_TIMEOUT_MS };
export const MAX_WATCH_TIMEOUT_MS = 3_600_000;

export interface ProgressServerOptions {
  readonly source: ProgressSource;
  /** Coalescing interval of watch_progress when the caller does not choose one (default DEFAULT_MIN_INTERVAL_MS, 100). */
  readonly defaultMinIntervalMs?: number | undefined;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const tokenInput = progressTokenSchema.describe(
  'The progressToken the job publishes under: a string, or an integer. "7" and 7 are different tokens.',
);

const watchOutput = {
  progressToken: progressTokenSchema,
  state: streamStateSchema,
  timedOut: z
    .boolean()
    .describe('true when timeoutMs passed before the job finished; call watch_progress again'),
  progress: z.number().optional(),
  total: z.number().optional(),
  message: z.string().optional(),
  status: streamEndStatusSchema.optional(),
  durationMs: z.number().optional(),
  rate: z.number().optional().describe('When still running: progress units per second, when known'),
  etaMs: z.number().optional().describe('When still running: estimated ms to total, when known'),
  updates: z.int().min(0).describe('How many progress updates this call received'),
};

const getOutput = {
  progressToken: progressTokenSchema,
  found: z.boolean().describe('false when the daemon has no stream with this token'),
  stream: streamView.optional(),
};

const listOutput = {
  streams: z.array(streamView),
  nextCursor: z
    .string()
    .optional()
    .describe('More jobs follow: call list_progress again with this cursor for the next page'),
};

const listInput = {
  cursor: z
    .string()
    .max(64)
    .optional()
    .describe('The nextCursor of the previous list_progress result; omitted: the first page'),
  limit: z
    .int()
    .min(1)
    .max(MAX_LIST_LIMIT)
    .optional()
    .describe(`At most this many jobs (default ${DEFAULT_LIST_TOOL_LIMIT})`),
};

/** What a tool needs of the MCP request it answers, whichever SDK major serves it. */
export interface ToolRequest {
  /** The caller's own progressToken, when its request has one. */
  readonly progressToken: ProgressToken | undefined;
  readonly signal: AbortSignal;
  /** The request-scoped send (over Streamable HTTP: the request's own SSE stream). */
  readonly notify: SendProgress;
  /** Pings the client before the result; undefined where the revision has no server-to-client requests. */
  readonly ping: ConfirmDelivery | undefined;
}

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent: Record<string, unknown>;
}

/** One tool of the server, as data both SDK majors register (the SDK validates args first). */
export interface ProgressTool {
  readonly name: string;
  readonly config: {
    title: string;
    description: string;
    inputSchema: Record<string, z.ZodType>;
    outputSchema: Record<string, z.ZodType>;
    annotations: { readOnlyHint: boolean; openWorldHint: boolean };
  };
  run(args: Record<string, unknown>, request: ToolRequest): Promise<ToolResult>;
}

export const SERVER_INSTRUCTIONS =
  'Progress of long-running jobs (renders, training runs, builds) that publish to the mcp-progress daemon. ' +
  'list_progress shows what is running; watch_progress follows one job until it finishes; get_progress reads one job once.';

/** The SDK 1.x server, for the 2025 revisions (initialize). The 2026-07-28 one is in modern-server.ts. */
export function createProgressMcpServer(options: ProgressServerOptions): McpServer {
  let server: McpServer | undefined;
  const tasks = new DaemonTaskStore(options.source, async (notification, relatedTask) => {
    // The _meta is written here, not given as the SDK's relatedTask option: with that option
    // SDK 1.32.2 queues the notification for tasks/result instead of sending it now.
    const params =
      relatedTask === undefined
        ? notification.params
        : {
            ...notification.params,
            _meta: {
              ...(notification.params._meta as object | undefined),
              [RELATED_TASK_META_KEY]: { taskId: relatedTask },
            },
          };
    await server?.server.notification({ ...notification, params } as ServerNotification);
  });
  server = new McpServer(
    { name: SERVER_NAME, version: VERSION },
    {
      instructions: SERVER_INSTRUCTIONS,
      // 2025-11-25 tasks (SEP-1686): watch_progress may be called as a task; the store is the daemon's.
      capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: tasks,
    },
  );
  // One server per client session (stdio, or one /mcp session): what its client answers is remembered here.
  const tools = progressTools(options, new PingRecord());
  for (const tool of tools) {
    server.registerTool(tool.name, tool.config, (args: Record<string, unknown>, extra: Extra) =>
      tool.run(args, {
        progressToken: extra._meta?.progressToken,
        signal: extra.signal,
        notify: progressSender(server, extra),
        ping: (timeout) => extra.sendRequest({ method: 'ping' }, EmptyResultSchema, { timeout }),
      }),
    );
  }
  serveWatchAsTask(server, tasks, tools, options.defaultMinIntervalMs ?? DEFAULT_MIN_INTERVAL_MS);
  const close = server.close.bind(server);
  server.close = async () => {
    await tasks.close();
    await close();
  };
  // However the session ends: a client's DELETE on /mcp closes only its transport, not this
  // server, and its follows would go on looking at their tasks every poll interval.
  server.server.onclose = () => {
    tasks.close().catch(() => {});
  };
  return server;
}

/**
 * A request's progress notifications, sent as SDK 1.x's sendNotification sends them (the
 * transport's send, with the request's id, once the request is not cancelled) without its two
 * async functions, their promises and the message copies per update (in an A/B at 1,000 updates a
 * second: 6% of /mcp's CPU, 14% of the embedded mode's). A request of a task keeps the SDK's
 * path, which queues its notifications for tasks/result.
 */
export function progressSender(server: McpServer, extra: Extra): SendProgress {
  if (extra.taskId !== undefined) return (notification) => extra.sendNotification(notification);
  const options = { relatedRequestId: extra.requestId };
  return (notification) => {
    if (extra.signal.aborted) return NOTHING_SENT;
    const transport = server.server.transport;
    if (transport === undefined)
      return Promise.reject(
        new BridgeError('closed', 'the MCP session is not connected: its transport closed'),
      );
    return transport.send(
      { jsonrpc: '2.0', method: notification.method, params: notification.params },
      options,
    );
  };
}

const NOTHING_SENT = Promise.resolve();

type RawHandler = (request: { method: string; params?: unknown }, extra: Extra) => Promise<unknown>;

/**
 * When the answer to a request has been handed to the server's transport. SDK 1.x sends a
 * handler's answer some turns after the handler returns and tells no one, so the transport's
 * send is wrapped (once per transport) to see it go: the same message, the same promise back.
 */
class HandedAnswers {
  readonly #waiting = new Map<string | number, () => void>();
  #watched: Transport | undefined;

  /**
   * Settles once the answer to `requestId` went to `transport`'s send and that send settled, or
   * once none will go (`signal`: the request was cancelled, or its transport closed).
   */
  of(
    transport: Transport | undefined,
    requestId: string | number,
    signal: AbortSignal,
  ): Promise<void> {
    if (transport === undefined || signal.aborted) return Promise.resolve();
    this.#watch(transport);
    return new Promise<void>((resolve) => {
      const release = () => {
        this.#waiting.delete(requestId);
        signal.removeEventListener('abort', release);
        resolve();
      };
      this.#waiting.set(requestId, release);
      signal.addEventListener('abort', release, { once: true });
    });
  }

  #watch(transport: Transport): void {
    if (this.#watched === transport) return;
    this.#watched = transport;
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      const sent = send(message, options);
      if (
        this.#waiting.size > 0 &&
        'id' in message &&
        message.id !== undefined &&
        !('method' in message)
      ) {
        const release = this.#waiting.get(message.id);
        if (release !== undefined) sent.then(release, release);
      }
      return sent;
    };
  }
}

/**
 * watch_progress with `execution.taskSupport: "optional"`. SDK 1.32.2's McpServer ties that
 * setting to registerToolTask, whose plain calls are its own polling of the task: a plain
 * watch_progress would lose its progress notifications and its timeout. So the tool stays a
 * plain tool, and the server's tools/list and tools/call handlers are wrapped: the list says
 * "optional", and a call with `params.task` creates the daemon's task, which this session
 * follows (DaemonTaskStore.start), and answers at once.
 */
function serveWatchAsTask(
  server: McpServer,
  tasks: DaemonTaskStore,
  tools: readonly ProgressTool[],
  defaultMinIntervalMs: number,
): void {
  const watchArguments = watchTaskArguments(tools);
  const answers = new HandedAnswers();
  const handlers = sdkRequestHandlers<RawHandler>(server.server, '@modelcontextprotocol/sdk');
  const list = handlers.get('tools/list');
  const call = handlers.get('tools/call');
  handlers.set('tools/list', async (request, extra) => {
    const result = (await list(request, extra)) as {
      tools: Array<{ name: string; execution?: object }>;
    };
    for (const tool of result.tools)
      if (tool.name === WATCH_TOOL) tool.execution = { taskSupport: 'optional' };
    return result;
  });
  handlers.set('tools/call', async (request, extra) => {
    const params = request.params as CallToolRequest['params'] | undefined;
    if (params?.task === undefined || params.name !== WATCH_TOOL) return call(request, extra);
    const input = watchArguments(params.arguments);
    if (typeof input === 'string') throw new McpError(ErrorCode.InvalidParams, input);
    const ttl = params.task.ttl;
    const task = await tasks.start(ttl === undefined ? {} : { ttl }, request as CallToolRequest, {
      token: input.progressToken,
      label: params._meta?.progressToken,
      minIntervalMs: input.minIntervalMs ?? defaultMinIntervalMs,
      answered: answers.of(server.server.transport, extra.requestId, extra.signal),
    });
    return { task };
  });
}

/**
 * The request handlers an MCP SDK registered, by method, to wrap one: the 1.x Protocol and the
 * 2.x server's keep them alike, with no public getter. A missing one is another SDK version
 * than package.json pins (`sdk`): sdk_mismatch.
 */
export function sdkRequestHandlers<Handler>(protocol: object, sdk: string) {
  const handlers = (protocol as { _requestHandlers?: Map<string, Handler> })._requestHandlers;
  return {
    get(method: string): Handler {
      const handler = handlers?.get(method);
      if (handler === undefined) {
        throw new BridgeError(
          'sdk_mismatch',
          `${sdk} registered no ${method} handler: install the version package.json pins (npm ci)`,
        );
      }
      return handler;
    },
    set(method: string, handler: Handler): void {
      handlers?.set(method, handler);
    },
  };
}

/** The arguments of watch_progress called as a task, as its tool checks them. */
export interface WatchTaskArguments {
  readonly progressToken: ProgressToken;
  readonly minIntervalMs?: number;
}

/**
 * Checks the arguments of a watch_progress call made as a task (the SDK checks a plain call's):
 * the arguments, or what is wrong with them, for the caller's SDK to answer as invalid params.
 */
export function watchTaskArguments(
  tools: readonly ProgressTool[],
): (args: unknown) => WatchTaskArguments | string {
  const watchInput = z.object(
    tools.find((tool) => tool.name === WATCH_TOOL)?.config.inputSchema ?? {},
  );
  return (args) => {
    const parsed = watchInput.safeParse(args ?? {});
    if (parsed.success) return parsed.data as unknown as WatchTaskArguments;
    return `watch_progress: invalid arguments: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`;
  };
}

/**
 * The tools, defined once for every revision the server speaks. `pings` is
 * what this server's one client has shown about answering pings.
 */
export function progressTools(
  options: ProgressServerOptions,
  pings: PingRecord = new PingRecord(),
): ProgressTool[] {
  const { source } = options;
  const defaultMinIntervalMs = options.defaultMinIntervalMs ?? DEFAULT_MIN_INTERVAL_MS;
  return [watchTool(source, defaultMinIntervalMs, pings), listTool(source), getTool(source)];
}

export const WATCH_TOOL = 'watch_progress';

function watchTool(
  source: ProgressSource,
  defaultMinIntervalMs: number,
  pings: PingRecord,
): ProgressTool {
  return {
    name: WATCH_TOOL,
    config: {
      title: 'Watch a job until it finishes',
      description:
        "Follows one job's progress stream until the job is done, then returns its final state (progress, total, status, message, duration). " +
        'If the job has not started yet, waits for it. While waiting, every update is sent to you as an MCP progress notification under your own progressToken (when your request has one). ' +
        `Returns at timeoutMs (default ${DEFAULT_WATCH_TIMEOUT_MS}) with timedOut: true if the job is still running: that is not an error, call watch_progress again to keep watching. ` +
        'Use list_progress to find tokens, get_progress for one look without waiting.',
      inputSchema: {
        progressToken: tokenInput,
        timeoutMs: z
          .int()
          .min(0)
          .max(MAX_WATCH_TIMEOUT_MS)
          .optional()
          .describe(
            `How long to wait before returning the state so far (default ${DEFAULT_WATCH_TIMEOUT_MS} ms)`,
          ),
        minIntervalMs: z
          .int()
          .min(0)
          .max(MAX_MIN_INTERVAL_MS)
          .optional()
          .describe(
            `At most one progress notification per this many ms, always the newest (default ${defaultMinIntervalMs}; 0 sends every update)`,
          ),
      },
      outputSchema: watchOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async run(input, request) {
      const args = input as {
        progressToken: ProgressToken;
        timeoutMs?: number;
        minIntervalMs?: number;
      };
      const result = await watch(source, requestChannel(request, pings), {
        token: args.progressToken,
        timeoutMs: args.timeoutMs ?? DEFAULT_WATCH_TIMEOUT_MS,
        minIntervalMs: args.minIntervalMs ?? defaultMinIntervalMs,
      });
      return {
        content: [{ type: 'text' as const, text: describeWatch(result) }],
        structuredContent: result,
      };
    },
  };
}

function listTool(source: ProgressSource): ProgressTool {
  return {
    name: 'list_progress',
    config: {
      title: 'List jobs',
      description:
        'Lists the jobs publishing progress: running ones and those finished in the last minute or so, each with its token, state, last progress, total and message. ' +
        `At most ${DEFAULT_LIST_TOOL_LIMIT} per call unless limit says otherwise; nextCursor, when present, gives the next page. ` +
        'Pass a token to watch_progress or get_progress.',
      inputSchema: listInput,
      outputSchema: listOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async run(input) {
      const { cursor, limit } = input as { cursor?: string; limit?: number };
      const page = await source.list({
        ...(cursor === undefined ? {} : { cursor }),
        limit: limit ?? DEFAULT_LIST_TOOL_LIMIT,
      });
      return listAnswer(page.streams, page.nextCursor);
    },
  };
}

function getTool(source: ProgressSource): ProgressTool {
  return {
    name: 'get_progress',
    config: {
      title: "Read one job's progress",
      description:
        "Returns one job's last progress, total, message and state, without waiting. " +
        'For a token the daemon does not know, found is false (the job never published, or finished long enough ago to be forgotten).',
      inputSchema: { progressToken: tokenInput },
      outputSchema: getOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async run(input) {
      const { progressToken } = input as { progressToken: ProgressToken };
      return getAnswer(progressToken, await source.get(progressToken));
    },
  };
}

/**
 * The list_progress result for one page of streams: waiting ones (nothing published) left out;
 * with `nextCursor` when more follow, so that 45k streams are never one 9 MB result.
 */
export function listAnswer(streams: readonly StreamSummary[], nextCursor?: string) {
  const views = streams.filter((s) => s.state !== 'waiting').map(view);
  const lines = views.map((s) => describeStream(s));
  if (nextCursor !== undefined)
    lines.push(`More jobs follow: call list_progress with cursor ${JSON.stringify(nextCursor)}.`);
  const text = lines.length === 0 ? 'No jobs are publishing progress.' : lines.join('\n');
  return {
    content: [{ type: 'text' as const, text }],
    structuredContent:
      nextCursor === undefined ? { streams: views } : { streams: views, nextCursor },
  };
}

/** The get_progress result for a token and what the daemon has for it. */
export function getAnswer(token: ProgressToken, summary: StreamSummary | undefined) {
  if (summary === undefined || summary.state === 'waiting') {
    return {
      content: [
        {
          type: 'text' as const,
          text: `No job has token ${show(token)}: it has not published yet, or it finished long enough ago to be forgotten. list_progress shows the known jobs.`,
        },
      ],
      structuredContent: { progressToken: token, found: false },
    };
  }
  const stream = view(summary);
  return {
    content: [{ type: 'text' as const, text: describeStream(stream) }],
    structuredContent: { progressToken: token, found: true, stream },
  };
}

/** The request a tool call came in, as the forwarding loop sends into it. */
function requestChannel(request: ToolRequest, pings: PingRecord): RequestChannel {
  const callerToken = request.progressToken;
  return {
    label: callerToken,
    send: callerToken === undefined ? undefined : request.notify,
    ping: request.ping,
    pings,
    signal: request.signal,
  };
}

/**
 * Forwards the stream into the request (under the caller's token, so its
 * progress notifications are its own) and returns once the stream is done,
 * at the timeout, when the caller cancels or when a send fails. Nothing is
 * forwarded after it returns.
 */
async function watch(
  source: ProgressSource,
  channel: RequestChannel,
  request: { token: ProgressToken; timeoutMs: number; minIntervalMs: number },
): Promise<WatchResult> {
  const forwarding = await forwardOnOwnSession(
    source,
    { progressToken: request.token, minIntervalMs: request.minIntervalMs },
    channel,
  );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, request.timeoutMs);
  });
  await Promise.race([forwarding.ended, timedOut]);
  clearTimeout(timer);
  // Every notification goes out, and reaches the client's handler, before the result
  // (RESULT_CONFIRM_TIMEOUT_MS, RESULT_GAP_MS): MCP forbids progress after the result.
  await forwarding.stop();
  // The daemon went away for good: the call ends with that error, not at its timeout.
  if (forwarding.error !== undefined) throw forwarding.error;
  const summary = await source.get(request.token);
  return watchResult(
    request.token,
    forwarding.last,
    forwarding.doneParams,
    summary,
    forwarding.updates,
  );
}
