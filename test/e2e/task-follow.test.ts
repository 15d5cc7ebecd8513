/**
 * The follow of a 2025-11-25 task (DaemonTaskStore, what each MCP session of `mcp-progress mcp`
 * and /mcp runs) over a real connection to a real daemon, with a real worker and the gateway's
 * own task/cancel as the "elsewhere": the store is driven as SDK 1.x drives it, so that a race
 * of the SDK's tasks/cancel with a cancel made elsewhere is made to happen in one order, every
 * time, rather than hoped for by timing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteProgressSource } from '../../src/mcp/index.js';
import { DaemonTaskStore } from '../../src/mcp/tasks.js';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { publishingWorker } from '../helpers/worker.js';

let daemon: RunningDaemon;
let gateway: GatewayClient;
let source: RemoteProgressSource;

beforeAll(async () => {
  daemon = await startDaemon();
  gateway = await connectGateway(daemon.info);
  source = await RemoteProgressSource.connect({ url: daemon.info.url, secret: daemon.info.secret });
});
afterAll(async () => {
  await source?.close();
  await gateway?.close();
  await daemon?.stop();
  cleanupAll();
});

interface Sent {
  method: string;
  params: Record<string, unknown>;
}

/**
 * A store following a task of a new stream `name` (a worker publishing on it), started as the
 * SDK starts a task; `statuses` are the status notifications it told of that task. The test's
 * `use` runs with it (`sent`: everything it told); the worker and the store end after it.
 */
async function withFollowedTask(
  name: string,
  use: (followed: {
    store: DaemonTaskStore;
    taskId: string;
    statuses: () => Sent[];
    sent: Sent[];
  }) => Promise<void>,
): Promise<void> {
  const t = `task-follow-${process.pid}-${name}`;
  const worker = await publishingWorker(daemon.info.socket, t);
  const sent: Sent[] = [];
  const store = new DaemonTaskStore(source, async (notification) => {
    sent.push(notification);
  });
  try {
    const task = await store.start(
      {},
      {
        method: 'tools/call',
        params: { name: 'watch_progress', arguments: { progressToken: t } },
      },
      { token: t, label: `label-${name}`, minIntervalMs: 0, answered: Promise.resolve() },
    );
    const statuses = () =>
      sent.filter(
        (m) => m.method === 'notifications/tasks/status' && m.params.taskId === task.taskId,
      );
    await use({ store, taskId: task.taskId, statuses, sent });
  } finally {
    worker.destroy();
    await store.close();
  }
}

describe('the follow of a 2025-11-25 task', () => {
  it('tells one status for a cancel here that comes after its look saw a cancel made elsewhere', async () => {
    await withFollowedTask('race', async ({ store, taskId, statuses }) => {
      // The SDK's tasks/cancel read the task working just before this cancel, made elsewhere...
      await gateway.request('task/cancel', { taskId });
      // ...which the follow's look sees first, and tells...
      await eventually(() => (statuses().length > 0 ? true : undefined));
      // ...and then the SDK's cancel reaches the store.
      await store.updateTaskStatus(taskId, 'cancelled', 'Client cancelled task execution.');
      expect(statuses().map((m) => m.params.status)).toEqual(['cancelled']);
    });
  });

  it('tells one status for a cancel here, and none again at its next look', async () => {
    await withFollowedTask('here', async ({ store, taskId, sent }) => {
      await store.updateTaskStatus(taskId, 'cancelled', 'Client cancelled task execution.');
      // A look as the SDK's tasks/get makes it: the task is terminal, and already told.
      expect(await store.getTask(taskId)).toMatchObject({ status: 'cancelled' });
      expect(
        sent.filter((m) => m.method === 'notifications/tasks/status').map((m) => m.params.status),
      ).toEqual(['cancelled']);
    });
  });
});
