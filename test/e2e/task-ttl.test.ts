/**
 * A task's TTL against a real daemon, over the stdio of a real `mcp-progress mcp` and over /mcp,
 * by raw JSON-RPC: a task whose job is still working outlives its nominal TTL (2025-11-25 and
 * 2026-07-28), and a listen of a task whose TTL passes before its job started ends with an error
 * naming why, giving back its place in the daemon's session hub; and, with real SDK clients, a
 * task past its TTL is gone at once for every answer and leaves the daemon's memory on its own.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { connectHttp, connectWithTap, httpBase } from '../helpers/mcp.js';
import { NEWEST_REVISION } from '../helpers/mcp-v2.js';
import {
  CLIENT_CAPABILITIES,
  RAW_TRANSPORTS,
  type RawMcp,
  type RawMessage,
  TASKS_EXTENSION,
} from '../helpers/raw-mcp.js';
import { publishingWorker, type RawWorker, rawWorker, workerStatus } from '../helpers/worker.js';

const WITH_TASKS = { [CLIENT_CAPABILITIES]: { extensions: { [TASKS_EXTENSION]: {} } } };
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** The TTL asked for: well under how long each job below runs. */
const TTL_MS = 1500;
/** How long past its creation a job below keeps publishing: twice the TTL. */
const RUNS_MS = 2 * TTL_MS;

let daemon: RunningDaemon;
let gateway: GatewayClient;
let counter = 0;
const token = (what: string) => `task-ttl-${what}-${process.pid}-${++counter}`;

beforeAll(async () => {
  daemon = await startDaemon();
  gateway = await connectGateway(daemon.info);
});
afterAll(async () => {
  await gateway?.close();
  await daemon?.stop();
  cleanupAll();
});

interface GatewayTask {
  taskId: string;
  status: string;
  createdAt: number;
  ttlMs: number;
}

async function createTask(progressToken: string): Promise<GatewayTask> {
  const created = await gateway.request('task/create', { progressToken, ttlMs: TTL_MS });
  const task = (created.result as { task: GatewayTask }).task;
  expect(task).toMatchObject({ status: 'working', ttlMs: TTL_MS });
  return task;
}

/** The messages of listen `id`: its acknowledgement, its notifications, its end. */
function onListen(mcp: RawMcp, id: number): RawMessage[] {
  return mcp.received.filter(
    (m) => m.id === id || (m.params?._meta ?? m.result?._meta)?.[SUBSCRIPTION_ID] === id,
  );
}

/**
 * Publishes step after step on `t` (each acknowledged by the daemon) until `runsMs` have passed
 * since `since`, and after each asks `check` about the task: the job is working all along.
 */
async function publishUntil(
  worker: RawWorker,
  t: string,
  since: number,
  check: (step: number) => Promise<void>,
): Promise<number> {
  let step = 0;
  while (Date.now() - since < RUNS_MS) {
    step++;
    worker.send('progress', {
      v: 1,
      progressToken: t,
      progress: step,
      message: `step ${step}`,
      seq: step,
    });
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq?: number }).seq === step);
    await check(step);
  }
  return step;
}

