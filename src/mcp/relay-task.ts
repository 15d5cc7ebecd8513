/**
 * relayTask: relayProgress for a tool registered as an MCP task (2025-11-25,
 * SEP-1686) with the experimental tasks API of @modelcontextprotocol/sdk 1.x
 * (`server.experimental.tasks.registerToolTask`). The task is created at
 * once; the tool's work runs after the CreateTaskResult, with a relay whose
 * worker's progress becomes the task's statusMessage (message, percentage,
 * rate, ETA, from the daemon's summary of the stream); the work's result
 * completes the task, a throw or a worker that ended in error or abandoned
 * fails it, and tasks/cancel reaches the worker as progress/cancel.
 */
import type {
  CreateTaskRequestHandlerExtra,
  CreateTaskResult,
  TaskRequestHandlerExtra,
} from '@modelcontextprotocol/sdk/experimental/tasks';
import type { RequestTaskStore } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, GetTaskResult } from '@modelcontextprotocol/sdk/types.js';
import type { DoneParams, StreamSummary } from '../protocol/frames.js';
import { TASK_POLL_INTERVAL_MS } from '../shared/defaults.js';
import { describeStream, fitStatusMessage, view } from './describe.js';
import { PingRecord, type RequestChannel } from './forward.js';
import { openRelay, type ProgressRelay, type RelayOptions, warningsOf } from './relay.js';

export interface RelayTaskOptions extends RelayOptions {
  /** The pollInterval the task announces, and how often the relay checks it was cancelled (default {@link TASK_POLL_INTERVAL_MS}). */
  readonly pollIntervalMs?: number | undefined;
  /** What the statusMessage calls the job (default "job"): the worker's route key means nothing to a user. */
  readonly label?: string | undefined;
}

/** The tool's work: spawn the worker with `relay.env`, wait for it, return the tool's result. */
export type RelayedWork<Args> = (args: Args, relay: ProgressRelay) => Promise<CallToolResult>;

/** What `registerToolTask` takes as its handler (SDK 1.x ToolTaskHandler). */
export interface RelayedTaskHandler<Args> {
  createTask(args: Args, extra: CreateTaskRequestHandlerExtra): Promise<CreateTaskResult>;
  getTask(args: Args, extra: TaskRequestHandlerExtra): Promise<GetTaskResult>;
  getTaskResult(args: Args, extra: TaskRequestHandlerExtra): Promise<CallToolResult>;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * The handler for `server.experimental.tasks.registerToolTask(name, config, handler)`:
 * each call becomes a task whose status follows the worker that `work` runs.
 */
export function relayTask<Args>(
  work: RelayedWork<Args>,
  options: RelayTaskOptions = {},
): RelayedTaskHandler<Args> {
  const pollInterval = options.pollIntervalMs ?? TASK_POLL_INTERVAL_MS;
  return {
    async createTask(args, extra) {
      const store = extra.taskStore;
      const task = await store.createTask({ ttl: extra.taskRequestedTtl ?? null, pollInterval });
      // The task outlives this request: the work runs after the CreateTaskResult went out.
      void runTask(work, args, store, task.taskId, options, pollInterval);
      return { task };
    },
    getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) =>
      (await extra.taskStore.getTaskResult(extra.taskId)) as CallToolResult,
  };
}

async function runTask<Args>(
  work: RelayedWork<Args>,
  args: Args,
  store: RequestTaskStore,
  taskId: string,
  options: RelayTaskOptions,
  pollInterval: number,
): Promise<void> {
  const label = options.label ?? 'job';
  const cancelled = new AbortController();
  let stream: StreamLine = async () => undefined;
  const relay = await openRelay(
    (client, routeKey) => {
      stream = async () => {
        const summary = await client.get(routeKey).catch(() => undefined);
        return summary === undefined ? undefined : statusMessageOf(summary, label);
      };
      return statusChannel(stream, store, taskId, cancelled);
    },
    options,
    warningsOf(options),
    'the MCP client cancelled the task',
  );
  // The SDK's tasks/cancel only marks the task in its store: nothing tells the tool, so look.
  const watch = setInterval(() => {
    void isOver(store, taskId).then((over) => {
      if (over) cancelled.abort();
    });
  }, pollInterval);
  let outcome: { result: CallToolResult } | { thrown: unknown };
  try {
    outcome = { result: await work(args, relay) };
  } catch (thrown) {
    outcome = { thrown };
  } finally {
    clearInterval(watch);
  }
  // Read before the relay closes its client: a stream that is done says so, with its duration.
  const lastLine = await stream();
  await relay.close();
  if (await isOver(store, taskId)) return;
  const ending = endingOf(outcome, await relay.done, lastLine);
  try {
    if (ending.statusMessage !== undefined)
      await store.updateTaskStatus(taskId, 'working', ending.statusMessage);
    // Storing the result is what makes the task terminal.
    await store.storeTaskResult(taskId, ending.status, ending.result);
  } catch {
    // Cancelled (or expired) in between: the task already has its end.
  }
}

/** The statusMessage line for the relay's stream now; undefined before the daemon knows it. */
type StreamLine = () => Promise<string | undefined>;

/** A task's progress channel: each update the daemon forwards becomes the statusMessage. */
function statusChannel(
  stream: StreamLine,
  store: RequestTaskStore,
  taskId: string,
  cancelled: AbortController,
): RequestChannel {
  return {
    label: undefined,
    send: async () => {
      // The daemon's summary, not the update: it carries the rate and the ETA.
      const line = await stream();
      if (line === undefined) return;
      try {
        await store.updateTaskStatus(taskId, 'working', line);
      } catch {
        // The task is terminal (cancelled) or gone: stop the worker rather than the relay's sends.
        cancelled.abort();
      }
    },
    ping: undefined,
    pings: new PingRecord(),
    signal: cancelled.signal,
  };
}

/** describeStream's line for the stream, within MAX_STATUS_MESSAGE_CHARS. */
export function statusMessageOf(summary: StreamSummary, label: string): string {
  return fitStatusMessage(describeStream({ ...view(summary), progressToken: label }));
}

async function isOver(store: RequestTaskStore, taskId: string): Promise<boolean> {
  try {
    return TERMINAL.has((await store.getTask(taskId)).status);
  } catch {
    return true; // expired (its ttl) or removed: nothing is waiting for it any more
  }
}

interface Ending {
  status: 'completed' | 'failed';
  statusMessage: string | undefined;
  result: CallToolResult;
}

/**
 * How the task ends: the work's throw, then the worker's own end, then the work's result;
 * a failed task's statusMessage says why, a completed one's is the stream's last line.
 */
function endingOf(
  outcome: { result: CallToolResult } | { thrown: unknown },
  done: DoneParams | undefined,
  lastLine: string | undefined,
): Ending {
  if ('thrown' in outcome) {
    const reason =
      outcome.thrown instanceof Error ? outcome.thrown.message : String(outcome.thrown);
    return failed(`failed: ${reason}`);
  }
  if (done !== undefined && done.status !== 'ok') {
    return failed(
      `the worker ended ${done.status}${done.message === undefined ? '' : `: ${done.message}`}`,
    );
  }
  if (outcome.result.isError === true) {
    return {
      status: 'failed',
      statusMessage: 'failed: the tool returned an error',
      result: outcome.result,
    };
  }
  return { status: 'completed', statusMessage: lastLine, result: outcome.result };
}

function failed(reason: string): Ending {
  const statusMessage = fitStatusMessage(reason);
  return {
    status: 'failed',
    statusMessage,
    result: { content: [{ type: 'text', text: reason }], isError: true },
  };
}
