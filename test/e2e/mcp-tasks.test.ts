/**
 * watch_progress as a 2025-11-25 task (SEP-1686), driven by a raw JSON-RPC client over the
 * stdio of the real `mcp-progress mcp` and over the daemon's /mcp (a session, with its GET
 * stream), with real workers on the daemon's socket. Each scenario runs over both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import {
  progressFor,
  RAW_HTTP,
  RAW_STDIO,
  RAW_TRANSPORTS,
  type RawMcp,
  taskOnJob,
  untilStream,
} from '../helpers/raw-mcp.js';
import {
  publishingWorker,
  publishSteadily,
  type RawWorker,
  steadyJobResult,
} from '../helpers/worker.js';

const RELATED = 'io.modelcontextprotocol/related-task';

let daemon: RunningDaemon;
let counter = 0;
const token = (what: string) => `mcp-task-${what}-${process.pid}-${++counter}`;

beforeAll(async () => {
  daemon = await startDaemon(['--abandon-grace-ms', '0']);
});
afterAll(async () => {
  await daemon?.stop();
  cleanupAll();
});

/** Starts a task of watch_progress on `t`, with `label` as the caller's progressToken. */
async function startTask(mcp: RawMcp, t: string, label: string) {
  const reply = await mcp.request('tools/call', {
    name: 'watch_progress',
    arguments: { progressToken: t, minIntervalMs: 0 },
    task: { ttl: 120_000 },
    _meta: { progressToken: label },
  });
  expect(reply.error).toBeUndefined();
  return reply.result?.task as {
    taskId: string;
    status: string;
    ttl: number;
    pollInterval: number;
  };
}

async function getTask(mcp: RawMcp, taskId: string) {
  const reply = await mcp.request('tasks/get', { taskId });
  expect(reply.error).toBeUndefined();
  return reply.result as { status: string; statusMessage: string; taskId: string };
}

function publishing(t: string): Promise<RawWorker> {
  return publishingWorker(daemon.info.socket, t);
}

/** The notifications/tasks/status `mcp` was sent for `taskId`. */
function statusesOf(mcp: RawMcp, taskId: string) {
  return mcp.received.filter(
    (m) => m.method === 'notifications/tasks/status' && m.params?.taskId === taskId,
  );
}

describe.each(RAW_TRANSPORTS)('watch_progress as a 2025-11-25 task over $name', (transport) => {
  const jobTask = async (what: string) =>
    taskOnJob(await connect(), daemon.info.socket, token(what), `label-${what}`, startTask);
  const connect = () => transport.connect(daemon, '2025-11-25');

  it('declares tasks and marks watch_progress optional', async () => {
    const mcp = await connect();
    expect(mcp.opening.result?.capabilities).toMatchObject({
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    });
    const tools = (await mcp.request('tools/list')).result?.tools as Array<{
      name: string;
      execution?: { taskSupport?: string };
    }>;
    expect(tools.find((tool) => tool.name === 'watch_progress')?.execution).toEqual({
      taskSupport: 'optional',
    });
    await mcp.close();
  });

  it('creates a task at once, follows the stream in statusMessage, forwards progress until completed, and returns the plain result', async () => {
    const { mcp, t, worker, task, end } = await jobTask('ok');
    expect(task).toMatchObject({ status: 'working', ttl: 120_000, pollInterval: 1000 });
    await publishSteadily(worker, t, 4, async (step) => {
      await eventually(() =>
        progressFor(mcp, 'label-ok').some((m) => m.params?.progress === step * 10)
          ? true
          : undefined,
      );
      await new Promise((resolve) => setImmediate(resolve));
    });
    const forwarded = progressFor(mcp, 'label-ok');
    expect(forwarded.at(-1)?.params?._meta?.[RELATED]).toEqual({ taskId: task.taskId });
    const running = await eventually(async () => {
      const now = await getTask(mcp, task.taskId);
      return now.statusMessage.includes('left') ? now : undefined;
    });
    expect(running.status).toBe('working');
    expect(running.statusMessage).toContain('(40%)');
    expect(running.statusMessage).toContain('step 4');
    expect(running.statusMessage.length).toBeLessThan(200);
    const result = mcp.request('tasks/result', { taskId: task.taskId });
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    const final = await result;
    expect(final.result).toMatchObject({
      structuredContent: steadyJobResult(t, 4),
      _meta: { [RELATED]: { taskId: task.taskId } },
    });
    const status = await eventually(() =>
      mcp.received.find(
        (m) => m.method === 'notifications/tasks/status' && m.params?.taskId === task.taskId,
      ),
    );
    expect(status.params).toMatchObject({ status: 'completed' });
    expect((await getTask(mcp, task.taskId)).status).toBe('completed');
    // Nothing on the task's token after its status went terminal.
    const statusAt = mcp.received.indexOf(status);
    expect(
      mcp.received
        .slice(statusAt)
        .filter(
          (m) => m.method === 'notifications/progress' && m.params?.progressToken === 'label-ok',
        ),
    ).toEqual([]);
    await end();
  });

  it('cancel reaches the worker, answers cancelled, and stops the progress', async () => {
    const { mcp, t, worker, task, end } = await jobTask('cancel');
    const cancelled = await mcp.request('tasks/cancel', { taskId: task.taskId });
    expect(cancelled.result).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    const cancel = await worker.reply((envelope) => envelope.type === 'cancel');
    expect(cancel.data).toMatchObject({ progressToken: t });
    const before = progressFor(mcp, 'label-cancel').length;
    worker.send('progress', { v: 1, progressToken: t, progress: 50, total: 100 });
    // A read after the value (the cancelled task's statusMessage stays as at the cancel): the
    // daemon has it, yet the cancelled task forwards nothing.
    await untilStream(mcp, t, (stream) => stream.progress === 50);
    expect(progressFor(mcp, 'label-cancel').length).toBe(before);
    await end();
  });

  it('a cancel made elsewhere, once a tasks/get here has shown it, stops the progress at once and is told once', async () => {
    const { mcp, t, worker, task, end } = await jobTask('elsewhere');
    await eventually(() => (progressFor(mcp, 'label-elsewhere').length > 0 ? true : undefined));
    const gateway = await connectGateway(daemon.info);
    try {
      await gateway.request('task/cancel', { taskId: task.taskId });
      // This server knows now, well within the poll interval of its own look at the task.
      expect((await getTask(mcp, task.taskId)).status).toBe('cancelled');
      const before = progressFor(mcp, 'label-elsewhere').length;
      worker.send('progress', { v: 1, progressToken: t, progress: 50, total: 100 });
      await untilStream(mcp, t, (stream) => stream.progress === 50);
      expect(progressFor(mcp, 'label-elsewhere').length).toBe(before);
      const status = await eventually(() => statusesOf(mcp, task.taskId)[0]);
      expect(status.params).toMatchObject({ status: 'cancelled' });
      // Nothing of the task after its status.
      const statusAt = mcp.received.indexOf(status);
      expect(
        mcp.received.slice(statusAt).filter((m) => m.params?.progressToken === 'label-elsewhere'),
      ).toEqual([]);
      expect(statusesOf(mcp, task.taskId)).toHaveLength(1);
    } finally {
      await gateway.close();
      await end();
    }
  });

  it('fails with the reason when the worker is abandoned', async () => {
    const { mcp, worker, task, end } = await jobTask('abandoned');
    await eventually(() => (progressFor(mcp, 'label-abandoned').length > 0 ? true : undefined));
    worker.destroy();
    const failed = await eventually(async () => {
      const now = await getTask(mcp, task.taskId);
      return now.status === 'failed' ? now : undefined;
    });
    expect(failed.statusMessage).toMatch(/abandoned/);
    await end();
  });

  it('a new client (over stdio: a new mcp process) answers for a task the previous one created', async () => {
    const first = await connect();
    const t = token('restart');
    const worker = await publishing(t);
    const task = await startTask(first, t, 'label-restart');
    await first.close();
    const second = await connect();
    expect(await getTask(second, task.taskId)).toMatchObject({ status: 'working' });
    const listed = (await second.request('tasks/list')).result?.tasks as Array<{ taskId: string }>;
    expect(listed.map((listedTask) => listedTask.taskId)).toContain(task.taskId);
    worker.send('done', { v: 1, progressToken: t, status: 'ok' });
    const final = await second.request('tasks/result', { taskId: task.taskId });
    expect(final.result).toMatchObject({ structuredContent: { state: 'done', status: 'ok' } });
    worker.destroy();
    await second.close();
  });
});

