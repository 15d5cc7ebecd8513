/**
 * 2026-07-28 task listens with real SDK clients: a @modelcontextprotocol/client 2.4.0 client
 * listens (client.listen with notifications.taskIds, the tasks extension declared in its
 * capabilities) on the daemon's /mcp over real HTTP, or over the stdio of an `mcp-progress mcp`
 * that embeds its daemon, while another client acts on the same tasks; real workers on the
 * daemon's socket.
 */
import type { SubscriptionFilter } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { readDaemonInfo } from '../../src/shared/locate.js';
import { eventually, tempDir } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { connectHttp } from '../helpers/mcp.js';
import { connectHttpV2, connectStdioV2, type TappedV2Client } from '../helpers/mcp-v2.js';
import { TASKS_EXTENSION } from '../helpers/raw-mcp.js';
import { publishingWorker } from '../helpers/worker.js';

const daemon = daemonForFile();

let counter = 0;
const token = (what: string) => `task-listen-sdk-${what}-${process.pid}-${++counter}`;

/** The client capabilities of a listener: the tasks extension declared. */
const WITH_TASKS = { extensions: { [TASKS_EXTENSION]: {} } };

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

async function createTask(gateway: GatewayClient, progressToken: string): Promise<string> {
  const created = await gateway.request('task/create', { progressToken });
  return (created.result as { task: { taskId: string } }).task.taskId;
}

/**
 * `listener` listens to two tasks of the daemon of `info`: one on a token no worker publishes
 * on, one on a running job. `cancel` cancels the first through another client; once that is
 * answered the job ends, and its end is told at once (a status change is not held back). The
 * listen's stream shows which it learned first: the cancel, told as the daemon made it, or the
 * end, with the cancel waiting for the next look at its task (up to a poll interval later).
 */
async function cancelToldBeforeWhatFollows(
  info: DaemonInfo,
  listener: TappedV2Client,
  cancel: (gateway: GatewayClient, taskId: string) => Promise<unknown>,
): Promise<void> {
  const gateway = await connectGateway(info);
  const t = token('busy');
  const worker = await publishingWorker(info.socket, t);
  try {
    // Nothing of its stream can tell the listen of its cancel: only a look at the task, or the
    // daemon's own notice.
    const idle = await createTask(gateway, token('idle'));
    const busy = await createTask(gateway, t);
    const subscription = await listener.client.listen(taskFilter([idle, busy]));
    // Acknowledged with both (the 2.4.0 client's honoredFilter drops the field it does not know).
    expect(
      listener.received.find((m) => m.method === 'notifications/subscriptions/acknowledged')
        ?.params,
    ).toMatchObject({ notifications: { taskIds: [idle, busy] } });
    await eventually(() =>
      toldAt(listener, busy, (task) => task.status === 'working') >= 0 ? true : undefined,
    );
    await cancel(gateway, idle);
    worker.send('done', { v: 1, progressToken: t, status: 'ok' });
    const completed = await eventually(() => {
      const at = toldAt(listener, busy, (task) => task.status === 'completed');
      return at >= 0 ? at : undefined;
    });
    const cancelled = toldAt(listener, idle, (task) => task.status === 'cancelled');
    expect(
      cancelled,
      'the cancel told before the end of a job that ended after it',
    ).toBeGreaterThanOrEqual(0);
    expect(cancelled).toBeLessThan(completed);
    // Both told their end: the listen ends with its result.
    await expect(subscription.closed).resolves.toBe('graceful');
  } finally {
    worker.destroy();
    await gateway.close();
  }
}

describe('a task listen by a 2.x SDK client hears a task cancelled by another client at once, before anything that happens after the cancel, not at its next look', () => {
  it('on /mcp, the cancel made by a 2025-11-25 session (SDK 1.x tasks/cancel) on the same /mcp', async () => {
    const listener = await connectHttpV2(daemon.info, 'pin', WITH_TASKS);
    const canceller = await connectHttp(daemon.info);
    try {
      await cancelToldBeforeWhatFollows(daemon.info, listener, (_gateway, taskId) =>
        canceller.client.experimental.tasks.cancelTask(taskId),
      );
    } finally {
      await canceller.close();
      await listener.close();
    }
  });

  it('over the stdio of an mcp-progress mcp that embeds its daemon, the cancel made by a gateway (task/cancel)', async () => {
    const runtimeDir = tempDir();
    const listener = await connectStdioV2(
      ['--runtime-dir', runtimeDir, '--port', '0'],
      'pin',
      WITH_TASKS,
    );
    try {
      const info = await eventually(
        () => readDaemonInfo(runtimeDir).catch(() => undefined),
        10_000,
        'the embedded daemon',
      );
      await cancelToldBeforeWhatFollows(info, listener, (gateway, taskId) =>
        gateway.request('task/cancel', { taskId }),
      );
    } finally {
      await listener.close();
    }
  });
});