describe.each(RAW_TRANSPORTS)('a task and its TTL over $name', (transport) => {
  it('a listen of a task whose TTL passes before its job starts ends with an error naming why, and gives back its place', async () => {
    const worker = await rawWorker(daemon.info.socket);
    const mcp = await transport.connect(daemon, NEWEST_REVISION);
    try {
      const task = await createTask(token('never'));
      // The client's own connection to the daemon is made before the count is taken.
      const got = await mcp.request('tasks/get', { taskId: task.taskId, _meta: WITH_TASKS });
      expect(got.result).toMatchObject({ status: 'working' });
      const sessions = async () => (await workerStatus<{ sessions: number }>(worker)).sessions;
      const before = await sessions();
      const id = mcp.send('subscriptions/listen', {
        notifications: { taskIds: [task.taskId] },
        _meta: WITH_TASKS,
      });
      // The listen holds a place of its own while it follows the task (/mcp: in the session hub).
      await eventually(async () => ((await sessions()) > before ? true : undefined));
      const end = await mcp.ended(id);
      expect(end.result).toBeUndefined();
      expect(end.error).toMatchObject({
        code: -32602,
        message: expect.stringContaining(task.taskId),
      });
      expect(end.error?.message).toContain('TTL');
      expect(end.error?.data).toEqual({ code: 'invalid_params', taskIds: [task.taskId] });
      // Acknowledged, told working, then the error: nothing else, nothing after.
      expect(onListen(mcp, id).map((m) => m.method ?? 'end')).toEqual([
        'notifications/subscriptions/acknowledged',
        'notifications/tasks',
        'end',
      ]);
      expect((await gateway.request('task/get', { taskId: task.taskId })).result).toEqual({});
      await eventually(async () => ((await sessions()) === before ? true : undefined));
    } finally {
      worker.destroy();
      await mcp.close();
    }
  }, 20_000);

  it('a listen of two tasks is told at once of the one whose TTL passes before its job starts, and goes on following the other', async () => {
    const t = token('other');
    const worker = await publishingWorker(daemon.info.socket, t);
    const mcp = await transport.connect(daemon, NEWEST_REVISION);
    try {
      const never = await createTask(token('never-of-two'));
      const created = await gateway.request('task/create', { progressToken: t });
      const other = (created.result as { task: GatewayTask }).task;
      const id = mcp.send('subscriptions/listen', {
        notifications: { taskIds: [never.taskId, other.taskId] },
        _meta: WITH_TASKS,
      });
      const toldOf = (taskId: string) =>
        onListen(mcp, id).filter(
          (m) => m.method === 'notifications/tasks' && m.params?.taskId === taskId,
        );
      // Told when the daemon no longer has it, as failed, with the error a listen of it alone
      // ends with; while the other task is still working.
      const failed = await eventually(
        () => toldOf(never.taskId).find((m) => m.params?.status === 'failed'),
        10_000,
        'the forgotten task told failed',
      );
      expect(failed.params?.error).toMatchObject({
        code: -32602,
        message: expect.stringContaining('TTL'),
        data: { code: 'invalid_params', taskIds: [never.taskId] },
      });
      expect(String(failed.params?.statusMessage)).toContain(never.taskId);
      expect(onListen(mcp, id).some((m) => m.id === id)).toBe(false);
      // The other task is still followed: each step, then its end, then the listen's end.
      worker.send('progress', {
        v: 1,
        progressToken: t,
        progress: 7,
        total: 100,
        message: 'seven',
      });
      await eventually(() =>
        toldOf(other.taskId).some((m) => String(m.params?.statusMessage).includes('seven'))
          ? true
          : undefined,
      );
      worker.send('done', { v: 1, progressToken: t, status: 'ok' });
      const end = await mcp.ended(id);
      expect(toldOf(other.taskId).at(-1)?.params).toMatchObject({ status: 'completed' });
      // The listen's end still names the task that went without its end told.
      expect(end.error).toMatchObject({ code: -32602 });
      expect(end.error?.data).toEqual({ code: 'invalid_params', taskIds: [never.taskId] });
      // Nothing more of the forgotten task after it was told failed.
      expect(toldOf(never.taskId).at(-1)).toBe(failed);
    } finally {
      worker.destroy();
      await mcp.close();
    }
  }, 20_000);

  it('a listen of a 2026-07-28 task whose job outlives its TTL tells each step, then the end and the result', async () => {
    const t = token('long-2026');
    const worker = await publishingWorker(daemon.info.socket, t);
    const mcp = await transport.connect(daemon, NEWEST_REVISION);
    try {
      const task = await createTask(t);
      const id = mcp.send('subscriptions/listen', {
        notifications: { taskIds: [task.taskId] },
        _meta: WITH_TASKS,
      });
      await publishUntil(worker, t, task.createdAt, async (step) => {
        await eventually(() =>
          onListen(mcp, id).some((m) => String(m.params?.statusMessage).includes(`step ${step}`))
            ? true
            : undefined,
        );
        const now = await mcp.request('tasks/get', { taskId: task.taskId, _meta: WITH_TASKS });
        expect(now.error).toBeUndefined();
        expect(now.result).toMatchObject({ status: 'working' });
        // Reported honestly: kept at least until createdAt + ttlMs, which is later than now.
        const ttlMs = Number(now.result?.ttlMs);
        expect(Date.parse(String(now.result?.createdAt)) + ttlMs).toBeGreaterThan(Date.now());
      });
      expect(Date.now() - task.createdAt).toBeGreaterThanOrEqual(RUNS_MS);
      worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
      const end = await mcp.ended(id);
      expect(end.result).toMatchObject({ resultType: 'complete' });
      const told = onListen(mcp, id).filter((m) => m.method === 'notifications/tasks');
      expect(told.at(-1)?.params).toMatchObject({
        status: 'completed',
        result: { structuredContent: { progressToken: t, status: 'ok', message: 'rendered' } },
      });
      const final = await mcp.request('tasks/get', { taskId: task.taskId, _meta: WITH_TASKS });
      expect(final.result).toMatchObject({ status: 'completed' });
      // Kept its TTL after its end, whatever its age.
      expect(Number(final.result?.ttlMs)).toBeGreaterThanOrEqual(RUNS_MS + TTL_MS);
    } finally {
      worker.destroy();
      await mcp.close();
    }
  }, 20_000);

  it('a 2025-11-25 task whose job outlives its TTL is working all along, then answers its result', async () => {
    const t = token('long-2025');
    const worker = await publishingWorker(daemon.info.socket, t);
    const mcp = await transport.connect(daemon, '2025-11-25');
    try {
      const reply = await mcp.request('tools/call', {
        name: 'watch_progress',
        arguments: { progressToken: t, minIntervalMs: 0 },
        task: { ttl: TTL_MS },
      });
      expect(reply.error).toBeUndefined();
      const task = reply.result?.task as { taskId: string; ttl: number; createdAt: string };
      expect(task.ttl).toBe(TTL_MS);
      const createdAt = Date.parse(task.createdAt);
      await publishUntil(worker, t, createdAt, async () => {
        const now = await mcp.request('tasks/get', { taskId: task.taskId });
        expect(now.error).toBeUndefined();
        expect(now.result).toMatchObject({ status: 'working' });
        expect(createdAt + Number(now.result?.ttl)).toBeGreaterThan(Date.now());
      });
      const result = mcp.request('tasks/result', { taskId: task.taskId });
      worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
      expect((await result).result).toMatchObject({
        structuredContent: { progressToken: t, state: 'done', status: 'ok', message: 'rendered' },
      });
      const final = await mcp.request('tasks/get', { taskId: task.taskId });
      expect(final.result).toMatchObject({ status: 'completed' });
    } finally {
      worker.destroy();
      await mcp.close();
    }
  }, 20_000);
});