describe('a 2025-11-25 task over stdio, where the order on the pipe is the order sent', () => {
  it('tells nothing of a new task before the answer that creates it: its first progress comes after that answer', async () => {
    const t = token('first');
    // A value the stream already has: the task's follow gets it at once, before the task exists.
    const worker = await publishing(t);
    const mcp = await RAW_STDIO.connect(daemon, '2025-11-25');
    try {
      const task = await startTask(mcp, t, 'label-first');
      const first = await eventually(() => progressFor(mcp, 'label-first')[0]);
      expect(first.params?._meta?.[RELATED]).toEqual({ taskId: task.taskId });
      const answerAt = mcp.received.findIndex(
        (m) => (m.result?.task as { taskId?: string } | undefined)?.taskId === task.taskId,
      );
      expect(answerAt).toBeGreaterThanOrEqual(0);
      expect(mcp.received.indexOf(first)).toBeGreaterThan(answerAt);
    } finally {
      worker.destroy();
      await mcp.close();
    }
  });
});

describe('a 2025-11-25 task on /mcp, in the daemon’s own process', () => {
  it('a cancel made elsewhere (the gateway’s task/cancel) stops the progress at once, with no look at the task, and is told once', async () => {
    const t = token('in-process');
    const worker = await publishing(t);
    const mcp = await RAW_HTTP.connect(daemon, '2025-11-25');
    const gateway = await connectGateway(daemon.info);
    try {
      const task = await startTask(mcp, t, 'label-in-process');
      await eventually(() => (progressFor(mcp, 'label-in-process').length > 0 ? true : undefined));
      await gateway.request('task/cancel', { taskId: task.taskId });
      const before = progressFor(mcp, 'label-in-process').length;
      worker.send('progress', { v: 1, progressToken: t, progress: 50, total: 100 });
      // Read well within the poll interval: only the daemon's own word can have stopped it.
      await untilStream(mcp, t, (stream) => stream.progress === 50);
      expect(progressFor(mcp, 'label-in-process').length).toBe(before);
      const status = await eventually(() => statusesOf(mcp, task.taskId)[0]);
      expect(status.params).toMatchObject({ status: 'cancelled' });
      expect(statusesOf(mcp, task.taskId)).toHaveLength(1);
    } finally {
      await gateway.close();
      worker.destroy();
      await mcp.close();
    }
  });
});
