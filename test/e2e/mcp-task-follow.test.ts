/**
 * The follower of a 2025-11-25 task (the session that created it forwards its stream's progress
 * and tells its final status): it ends with the task, wherever the task ends. A real daemon, a
 * real `mcp-progress mcp` over stdio (and /mcp where the defect is not stdio's own), raw clients.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MCP_ERRORS } from '../../src/protocol/errors.js';
import { MAX_FOLLOWED_TASKS } from '../../src/shared/defaults.js';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import {
  connectRawStdio,
  progressFor,
  RAW_HTTP,
  RAW_STDIO,
  RAW_TRANSPORTS,
  type RawMcp,
  type RawMessage,
  untilStream,
} from '../helpers/raw-mcp.js';
import { publishingWorker, type RawWorker, rawWorker, workerStatus } from '../helpers/worker.js';

let counter = 0;
const token = (what: string) => `mcp-follow-${what}-${process.pid}-${++counter}`;

type Status = { sessions: number; streams: { waiting: number } };

/** What is to be ended after each test, newest first. */
const ends: Array<() => unknown> = [];
afterEach(async () => {
  for (const end of ends.splice(0).reverse()) await end();
});
afterAll(() => cleanupAll());

function using<T extends { close(): unknown } | { destroy(): unknown }>(thing: T): T {
  ends.push(() => ('close' in thing ? thing.close() : thing.destroy()));
  return thing;
}

/** A tools/call of watch_progress on `t` as a task; the raw answer. */
function callAsTask(
  mcp: RawMcp,
  t: string,
  task: { ttl?: number },
  label?: string,
): Promise<RawMessage> {
  return mcp.request('tools/call', {
    name: 'watch_progress',
    arguments: { progressToken: t, minIntervalMs: 0 },
    task,
    ...(label === undefined ? {} : { _meta: { progressToken: label } }),
  });
}

async function listedTasks(mcp: RawMcp): Promise<Array<{ taskId: string; status: string }>> {
  const reply = await mcp.request('tasks/list');
  expect(reply.error).toBeUndefined();
  return reply.result?.tasks as Array<{ taskId: string; status: string }>;
}

function statusOf(mcp: RawMcp, taskId: string): RawMessage | undefined {
  return mcp.received.find(
    (m) => m.method === 'notifications/tasks/status' && m.params?.taskId === taskId,
  );
}

describe('a task whose TTL passed', () => {
  let daemon: RunningDaemon;
  let status: RawWorker;
  beforeAll(async () => {
    daemon = await startDaemon(['--max-sessions', '8']);
    status = await rawWorker(daemon.info.socket);
  });
  afterAll(async () => {
    status?.destroy();
    await daemon?.stop();
  });

  it.each(RAW_TRANSPORTS)(
    'over $name: its follower releases its daemon session and its waiting subscription',
    async (transport) => {
      const mcp = using(await transport.connect(daemon, '2025-11-25'));
      expect(await listedTasks(mcp)).toEqual([]);
      const before = await workerStatus<Status>(status);
      for (let i = 0; i < 7; i++) {
        const reply = await callAsTask(mcp, token('typo'), { ttl: 1000 });
        expect(reply.error).toBeUndefined();
      }
      expect((await workerStatus<Status>(status)).streams.waiting).toBe(7);
      // The daemon forgets the tasks after their TTL...
      await eventually(async () => ((await listedTasks(mcp)).length === 0 ? true : undefined));
      // ... and the followers let go of what they held for them.
      let now: Status | undefined;
      await eventually(
        async () => {
          now = await workerStatus<Status>(status);
          return now.sessions === before.sessions && now.streams.waiting === 0 ? true : undefined;
        },
        5_000,
        () =>
          `${before.sessions} sessions and no waiting stream once the tasks are gone; the daemon has ${JSON.stringify(now)}`,
      );
      if (transport === RAW_STDIO) {
        // Their places under --max-sessions are free for others.
        const gateway = await connectGateway(daemon.info);
        await gateway.close();
      }
    },
  );
});

describe('a task cancelled through another client', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon();
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it.each(RAW_TRANSPORTS)(
    'over $name: its creator tells cancelled and forwards no progress after it',
    async (transport) => {
      const mcp = using(await transport.connect(daemon, '2025-11-25'));
      const t = token('elsewhere');
      const label = `label-${t}`;
      const worker = using(await publishingWorker(daemon.info.socket, t));
      const reply = await callAsTask(mcp, t, { ttl: 120_000 }, label);
      const task = reply.result?.task as { taskId: string };
      // The follower forwards: the job's first value arrives.
      await eventually(() => (progressFor(mcp, label).length > 0 ? true : undefined));
      const gateway = using(await connectGateway(daemon.info));
      const cancel = await gateway.request('task/cancel', { taskId: task.taskId });
      expect(cancel.result).toMatchObject({ task: { status: 'cancelled' } });
      // The worker ignores the cancel and goes on: no done comes to end the stream.
      const status = await eventually(
        () => statusOf(mcp, task.taskId),
        5_000,
        'notifications/tasks/status for the task cancelled through the gateway',
      );
      expect(status.params).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
      for (const progress of [10, 20, 30])
        worker.send('progress', { v: 1, progressToken: t, progress, total: 100 });
      await untilStream(mcp, t, (stream) => stream.progress === 30);
      const after = mcp.received.slice(mcp.received.indexOf(status));
      expect(
        after.filter(
          (m) => m.method === 'notifications/progress' && m.params?.progressToken === label,
        ),
      ).toEqual([]);
    },
  );
});

describe('a task call that fails', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon(['--max-sessions', '3']);
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it('over stdio, its follower refused at --max-sessions: leaves no task behind', async () => {
    const mcp = using(await connectRawStdio(daemon, '2025-11-25'));
    const created: string[] = [];
    const errors: string[] = [];
    for (let i = 0; i < 4; i++) {
      const reply = await callAsTask(mcp, token('refused'), { ttl: 86_400_000 });
      const task = reply.result?.task as { taskId: string } | undefined;
      if (task !== undefined) created.push(task.taskId);
      if (reply.error !== undefined) errors.push(reply.error.message);
    }
    // The cap was met: some calls failed, and said why.
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]).toMatch(/max-sessions/);
    const listed = await listedTasks(mcp);
    expect(listed.map((task) => task.taskId).sort()).toEqual([...created].sort());
  });
});

describe('followers of one MCP session', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon();
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it(`over HTTP /mcp: at most ${MAX_FOLLOWED_TASKS}; one more task is refused and not created`, async () => {
    const mcp = using(await RAW_HTTP.connect(daemon, '2025-11-25'));
    for (let i = 0; i < MAX_FOLLOWED_TASKS; i++) {
      const reply = await callAsTask(mcp, token('many'), {});
      expect(reply.error).toBeUndefined();
    }
    const refused = await callAsTask(mcp, token('one-more'), {});
    expect(refused.error?.code).toBe(MCP_ERRORS.refused.code);
    expect(refused.error?.message).toContain(`follows ${MAX_FOLLOWED_TASKS} working tasks`);
    expect((await listedTasks(mcp)).length).toBe(MAX_FOLLOWED_TASKS);
    // A task that ends frees its place.
    const first = (await listedTasks(mcp))[0] as { taskId: string };
    const cancelled = await mcp.request('tasks/cancel', { taskId: first.taskId });
    expect(cancelled.error).toBeUndefined();
    expect((await callAsTask(mcp, token('freed'), {})).error).toBeUndefined();
  });
});
