/**
 * relayTask: a tool of someone else's SDK 1.x server, registered as a task
 * (experimental registerToolTask), relays its worker's progress into the
 * task's statusMessage. Driven over Streamable HTTP by both SDK lines'
 * clients (1.x's experimental tasks API; the 2.x client has none, so its
 * generic request), with a real Python worker and a real daemon.
 */
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/experimental/tasks';
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  GetTaskResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { relayTask } from '../../src/mcp/index.js';
import { eventually } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectUrl, runWorker, textOf } from '../helpers/mcp.js';
import { connectUrlV2 } from '../helpers/mcp-v2.js';
import { hostV1Tasks, type RenderArgs } from '../helpers/relay-servers.js';

/** A short abandonment grace: a worker that exits without done fails its task soon. */
const daemon = daemonForFile(['--abandon-grace-ms', '300']);

interface TaskView {
  taskId: string;
  status: string;
  statusMessage?: string | undefined;
  pollInterval?: number | undefined;
}

interface ToolResult {
  content: Array<{ type: string; text?: string }>;
  isError?: boolean | undefined;
}

/** What a test does with a client of either SDK line. */
interface TaskClient {
  /** tools/call with params.task: the CreateTaskResult's task. */
  callAsTask(args: RenderArgs): Promise<TaskView>;
  /** tools/call without params.task: the tool's result (the server polls its own task). */
  call(args: RenderArgs): Promise<ToolResult>;
  get(taskId: string): Promise<TaskView>;
  result(taskId: string): Promise<ToolResult>;
  cancel(taskId: string): Promise<TaskView>;
  close(): Promise<void>;
}

const TTL_MS = 60_000;
const callParams = (args: RenderArgs, task?: { ttl: number }) => ({
  name: 'render',
  arguments: { ...args },
  ...(task === undefined ? {} : { task }),
});

async function sdkV1Client(url: URL): Promise<TaskClient> {
  const { client } = await connectUrl(url);
  const tasks = client.experimental.tasks;
  return {
    callAsTask: async (args) =>
      (
        await client.request(
          { method: 'tools/call', params: callParams(args, { ttl: TTL_MS }) },
          CreateTaskResultSchema,
        )
      ).task,
    call: (args) => client.callTool(callParams(args)) as Promise<ToolResult>,
    get: (taskId) => tasks.getTask(taskId),
    result: (taskId) => tasks.getTaskResult(taskId, CallToolResultSchema),
    cancel: (taskId) => tasks.cancelTask(taskId),
    close: () => client.close(),
  };
}

async function sdkV2Client(url: URL): Promise<TaskClient> {
  // 2.4.0 speaks 2025-11-25 tasks only as types: the requests go through its generic request().
  const { client } = await connectUrlV2(url, 'legacy');
  return {
    callAsTask: async (args) =>
      (
        await client.request(
          { method: 'tools/call', params: callParams(args, { ttl: TTL_MS }) },
          CreateTaskResultSchema,
        )
      ).task,
    call: (args) => client.callTool(callParams(args)) as Promise<ToolResult>,
    get: (taskId) =>
      client.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema),
    result: (taskId) =>
      client.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema),
    cancel: (taskId) =>
      client.request({ method: 'tasks/cancel', params: { taskId } }, CancelTaskResultSchema),
    close: () => client.close(),
  };
}

interface WorkerRecord {
  stdout: string;
  exited: Promise<number | null>;
}

