/**
 * watch_progress as a 2025-11-25 task, called by the one SDK client with a tasks API: SDK 1.x's
 * experimental one (client.experimental.tasks: callToolStream, getTask, getTaskResult,
 * cancelTask), over StdioClientTransport spawning the real `mcp-progress mcp` and over
 * StreamableHTTPClientTransport on the daemon's /mcp, with a real worker on the daemon's socket.
 * (@modelcontextprotocol/client 2.4.0 has no tasks API: docs/COMPATIBILITY.md.)
 */
import type { ResponseMessage } from '@modelcontextprotocol/sdk/shared/responseMessage.js';
import {
  CallToolResultSchema,
  type Progress,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TASK_TTL_MS, TASK_POLL_INTERVAL_MS } from '../../src/shared/defaults.js';
import { eventually } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import {
  connectHttp,
  connectStdio,
  progressParams,
  type TappedClient,
  unknownTokenErrors,
} from '../helpers/mcp.js';
import {
  publishingWorker,
  publishSteadily,
  type RawWorker,
  steadyJobResult,
} from '../helpers/worker.js';

/** No grace: a worker that leaves without done is abandoned at once. */
const daemon = daemonForFile(['--abandon-grace-ms', '0']);

let counter = 0;
const token = (what: string) => `mcp-task-sdk-${what}-${process.pid}-${++counter}`;

const TRANSPORTS = [
  {
    name: 'SDK 1.x client over stdio',
    connect: () => connectStdio(['--runtime-dir', daemon.runtimeDir]),
  },
  { name: 'SDK 1.x client over HTTP /mcp', connect: () => connectHttp(daemon.info) },
];

type Message = ResponseMessage<{ [key: string]: unknown }>;

/** One callToolStream of watch_progress, read as it comes: what it yielded, what onprogress saw. */
interface StreamedTask {
  readonly messages: Message[];
  readonly progress: Progress[];
  /** Its first message: the task, created. */
  readonly created: Promise<{ taskId: string; status: string }>;
  /** Its last message (a result or an error), once the stream ended. */
  readonly last: Promise<Message>;
  /** The first taskStatus whose task satisfies `holds`. */
  status(
    holds: (task: { status: string; statusMessage?: string | undefined }) => boolean,
    what: string,
  ): Promise<{ status: string; statusMessage?: string | undefined }>;
}

/**
 * watch_progress on `t` through callToolStream, with an onprogress. No `task` option: the
 * SDK makes it a task by itself, from tools/list's `execution.taskSupport` (listed first).
 */
async function streamTask(mcp: TappedClient, t: string): Promise<StreamedTask> {
  await mcp.client.listTools();
  const messages: Message[] = [];
  const progress: Progress[] = [];
  const stream = mcp.client.experimental.tasks.callToolStream(
    { name: 'watch_progress', arguments: { progressToken: t, minIntervalMs: 0 } },
    CallToolResultSchema,
    { onprogress: (value) => progress.push(value) },
  );
  const last = (async () => {
    for await (const message of stream) messages.push(message as Message);
    const end = messages.at(-1);
    if (end === undefined) throw new Error('callToolStream yielded nothing');
    return end;
  })();
  last.catch(() => {});
  const find = <T>(pick: (message: Message) => T | undefined, what: string) =>
    eventually(() => messages.map(pick).find((found) => found !== undefined), 15_000, what);
  return {
    messages,
    progress,
    created: find((m) => (m.type === 'taskCreated' ? m.task : undefined), 'taskCreated'),
    last,
    status: (holds, what) =>
      find((m) => (m.type === 'taskStatus' && holds(m.task) ? m.task : undefined), what),
  };
}

/** A worker publishing on a fresh token, a client of `transport`, a task of watch_progress on it. */
async function taskOnJob(transport: (typeof TRANSPORTS)[number], what: string) {
  const t = token(what);
  const worker: RawWorker = await publishingWorker(daemon.info.socket, t);
  const mcp = await transport.connect();
  const streamed = await streamTask(mcp, t);
  const task = await streamed.created;
  return {
    t,
    worker,
    mcp,
    streamed,
    task,
    tasks: mcp.client.experimental.tasks,
    async end() {
      worker.destroy();
      await mcp.close();
    },
  };
}

