/**
 * 2026-07-28 task listens on the daemon's /mcp, with real SDK clients over real HTTP: a
 * @modelcontextprotocol/client 2.4.0 client listens (client.listen with notifications.taskIds,
 * the tasks extension declared in its capabilities), while another client, an SDK 1.x session of
 * 2025-11-25 on the same /mcp, acts on the same tasks; real workers on the daemon's socket.
 */
import type { SubscriptionFilter } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectHttp } from '../helpers/mcp.js';
import { connectHttpV2, type TappedV2Client } from '../helpers/mcp-v2.js';
import { TASKS_EXTENSION } from '../helpers/raw-mcp.js';
import { publishingWorker } from '../helpers/worker.js';

const daemon = daemonForFile();

let counter = 0;
const token = (what: string) => `task-listen-sdk-${what}-${process.pid}-${++counter}`;

/** A 2.x client on /mcp, pinned to 2026-07-28, that declares the tasks extension. */
function listeningClient(): Promise<TappedV2Client> {
  return connectHttpV2(daemon.info, 'pin', { extensions: { [TASKS_EXTENSION]: {} } });
}

/** The task listen filter (SEP-2663's notifications.taskIds), which the 2.4.0 types do not name. */
function taskFilter(taskIds: string[]): SubscriptionFilter {
  return { taskIds } as SubscriptionFilter;
}

/** Where in what `client` received the first notifications/tasks of `taskId` that `holds` is. */
function toldAt(
  client: TappedV2Client,
  taskId: string,
  holds: (task: Record<string, unknown>) => boolean,
): number {
  return client.received.findIndex((message) => {
    const params = message.params as Record<string, unknown> | undefined;
    return (
      message.method === 'notifications/tasks' && params?.taskId === taskId && holds(params ?? {})
    );
  });
}

describe('a task listen on /mcp, by a 2.x SDK client', () => {
  it('hears a task cancelled by another client (a 2025-11-25 session’s tasks/cancel) at once, before anything that happens after the cancel, not at its next look', async () => {
    const gateway = await connectGateway(daemon.info);
    const t = token('busy');
    const worker = await publishingWorker(daemon.info.socket, t);
    const listener = await listeningClient();
    const canceller = await connectHttp(daemon.info);
    try {
      // No worker ever publishes on its token: nothing of its stream can tell the listen of its
      // cancel, only a look at the task (every poll interval) or the daemon's own notice.
      const idle = (
        (await gateway.request('task/create', { progressToken: token('idle') })).result as {
          task: { taskId: string };
        }
      ).task;
      const busy = (
        (await gateway.request('task/create', { progressToken: t })).result as {
          task: { taskId: string };
        }
      ).task;
      const subscription = await listener.client.listen(taskFilter([idle.taskId, busy.taskId]));
      // Acknowledged with both (the 2.4.0 client's honoredFilter drops the field it does not know).
      expect(
        listener.received.find((m) => m.method === 'notifications/subscriptions/acknowledged')
          ?.params,
      ).toMatchObject({ notifications: { taskIds: [idle.taskId, busy.taskId] } });
      await eventually(() =>
        toldAt(listener, busy.taskId, (task) => task.status === 'working') >= 0 ? true : undefined,
      );
      await canceller.client.experimental.tasks.cancelTask(idle.taskId);
      // After the cancel was answered, the other job ends: its end is told at once (a status
      // change is not held back), so the listen's stream shows which it learned first.
      worker.send('done', { v: 1, progressToken: t, status: 'ok' });
      const completed = await eventually(() => {
        const at = toldAt(listener, busy.taskId, (task) => task.status === 'completed');
        return at >= 0 ? at : undefined;
      });
      const cancelled = toldAt(listener, idle.taskId, (task) => task.status === 'cancelled');
      expect(
        cancelled,
        'the cancel was told before the job that ended after it',
      ).toBeGreaterThanOrEqual(0);
      expect(cancelled).toBeLessThan(completed);
      // Both told their end: the listen ends with its result.
      await expect(subscription.closed).resolves.toBe('graceful');
    } finally {
      worker.destroy();
      await gateway.close();
      await canceller.close();
      await listener.close();
    }
  });
});