/** The render tool as a relayed task: its worker publishes steps, the result names them. */
function renderTask(records: WorkerRecord[]) {
  return relayTask<RenderArgs>(
    async (args, relay) => {
      const record: WorkerRecord = { stdout: '', exited: Promise.resolve(null) };
      records.push(record);
      const worker = runWorker(
        relay.env,
        [
          String(args.steps),
          ...(args.waitCancel ? ['--wait-cancel'] : []),
          ...(args.stopAt === undefined ? [] : ['--stop-at', String(args.stopAt)]),
        ],
        (text) => {
          record.stdout += text;
        },
      );
      record.exited = worker.then((run) => run.code);
      const run = await worker;
      if (run.code !== 0) throw new Error(`the worker failed: ${run.stderr}`);
      await relay.done;
      return { content: [{ type: 'text', text: `rendered ${args.steps} frames` }] };
    },
    { runtimeDir: daemon.runtimeDir, minIntervalMs: 0, pollIntervalMs: 50 },
  );
}

const CLIENTS = [
  { name: 'SDK 1.x client (experimental tasks)', connect: sdkV1Client },
  { name: '@modelcontextprotocol/client 2.x', connect: sdkV2Client },
];

describe.each(CLIENTS)('relayTask in an SDK 1.x server, called by the $name', ({ connect }) => {
  /** A task server (hostV1Tasks) with an SDK client on it, for one test; both closed after it. */
  async function withTaskServer(
    test: (context: { records: WorkerRecord[]; client: TaskClient }) => Promise<void>,
  ): Promise<void> {
    const records: WorkerRecord[] = [];
    const server = await hostV1Tasks(renderTask(records));
    const client = await connect(server.url);
    try {
      await test({ records, client });
    } finally {
      await client.close();
      await server.close();
    }
  }

  it('the task is created at once, its statusMessage follows the worker, and cancel reaches it', () =>
    withTaskServer(async ({ records, client }) => {
      const task = await client.callAsTask({ steps: 4, stopAt: 2, waitCancel: true });
      expect(task).toMatchObject({ status: 'working', pollInterval: 50 });
      const following = await eventually(
        async () => {
          const now = await client.get(task.taskId);
          return now.statusMessage?.includes('step 2') ? now : undefined;
        },
        10_000,
        'the statusMessage to reach step 2',
      );
      expect(following.status).toBe('working');
      // describeStream's line: where, the percentage, the rate and ETA, the worker's message.
      expect(following.statusMessage).toMatch(
        /^"job" active at 2\/4 \(50%\), [\d.]+\/s, about .+ left: step 2$/,
      );
      expect(following.statusMessage?.length).toBeLessThanOrEqual(200);
      const cancelled = await client.cancel(task.taskId);
      expect(cancelled.status).toBe('cancelled');
      const record = await eventually(
        () => (records[0]?.stdout.includes('\n') ? records[0] : undefined),
        10_000,
        'the worker to print the cancel frame',
      );
      expect(JSON.parse(record.stdout)).toMatchObject({
        type: 'cancel',
        data: { reason: 'the MCP client cancelled the task' },
      });
      expect(await record.exited).toBe(0);
      expect((await client.get(task.taskId)).status).toBe('cancelled');
    }));

  it('completes with the tool result; a plain call gets the same result', () =>
    withTaskServer(async ({ client }) => {
      const task = await client.callAsTask({ steps: 3 });
      const result = await client.result(task.taskId);
      expect(textOf(result)).toBe('rendered 3 frames');
      expect(result.isError).toBeFalsy();
      const done = await client.get(task.taskId);
      expect(done.status).toBe('completed');
      expect(done.statusMessage).toMatch(/^"job" done \(ok\) at 3\/3 \(100%\) after .+: step 3$/);
      const plain = await client.call({ steps: 3 });
      expect(plain.content).toEqual(result.content);
    }));

  it('fails, with the reason, when the worker leaves without done (abandoned)', () =>
    withTaskServer(async ({ client }) => {
      const task = await client.callAsTask({ steps: 4, stopAt: 1 });
      const result = await client.result(task.taskId);
      expect(result.isError).toBe(true);
      expect(textOf(result)).toMatch(/^the worker ended abandoned/);
      const failed = await client.get(task.taskId);
      expect(failed.status).toBe('failed');
      expect(failed.statusMessage).toMatch(/^the worker ended abandoned/);
    }));
});
