/** The daemon's task table over the real gateway protocol, with real workers on the socket. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import type { TaskRecord } from '../../src/protocol/tasks.js';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { rawWorker } from '../helpers/worker.js';

let daemon: RunningDaemon;
let client: GatewayClient;
let counter = 0;
const token = (what: string) => `task-${what}-${process.pid}-${++counter}`;

beforeAll(async () => {
  daemon = await startDaemon(['--abandon-grace-ms', '0']);
  client = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
});
afterAll(async () => {
  await client?.close();
  await daemon?.stop();
  cleanupAll();
});

/** Polls task/get until the task has `status`; fails when it never gets there. */
function untilStatus(taskId: string, status: TaskRecord['status']): Promise<TaskRecord> {
  return eventually(async () => {
    const task = await client.getTask(taskId);
    return task?.status === status ? task : undefined;
  });
}

describe('task/* on the gateway', () => {
  it('follows the stream from working to completed, and another session sees the same task', async () => {
    const t = token('ok');
    const task = await client.createTask({ progressToken: t, ttlMs: 120_000 });
    expect(task).toMatchObject({ status: 'working', progressToken: t, ttlMs: 120_000 });
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', { v: 1, progressToken: t, progress: 3, total: 10, message: 'step' });
    const running = await eventually(async () => {
      const now = await client.getTask(task.taskId);
      return now?.stream?.last?.progress === 3 ? now : undefined;
    });
    expect(running).toMatchObject({ status: 'working', stream: { state: 'active' } });
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'finished' });
    await untilStatus(task.taskId, 'completed');
    const other = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    expect(await other.getTask(task.taskId)).toMatchObject({
      status: 'completed',
      stream: { state: 'done', status: 'ok', message: 'finished', last: { progress: 3 } },
    });
    expect((await other.listTasks()).tasks.map((listed) => listed.taskId)).toContain(task.taskId);
    await other.close();
    worker.destroy();
  });

  it('cancels: the task is cancelled and the worker receives cancel with the reason', async () => {
    const t = token('cancel');
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', { v: 1, progressToken: t, progress: 1 });
    await eventually(async () => ((await client.get(t)) === undefined ? undefined : true));
    const task = await client.createTask({ progressToken: t });
    const answer = await client.cancelTask(task.taskId, 'not needed');
    expect(answer).toMatchObject({
      workers: 1,
      task: { status: 'cancelled', reason: 'not needed' },
    });
    const cancel = await worker.reply((envelope) => envelope.type === 'cancel');
    expect(cancel.data).toEqual({ progressToken: t, reason: 'not needed' });
    // A second cancel tells nobody.
    expect((await client.cancelTask(task.taskId)).workers).toBe(0);
    worker.destroy();
  });

  it('a task cancelled before its stream appeared is not changed or shown that stream when a worker later publishes on its token', async () => {
    const t = token('cancel-early');
    const task = await client.createTask({ progressToken: t });
    const cancelled = await client.cancelTask(task.taskId, 'changed my mind');
    expect(cancelled).toMatchObject({
      workers: 0,
      task: { status: 'cancelled', reason: 'changed my mind' },
    });
    expect(cancelled.task?.stream).toBeUndefined();
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', { v: 1, progressToken: t, progress: 4, total: 8, message: 'other' });
    await eventually(async () => ((await client.get(t))?.last?.progress === 4 ? true : undefined));
    const after = await client.getTask(task.taskId);
    expect(after).toEqual(cancelled.task);
    const listed = (await client.listTasks()).tasks.find((one) => one.taskId === task.taskId);
    expect(listed).toEqual(cancelled.task);
    worker.send('done', { v: 1, progressToken: t, status: 'ok' });
    await eventually(async () => ((await client.get(t))?.state === 'done' ? true : undefined));
    expect(await client.getTask(task.taskId)).toEqual(cancelled.task);
    worker.destroy();
  });

  it('fails with the reason when the worker goes away without done', async () => {
    const t = token('abandoned');
    const task = await client.createTask({ progressToken: t });
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', { v: 1, progressToken: t, progress: 1 });
    await eventually(async () => ((await client.get(t)) === undefined ? undefined : true));
    worker.destroy();
    const failed = await untilStatus(task.taskId, 'failed');
    expect(failed.reason).toMatch(/disconnected without sending done/);
  });

  it('answers {} for a task it does not have, and invalid_params for a bad id', async () => {
    expect(await client.getTask('no-such-task')).toBeUndefined();
    await expect(client.request('task/get', { taskId: '' })).rejects.toMatchObject({
      code: 'invalid_params',
    });
  });
});