describe('a task past its TTL, with real SDK 1.x clients on /mcp', () => {
  it('is gone for every answer, and the daemon releases it within a second however idle it is', async () => {
    // A daemon of its own: its count of tasks is this test's alone.
    const idle = await startDaemon();
    const status = await rawWorker(idle.info.socket);
    const transport = new StreamableHTTPClientTransport(new URL(`${httpBase(idle.info)}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${idle.info.secret}` } },
    });
    const creator = await connectWithTap(transport);
    const tasks = async () => (await workerStatus<{ tasks: number }>(status)).tasks;
    try {
      // On a token no worker publishes: its TTL counts from its creation.
      let taskId: string | undefined;
      for await (const message of creator.client.experimental.tasks.callToolStream(
        { name: 'watch_progress', arguments: { progressToken: token('idle-daemon') } },
        CallToolResultSchema,
        { task: { ttl: TTL_MS } },
      )) {
        if (message.type === 'taskCreated') {
          taskId = message.task.taskId;
          expect(message.task.ttl).toBe(TTL_MS);
          break;
        }
      }
      if (taskId === undefined) throw new Error('no task created');
      expect(await tasks()).toBe(1);
      // The session that created it ends (its follow, which looks at the task, with it): from now
      // on nothing asks the daemon about the task.
      await transport.terminateSession();
      await creator.client.close();
      await eventually(
        async () => ((await tasks()) === 0 ? true : undefined),
        10_000,
        'no task held',
      );
      // And to a client that asks, it is gone: as the spec has a task whose TTL passed.
      const asker = await connectHttp(idle.info);
      try {
        await expect(asker.client.experimental.tasks.getTask(taskId)).rejects.toMatchObject({
          code: -32602,
        });
        const listed = await asker.client.experimental.tasks.listTasks();
        expect(listed.tasks.map((task) => task.taskId)).not.toContain(taskId);
      } finally {
        await asker.close();
      }
    } finally {
      status.destroy();
      await creator.client.close().catch(() => {});
      await idle.stop();
    }
  }, 20_000);
});