describe.each(TRANSPORTS)('watch_progress as a task, by the $name', (transport) => {
  it('callToolStream makes it a task; its statusMessage follows the stream with percentage and ETA, progress reaches onprogress; the result is the plain call’s; nothing after the end', async () => {
    const { t, worker, mcp, streamed, task, tasks, end } = await taskOnJob(transport, 'ok');
    expect(task).toMatchObject({
      status: 'working',
      ttl: DEFAULT_TASK_TTL_MS,
      pollInterval: TASK_POLL_INTERVAL_MS,
    });
    // Each step once onprogress has it: progress flows on the call's token while the task runs.
    await publishSteadily(worker, t, 4, (step) =>
      eventually(() =>
        streamed.progress.some((p) => p.progress === step * 10) ? true : undefined,
      ),
    );
    const running = await streamed.status(
      (now) => now.statusMessage?.includes('(40%)') === true && now.statusMessage.includes('left'),
      'a taskStatus at 40% with an ETA',
    );
    expect(running.status).toBe('working');
    expect(running.statusMessage).toMatch(/^"mcp-task-sdk-ok-.+" active at 40\/100 \(40%\), .+/);
    expect(running.statusMessage).toContain('step 4');
    expect(running.statusMessage?.length).toBeLessThan(200);
    // tasks/get says the same, its rate and ETA as of its own moment (the rate moves with time).
    const polled = (await tasks.getTask(task.taskId)).statusMessage;
    const withoutRate = (message: string | undefined) =>
      message?.replace(/, [\d.]+\/s, about .+? left:/, ', RATE:');
    expect(polled).toContain('left');
    expect(withoutRate(polled)).toBe(withoutRate(running.statusMessage));
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    const last = await streamed.last;
    if (last.type !== 'result') throw new Error(`the stream ended with ${last.type}`);
    expect(last.result.structuredContent).toMatchObject(steadyJobResult(t, 4));
    expect(streamed.messages.at(-2)).toMatchObject({
      type: 'taskStatus',
      task: { taskId: task.taskId, status: 'completed' },
    });
    // A plain call on the same job, now done, returns the same result.
    const plain = await mcp.client.callTool({
      name: 'watch_progress',
      arguments: { progressToken: t },
    });
    expect(last.result.content).toEqual(plain.content);
    // But for `updates`, a count of what one call received: the task's result is read from the
    // daemon, which counts none (the plain call counts the done it was answered with).
    const same = { ...(plain.structuredContent as object), updates: 0 };
    expect(last.result.structuredContent).toEqual(same);
    expect(await tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({
      content: plain.content,
      structuredContent: same,
    });
    // The values, in order, each once; none reported as an unknown token.
    const values = streamed.progress.map((p) => p.progress);
    expect(values.filter((v) => v > 0)).toEqual([10, 20, 30, 40]);
    expect(unknownTokenErrors(mcp)).toEqual([]);
    // Each names its task (io.modelcontextprotocol/related-task).
    const related = progressParams(mcp.received).map((params) => params._meta);
    expect(related.length).toBeGreaterThanOrEqual(4);
    expect(new Set(related.map((meta) => JSON.stringify(meta)))).toEqual(
      new Set([JSON.stringify({ [RELATED_TASK_META_KEY]: { taskId: task.taskId } })]),
    );
    // notifications/tasks/status said completed, and no progress came after it.
    const statusAt = mcp.received.findIndex(
      (m) =>
        'method' in m &&
        m.method === 'notifications/tasks/status' &&
        m.params?.taskId === task.taskId,
    );
    expect(mcp.received[statusAt]).toMatchObject({ params: { status: 'completed' } });
    expect(
      mcp.received
        .slice(statusAt)
        .filter((m) => 'method' in m && m.method === 'notifications/progress'),
    ).toEqual([]);
    await end();
  });

  it('cancelTask answers cancelled, reaches the worker, ends the stream, and stops the progress', async () => {
    const { t, worker, mcp, streamed, task, tasks, end } = await taskOnJob(transport, 'cancel');
    await eventually(() => (streamed.progress.length > 0 ? true : undefined));
    const cancelled = await tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    const cancel = await worker.reply((envelope) => envelope.type === 'cancel');
    expect(cancel.data).toMatchObject({ progressToken: t });
    const last = await streamed.last;
    expect(last.type).toBe('error');
    expect(last.type === 'error' ? last.error.message : '').toContain('was cancelled');
    const before = streamed.progress.length;
    worker.send('progress', { v: 1, progressToken: t, progress: 50, total: 100 });
    // A read after the value (the task's statusMessage stays as at the cancel): the daemon has
    // it, yet the cancelled task forwards nothing.
    await eventually(async () => {
      const read = await mcp.client.callTool({
        name: 'get_progress',
        arguments: { progressToken: t },
      });
      const stream = (read.structuredContent as { stream?: { progress?: number } }).stream;
      return stream?.progress === 50 ? true : undefined;
    });
    expect(streamed.progress).toHaveLength(before);
    expect((await tasks.getTask(task.taskId)).status).toBe('cancelled');
    await end();
  });

  it('fails with the reason when the worker is abandoned', async () => {
    const { worker, streamed, task, tasks, end } = await taskOnJob(transport, 'abandoned');
    await eventually(() => (streamed.progress.length > 0 ? true : undefined));
    worker.destroy();
    const failed = await streamed.status((now) => now.status === 'failed', 'a failed taskStatus');
    expect(failed.statusMessage).toMatch(/abandoned/);
    const last = await streamed.last;
    expect(last.type === 'error' ? last.error.message : last.type).toContain('failed');
    expect((await tasks.getTask(task.taskId)).status).toBe('failed');
    // tasks/result of a failed task: the plain call's result for the abandoned job.
    expect(await tasks.getTaskResult(task.taskId, CallToolResultSchema)).toMatchObject({
      structuredContent: { state: 'done', status: 'abandoned' },
    });
    await end();
  });

  it('a new client (over stdio: a new mcp process) answers getTask and getTaskResult for a task the previous one created', async () => {
    const { t, worker, mcp, task } = await taskOnJob(transport, 'restart');
    await mcp.close();
    const second = await transport.connect();
    const tasks = second.client.experimental.tasks;
    expect(await tasks.getTask(task.taskId)).toMatchObject({ status: 'working' });
    expect((await tasks.listTasks()).tasks.map((listed) => listed.taskId)).toContain(task.taskId);
    const result = tasks.getTaskResult(task.taskId, CallToolResultSchema);
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    expect((await result).structuredContent).toMatchObject({ state: 'done', status: 'ok' });
    worker.destroy();
    await second.close();
  });
});
