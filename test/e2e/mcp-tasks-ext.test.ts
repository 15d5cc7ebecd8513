/**
 * watch_progress as a 2026-07-28 task, through the tasks extension (io.modelcontextprotocol/tasks,
 * SEP-2663), driven by a raw JSON-RPC client over the stdio of the real `mcp-progress mcp` and
 * over the daemon's /mcp, with real workers on the daemon's socket. Each scenario runs over both.
 */
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_STDIO_TASK_LISTENS } from '../../src/shared/defaults.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  startDaemon,
  waitForExit,
} from '../helpers/daemon.js';
import { httpBase, postMcp, postRaw, waitForSubscribers } from '../helpers/mcp.js';
import { NEWEST_REVISION } from '../helpers/mcp-v2.js';
import {
  CLIENT_CAPABILITIES,
  progressFor,
  RAW_HTTP,
  RAW_STDIO,
  RAW_TRANSPORTS,
  type RawMcp,
  type RawMessage,
  TASKS_EXTENSION,
  taskOnJob,
  untilStream,
} from '../helpers/raw-mcp.js';
import {
  publishingWorker,
  publishSteadily,
  type RawWorker,
  rawWorker,
  steadyJobResult,
  workerStatus,
} from '../helpers/worker.js';

const WITH_TASKS = { [CLIENT_CAPABILITIES]: { extensions: { [TASKS_EXTENSION]: {} } } };
const WITHOUT_TASKS = { [CLIENT_CAPABILITIES]: {} };
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

let daemon: RunningDaemon;
let counter = 0;
const token = (what: string) => `mcp-task-ext-${what}-${process.pid}-${++counter}`;

beforeAll(async () => {
  daemon = await startDaemon(['--abandon-grace-ms', '0']);
});
afterAll(async () => {
  await daemon?.stop();
  cleanupAll();
});

interface DetailedTask {
  taskId: string;
  status: string;
  statusMessage: string;
  ttlMs: number;
  pollIntervalMs: number;
  createdAt: string;
  lastUpdatedAt: string;
  resultType?: string;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

function publishing(t: string): Promise<RawWorker> {
  return publishingWorker(daemon.info.socket, t);
}

/** watch_progress on `t` with the extension declared and `label` as the caller's progressToken. */
async function startTask(mcp: RawMcp, t: string, label: string): Promise<DetailedTask> {
  const reply = await mcp.request('tools/call', {
    name: 'watch_progress',
    arguments: { progressToken: t, minIntervalMs: 0 },
    _meta: { ...WITH_TASKS, progressToken: label },
  });
  expect(reply.error).toBeUndefined();
  return reply.result as unknown as DetailedTask;
}

async function getTask(mcp: RawMcp, taskId: string): Promise<DetailedTask> {
  const reply = await mcp.request('tasks/get', { taskId, _meta: WITH_TASKS });
  expect(reply.error).toBeUndefined();
  return reply.result as unknown as DetailedTask;
}

/** Polls tasks/get until `holds` (the spec's way to follow a task); fails when it never does. */
function taskWhen(mcp: RawMcp, taskId: string, holds: (task: DetailedTask) => boolean) {
  return eventually(async () => {
    const task = await getTask(mcp, taskId);
    return holds(task) ? task : undefined;
  });
}

/** A task's status notifications on listen `id`: notifications/tasks (SEP-2663), or .../status. */
function toldMessages(mcp: RawMcp, id: number, taskId: string): RawMessage[] {
  return mcp.received.filter(
    (m) =>
      (m.method === 'notifications/tasks' || m.method === 'notifications/tasks/status') &&
      m.params?._meta?.[SUBSCRIPTION_ID] === id &&
      m.params?.taskId === taskId,
  );
}

function told(mcp: RawMcp, id: number, taskId: string): DetailedTask[] {
  return toldMessages(mcp, id, taskId).map((m) => m.params as unknown as DetailedTask);
}

/** Opens a listen for `taskIds` and waits for its acknowledgement. */
async function listen(mcp: RawMcp, taskIds: string[]): Promise<{ id: number; ack: RawMessage }> {
  const id = mcp.send('subscriptions/listen', { notifications: { taskIds }, _meta: WITH_TASKS });
  const ack = await eventually(() =>
    mcp.received.find(
      (m) =>
        m.method === 'notifications/subscriptions/acknowledged' &&
        m.params?._meta?.[SUBSCRIPTION_ID] === id,
    ),
  );
  return { id, ack };
}

/** What these tests read of the daemon's status. */
interface ListenStatus {
  sessions: number;
  counters: { slowSessionsClosed: number };
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * Listen `id` (of `taskId` only) ended right after telling `status`: the server ends a listen
 * once every task it listens to is terminal, so it is read to its end (over HTTP, its stream's;
 * over stdio, its result and one round trip more). Between the terminal notification and the
 * listen's result nothing came; and no progress notification came at all, though the call
 * carried a progressToken (not under the caller's token, nor on a listen stream).
 */
async function expectEndedWith(mcp: RawMcp, id: number, taskId: string, status: string) {
  const end = await mcp.ended(id);
  expect(end.result).toMatchObject({ resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: id } });
  await getTask(mcp, taskId);
  const onListen = mcp.received.filter(
    (m) => (m.params?._meta ?? m.result?._meta)?.[SUBSCRIPTION_ID] === id,
  );
  const terminal = toldMessages(mcp, id, taskId).filter((m) =>
    TERMINAL.has(String(m.params?.status)),
  );
  expect(terminal.map((m) => m.params?.status)).toEqual([status]);
  expect(onListen.slice(onListen.indexOf(terminal[0] as RawMessage) + 1)).toEqual([end]);
  expect(mcp.received.filter((m) => m.method === 'notifications/progress')).toEqual([]);
}

describe.each(RAW_TRANSPORTS)('watch_progress as a 2026-07-28 task over $name', (transport) => {
  const jobTask = async (what: string) =>
    taskOnJob(await connect(), daemon.info.socket, token(what), `label-${what}`, startTask);
  const connect = () => transport.connect(daemon, NEWEST_REVISION);

  it('server/discover lists the tasks extension', async () => {
    const mcp = await connect();
    expect(mcp.opening.result?.capabilities).toMatchObject({
      extensions: { [TASKS_EXTENSION]: {} },
    });
    await mcp.close();
  });

  it('a call that does not declare the extension gets the plain result, with its progress', async () => {
    const mcp = await connect();
    const t = token('plain');
    const worker = await publishing(t);
    const call = mcp.request('tools/call', {
      name: 'watch_progress',
      arguments: { progressToken: t, minIntervalMs: 0 },
      _meta: { ...WITHOUT_TASKS, progressToken: 'label-plain' },
    });
    await waitForSubscribers(daemon.info, t);
    worker.send('progress', { v: 1, progressToken: t, progress: 10, total: 100 });
    await eventually(() => (progressFor(mcp, 'label-plain').length > 0 ? true : undefined));
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    const reply = await call;
    expect(reply.result?.resultType).toBe('complete');
    expect(reply.result).not.toHaveProperty('taskId');
    expect(reply.result?.structuredContent).toMatchObject({
      progressToken: t,
      state: 'done',
      status: 'ok',
      message: 'rendered',
    });
    worker.destroy();
    await mcp.close();
  });

  it('creates a task; its statusMessage follows the stream with percentage and ETA, with no progress notification; completed with the plain result inlined; nothing after', async () => {
    const { mcp, t, worker, task, end } = await jobTask('ok');
    expect(task).toMatchObject({
      resultType: 'task',
      status: 'working',
      ttlMs: expect.any(Number),
      pollIntervalMs: 1000,
    });
    // Created before it answered: tasks/get knows it at once.
    expect((await getTask(mcp, task.taskId)).status).toBe('working');
    const { id, ack } = await listen(mcp, [task.taskId]);
    expect(ack.params?.notifications).toEqual({ taskIds: [task.taskId] });
    await publishSteadily(worker, t, 4, (step) =>
      taskWhen(mcp, task.taskId, (now) => now.statusMessage.includes(`step ${step}`)),
    );
    const running = await taskWhen(mcp, task.taskId, (now) => now.statusMessage.includes('left'));
    expect(running).toMatchObject({ status: 'working', resultType: 'complete' });
    expect(running.statusMessage).toContain('(40%)');
    expect(running.statusMessage.length).toBeLessThan(200);
    expect(running).not.toHaveProperty('result');
    // The listen stream is told the statusMessage as it changes.
    await eventually(() =>
      told(mcp, id, task.taskId).some((now) => now.statusMessage.includes('(40%)'))
        ? true
        : undefined,
    );
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    const completed = await taskWhen(mcp, task.taskId, (now) => now.status === 'completed');
    // The result a plain call returns for the same stream, inlined.
    expect(completed.result).toMatchObject({
      content: [{ type: 'text', text: expect.stringContaining('is done (ok)') }],
      structuredContent: steadyJobResult(t, 4),
    });
    const last = await eventually(() =>
      told(mcp, id, task.taskId).find((now) => now.status === 'completed'),
    );
    expect(last.result).toEqual(completed.result);
    await expectEndedWith(mcp, id, task.taskId, 'completed');
    await end();
  });

  it('tasks/cancel reaches the worker and the task is cancelled before it answers; nothing after', async () => {
    const { mcp, t, worker, task, end } = await jobTask('cancel');
    const { id } = await listen(mcp, [task.taskId]);
    await eventually(() => (told(mcp, id, task.taskId).length > 0 ? true : undefined));
    const cancelled = await mcp.request('tasks/cancel', { taskId: task.taskId, _meta: WITH_TASKS });
    expect(cancelled.error).toBeUndefined();
    expect(cancelled.result).toMatchObject({ resultType: 'complete' });
    expect(await getTask(mcp, task.taskId)).toMatchObject({ status: 'cancelled' });
    const cancel = await worker.reply((envelope) => envelope.type === 'cancel');
    expect(cancel.data).toMatchObject({ progressToken: t });
    if (transport === RAW_STDIO) {
      // One pipe: the listen was written the cancel before the answer (over HTTP, another stream).
      const toldCancel = toldMessages(mcp, id, task.taskId).find(
        (m) => m.params?.status === 'cancelled',
      );
      expect(toldCancel).toBeDefined();
      expect(mcp.received.indexOf(toldCancel as RawMessage)).toBeLessThan(
        mcp.received.indexOf(cancelled),
      );
    }
    await eventually(() =>
      told(mcp, id, task.taskId).some((now) => now.status === 'cancelled') ? true : undefined,
    );
    // The worker goes on and ends: the daemon has it, the cancelled task tells nothing more.
    worker.send('progress', { v: 1, progressToken: t, progress: 50, total: 100 });
    worker.send('done', { v: 1, progressToken: t, status: 'ok' });
    await untilStream(mcp, t, (stream) => stream.state === 'done');
    await expectEndedWith(mcp, id, task.taskId, 'cancelled');
    await end();
  });

  it('fails with the reason when the worker is abandoned', async () => {
    const { mcp, worker, task, end } = await jobTask('abandoned');
    const { id } = await listen(mcp, [task.taskId]);
    worker.destroy();
    const failed = await taskWhen(mcp, task.taskId, (now) => now.status === 'failed');
    expect(failed.statusMessage).toMatch(/abandoned/);
    // The reason, as the JSON-RPC error SEP-2663 puts on a failed task.
    expect(failed.error?.code).toBe(-32603);
    expect(failed.statusMessage).toContain(failed.error?.message);
    expect(failed).not.toHaveProperty('result');
    const pushed = await eventually(() =>
      told(mcp, id, task.taskId).find((now) => now.status === 'failed'),
    );
    expect(pushed.error).toEqual(failed.error);
    await expectEndedWith(mcp, id, task.taskId, 'failed');
    await end();
  });

  it('a task of a job already done is created completed, its result only in tasks/get', async () => {
    const { mcp, task: first, t, worker, end } = await jobTask('finished');
    worker.send('done', { v: 1, progressToken: t, status: 'ok', message: 'rendered' });
    await taskWhen(mcp, first.taskId, (now) => now.status === 'completed');
    const task = await startTask(mcp, t, 'label-finished-again');
    // A task-creation result is a Task: no result inlined there.
    expect(task).toMatchObject({ resultType: 'task', status: 'completed' });
    expect(task).not.toHaveProperty('result');
    expect((await getTask(mcp, task.taskId)).result).toMatchObject({
      structuredContent: { progressToken: t, state: 'done', status: 'ok' },
    });
    await end();
  });

  it('a listen the client ended is told nothing more, while another listen of the task is', async () => {
    const { mcp, worker, task, t, end } = await jobTask('unlisten');
    const ended = await listen(mcp, [task.taskId]);
    const open = await listen(mcp, [task.taskId]);
    await eventually(() =>
      told(mcp, ended.id, task.taskId).length > 0 && told(mcp, open.id, task.taskId).length > 0
        ? true
        : undefined,
    );
    await mcp.cancelRequest(ended.id);
    // A request after the cancel: over stdio the cancel was read before it.
    await getTask(mcp, task.taskId);
    const before = told(mcp, ended.id, task.taskId).length;
    worker.send('progress', { v: 1, progressToken: t, progress: 70, total: 100, message: 'later' });
    await eventually(() =>
      told(mcp, open.id, task.taskId).some((now) => now.statusMessage.includes('later'))
        ? true
        : undefined,
    );
    expect(told(mcp, ended.id, task.taskId)).toHaveLength(before);
    await end();
  });

  it('answers the extension methods as the spec says: unknown task, tasks/update acknowledged, tasks/result gone, listen needs the extension and ends at once with no task known', async () => {
    const { mcp, task, end } = await jobTask('methods');
    const unknown = await mcp.request('tasks/get', { taskId: 'no-such-task', _meta: WITH_TASKS });
    expect(unknown.error?.code).toBe(-32602);
    const update = { inputResponses: {}, _meta: WITH_TASKS };
    const updated = await mcp.request('tasks/update', { taskId: task.taskId, ...update });
    expect(updated.result).toMatchObject({ resultType: 'complete' });
    const notUpdated = await mcp.request('tasks/update', { taskId: 'no-such-task', ...update });
    expect(notUpdated.error?.code).toBe(-32602);
    const result = await mcp.request('tasks/result', { taskId: 'no-such-task' });
    expect(result.error?.code).toBe(-32601);
    const refused = await mcp.request('subscriptions/listen', {
      notifications: { taskIds: ['no-such-task'] },
      _meta: WITHOUT_TASKS,
    });
    expect(refused.error).toMatchObject({
      code: -32021,
      data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    });
    // A listen of no task the daemon knows: acknowledged with none, then ended (nothing can come).
    const none = await listen(mcp, ['no-such-task']);
    expect(none.ack.params?.notifications).toEqual({ taskIds: [] });
    expect((await mcp.ended(none.id)).result).toMatchObject({ resultType: 'complete' });
    await end();
  });
});

describe('2026-07-28 tasks are the daemon’s', () => {
  it('a task created over stdio is answered over /mcp and by a new mcp process, and cancelled from /mcp, which that process’s listen stream is told', async () => {
    const t = token('shared');
    const worker = await publishing(t);
    const first = await RAW_STDIO.connect(daemon, NEWEST_REVISION);
    const task = await startTask(first, t, 'label-shared');
    await first.close();
    const http = await RAW_HTTP.connect(daemon, NEWEST_REVISION);
    expect(await getTask(http, task.taskId)).toMatchObject({ status: 'working' });
    const second = await RAW_STDIO.connect(daemon, NEWEST_REVISION);
    expect(await getTask(second, task.taskId)).toMatchObject({ status: 'working' });
    const { id } = await listen(second, [task.taskId]);
    await eventually(() => (told(second, id, task.taskId).length > 0 ? true : undefined));
    const cancelled = await http.request('tasks/cancel', {
      taskId: task.taskId,
      _meta: WITH_TASKS,
    });
    expect(cancelled.error).toBeUndefined();
    await worker.reply((envelope) => envelope.type === 'cancel');
    expect(await getTask(second, task.taskId)).toMatchObject({ status: 'cancelled' });
    // Another process's cancel: the stream shows nothing of it, the next look does.
    await eventually(() =>
      told(second, id, task.taskId).some((now) => now.status === 'cancelled') ? true : undefined,
    );
    worker.destroy();
    await second.close();
    await http.close();
  });

  it('/mcp honours Mcp-Name: a tasks/get whose header names another task is refused', async () => {
    const t = token('name');
    const worker = await publishing(t);
    const http = await RAW_HTTP.connect(daemon, NEWEST_REVISION);
    const task = await startTask(http, t, 'label-name');
    const body = (taskId: string) => ({
      jsonrpc: '2.0',
      id: 99,
      method: 'tasks/get',
      params: {
        taskId,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
          ...WITH_TASKS,
        },
      },
    });
    const headers = (name: string) => ({
      authorization: `Bearer ${daemon.info.secret}`,
      'mcp-protocol-version': NEWEST_REVISION,
      'mcp-method': 'tasks/get',
      'mcp-name': name,
    });
    const url = `${httpBase(daemon.info)}/mcp`;
    const wrong = await postMcp(url, body(task.taskId), headers('another-task'));
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as RawMessage).error?.code).toBe(-32020);
    const right = await postMcp(url, body(task.taskId), headers(task.taskId));
    expect(right.status).toBe(200);
    await right.text();
    worker.destroy();
    await http.close();
  });
});

/**
 * Opens a task listen on /mcp of `on` on a connection of its own, by node:http, and stops reading
 * its SSE stream at once (paused): what the daemon writes to it piles up in its buffers.
 */
async function stalledListen(
  on: RunningDaemon,
  id: string,
  taskIds: string[],
): Promise<IncomingMessage> {
  const response = await postRaw(on.info, listenRequest(id, taskIds), {
    'mcp-protocol-version': NEWEST_REVISION,
    'mcp-method': 'subscriptions/listen',
  });
  response.pause();
  return response;
}

/** A 2026-07-28 subscriptions/listen for `taskIds`, as a client without a session POSTs it. */
function listenRequest(id: string | number, taskIds: string[]) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: {
      notifications: { taskIds },
      _meta: {
        'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
        'io.modelcontextprotocol/clientInfo': { name: 'stalled', version: '0' },
        ...WITH_TASKS,
      },
    },
  };
}

// Every notification on a listen carries its request id (_meta's subscriptionId): a long id
// makes each one large, so a few changes of a few tasks fill the loopback buffers.
const LONG_ID_BYTES = 256 * 1024;
// More than a stalled loopback connection holds (the daemon's send buffer tops out at 4 MiB
// here, tcp_wmem; the unread receive buffer stays far smaller), several times over.
const FILLED_BYTES = 32 * 1024 * 1024;

/** Tasks of jobs on `on`, a listen of them stalled, and one of `healthy` that reads. */
interface StalledScene {
  readonly worker: RawWorker;
  /** The jobs' progressTokens, one per task. */
  readonly tokens: string[];
  readonly tasks: DetailedTask[];
  readonly stalled: IncomingMessage;
  /** The healthy client's listen of the same tasks. */
  readonly id: number;
  /** One more value for every job: each task's statusMessage changes. */
  publish(): void;
  /** How many notifications/tasks the healthy listen was told, all tasks together. */
  toldCount(): number;
}

/**
 * Starts a task of each of `jobs` jobs through `healthy`, then opens a stalled listen of them whose
 * id is `idBytes` long, and a listen of them on `healthy`.
 */
async function stalledScene(
  on: RunningDaemon,
  healthy: RawMcp,
  { jobs = 8, idBytes = LONG_ID_BYTES } = {},
): Promise<StalledScene> {
  const tokens = Array.from({ length: jobs }, (_, n) => token(`stalled-${n}`));
  const worker = await rawWorker(on.info.socket);
  let progress = 0;
  const publish = () => {
    progress++;
    for (const t of tokens) {
      worker.send('progress', { v: 1, progressToken: t, progress, total: 1_000_000_000 });
    }
  };
  publish();
  const tasks: DetailedTask[] = [];
  for (const t of tokens) tasks.push(await startTask(healthy, t, `label-${t}`));
  const taskIds = tasks.map((task) => task.taskId);
  const stalled = await stalledListen(on, 'x'.repeat(idBytes), taskIds);
  expect(stalled.statusCode).toBe(200);
  const { id } = await listen(healthy, taskIds);
  const toldCount = () =>
    taskIds.reduce((sum, taskId) => sum + told(healthy, id, taskId).length, 0);
  return { worker, tokens, tasks, stalled, id, publish, toldCount };
}

/**
 * Publishes until the healthy listen was told more than the stalled one's buffers hold: each
 * change it is told, the stalled listen was written too.
 */
async function fillStalled(scene: StalledScene): Promise<void> {
  await eventually(
    () => {
      scene.publish();
      return scene.toldCount() * LONG_ID_BYTES > FILLED_BYTES ? true : undefined;
    },
    60_000,
    'enough task changes to fill the stalled listen’s buffers',
  );
}

describe('a task listen on /mcp whose client stopped reading', () => {
  it('holds up no other client’s tasks/cancel, and that client’s own listen is told the cancel', async () => {
    const healthy = await RAW_HTTP.connect(daemon, NEWEST_REVISION);
    let scene: StalledScene | undefined;
    try {
      scene = await stalledScene(daemon, healthy);
      await fillStalled(scene);
      const { worker, tasks, id } = scene;
      const [cancelledTask] = tasks as [DetailedTask];
      // Answered whatever the stalled client does (request() fails when no answer comes).
      const cancelled = await healthy.request('tasks/cancel', {
        taskId: cancelledTask.taskId,
        _meta: WITH_TASKS,
      });
      expect(cancelled.error).toBeUndefined();
      expect(cancelled.result).toMatchObject({ resultType: 'complete' });
      await worker.reply((envelope) => envelope.type === 'cancel');
      await eventually(() =>
        told(healthy, id, cancelledTask.taskId).some((now) => now.status === 'cancelled')
          ? true
          : undefined,
      );
    } finally {
      scene?.stalled.destroy();
      scene?.worker.destroy();
      await healthy.close();
    }
  }, 120_000);

  it('holds up no daemon stop: on SIGTERM the daemon exits while that client still holds its connection', async () => {
    // A cap the stalled listen never reaches: what would hold up the stop is its write, not its
    // close as a slow consumer (4.7).
    const own = await startDaemon([
      '--abandon-grace-ms',
      '0',
      '--max-session-buffer-bytes',
      String(1024 * 1024 * 1024),
    ]);
    const healthy = await RAW_HTTP.connect(own, NEWEST_REVISION);
    let scene: StalledScene | undefined;
    try {
      scene = await stalledScene(own, healthy);
      await fillStalled(scene);
      const exited = waitForExit(own.child);
      own.child.kill('SIGTERM');
      // The stalled client is left as it is until the daemon has gone: it must not be what ends
      // the stop. The stop cuts it off after its grace.
      expect(await exited).toBe(0);
    } finally {
      scene?.stalled.destroy();
      scene?.worker.destroy();
      await healthy.close();
    }
  }, 120_000);

  it('is closed as a slow consumer past --max-session-buffer-bytes, however long its id; a client that reads goes on', async () => {
    const cap = 1024 * 1024;
    const own = await startDaemon([
      '--abandon-grace-ms',
      '0',
      '--max-session-buffer-bytes',
      String(cap),
    ]);
    const healthy = await RAW_HTTP.connect(own, NEWEST_REVISION);
    let scene: StalledScene | undefined;
    try {
      // Each message of the stalled listen repeats its half-MiB id: with two dozen tasks it is
      // written many times the cap, more than the loopback buffers take.
      scene = await stalledScene(own, healthy, { jobs: 24, idBytes: 512 * 1024 });
      const { worker, tokens, stalled, id } = scene;
      const status = () => workerStatus<ListenStatus>(worker);
      await eventually(
        async () => {
          scene?.publish();
          return (await status()).counters.slowSessionsClosed === 1 ? true : undefined;
        },
        60_000,
        'the stalled listen to be closed as a slow consumer',
      );
      expect(own.stderr()).toMatch(
        /task listen\) closed: \d+ bytes unread, more than --max-session-buffer-bytes/,
      );
      // Its place went with it: only the healthy listen holds one.
      await eventually(async () => ((await status()).sessions === 1 ? true : undefined));
      // Its stream ends: what was written before the close, then nothing.
      stalled.resume();
      await new Promise<void>((resolve) => {
        stalled.once('end', resolve);
        stalled.once('close', resolve);
      });
      // The healthy listen is told each change, then each task's end, then its result.
      const before = scene.toldCount();
      await eventually(() => {
        scene?.publish();
        return (scene?.toldCount() ?? 0) > before ? true : undefined;
      });
      for (const t of tokens) worker.send('done', { v: 1, progressToken: t });
      const end = await healthy.ended(id);
      expect(end.result).toMatchObject({ resultType: 'complete' });
      expect((await status()).counters.slowSessionsClosed).toBe(1);
    } finally {
      scene?.stalled.destroy();
      scene?.worker.destroy();
      await healthy.close();
      await own.stop();
    }
  }, 120_000);
});

describe('a task listen on /mcp and --max-sessions', () => {
  it('holds one place however many tasks it follows; past the cap another is refused with 503', async () => {
    const own = await startDaemon(['--abandon-grace-ms', '0', '--max-sessions', '1']);
    const client = await RAW_HTTP.connect(own, NEWEST_REVISION);
    const worker = await rawWorker(own.info.socket);
    try {
      const tokens = [token('place-a'), token('place-b'), token('place-c')];
      for (const t of tokens) {
        worker.send('progress', { v: 1, progressToken: t, progress: 1, total: 10 });
      }
      const tasks: DetailedTask[] = [];
      for (const t of tokens) tasks.push(await startTask(client, t, `label-${t}`));
      const taskIds = tasks.map((task) => task.taskId);
      const { id } = await listen(client, taskIds);
      const status = () => workerStatus<ListenStatus>(worker);
      expect((await status()).sessions).toBe(1);
      const refused = await postMcp(`${httpBase(own.info)}/mcp`, listenRequest('second', taskIds), {
        authorization: `Bearer ${own.info.secret}`,
        'mcp-protocol-version': NEWEST_REVISION,
        'mcp-method': 'subscriptions/listen',
      });
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({
        id: 'second',
        error: { code: -32000, message: expect.stringContaining('--max-sessions') },
      });
      // The first listen follows every task: told each one's end, then its result.
      for (const t of tokens) worker.send('done', { v: 1, progressToken: t });
      const end = await client.ended(id);
      expect(end.result).toMatchObject({ resultType: 'complete' });
      for (const taskId of taskIds) {
        expect(told(client, id, taskId).map((now) => now.status)).toContain('completed');
      }
      // Its place is given back with its stream.
      await eventually(async () => ((await status()).sessions === 0 ? true : undefined));
    } finally {
      worker.destroy();
      await client.close();
      await own.stop();
    }
  }, 60_000);
});

describe('task listens over the stdio of mcp-progress mcp', () => {
  it(`holds at most MAX_STDIO_TASK_LISTENS (${MAX_STDIO_TASK_LISTENS}) at once: one more is refused, naming the limit; once one ends, another is served`, async () => {
    const { mcp, task, end } = await taskOnJob(
      await RAW_STDIO.connect(daemon, NEWEST_REVISION),
      daemon.info.socket,
      token('stdio-cap'),
      'label-stdio-cap',
      startTask,
    );
    try {
      // Sent together, so that a cap taken only after a look at the task would be overshot.
      const ids = Array.from({ length: MAX_STDIO_TASK_LISTENS }, () =>
        mcp.send('subscriptions/listen', {
          notifications: { taskIds: [task.taskId] },
          _meta: WITH_TASKS,
        }),
      );
      const past = mcp.send('subscriptions/listen', {
        notifications: { taskIds: [task.taskId] },
        _meta: WITH_TASKS,
      });
      // Its answer, or (unbounded) its acknowledgement: whichever comes.
      const first = (id: number) =>
        eventually(() =>
          mcp.received.find(
            (m) =>
              (m.id === id && m.method === undefined) ||
              (m.method === 'notifications/subscriptions/acknowledged' &&
                m.params?._meta?.[SUBSCRIPTION_ID] === id),
          ),
        );
      const refused = await first(past);
      expect(refused.error).toMatchObject({
        code: -32000,
        message: expect.stringContaining('MAX_STDIO_TASK_LISTENS'),
      });
      expect(refused.error?.message).toContain(String(MAX_STDIO_TASK_LISTENS));
      expect(refused.error?.message).toContain('notifications/cancelled');
      // Every listen within the cap is served, and told the task.
      for (const id of ids) {
        expect((await first(id)).method).toBe('notifications/subscriptions/acknowledged');
      }
      await eventually(() =>
        ids.every((id) => told(mcp, id, task.taskId).length > 0) ? true : undefined,
      );
      // Ending one gives its place back.
      await mcp.cancelRequest(ids[0] as number);
      const again = await listen(mcp, [task.taskId]);
      expect(again.ack.params?.notifications).toEqual({ taskIds: [task.taskId] });
    } finally {
      await end();
    }
  }, 60_000);
});

describe('the daemon sessions of a task listen over the stdio of mcp-progress mcp', () => {
  /**
   * A stdio `mcp-progress mcp` on `own` with a task on each of `count` tokens a worker publishes,
   * and how many sessions the daemon serves once its own connection is made.
   */
  async function tasksOver(own: RunningDaemon, count: number) {
    const mcp = await RAW_STDIO.connect(own, NEWEST_REVISION);
    const worker = await rawWorker(own.info.socket);
    const tokens = Array.from({ length: count }, (_, n) => token(`share-${n}`));
    for (const t of tokens) worker.send('progress', { v: 1, progressToken: t, progress: 1 });
    const tasks: DetailedTask[] = [];
    for (const t of tokens) tasks.push(await startTask(mcp, t, `label-${t}`));
    const sessions = async () => (await workerStatus<ListenStatus>(worker)).sessions;
    return { mcp, worker, tokens, taskIds: tasks.map((task) => task.taskId), sessions };
  }

  /**
   * Each task of listen `id` is told a step published after the listen: its follow (stream and
   * poll) runs, so every session the listen opens is open.
   */
  async function followed(
    mcp: RawMcp,
    worker: RawWorker,
    id: number,
    tokens: string[],
    taskIds: string[],
  ) {
    for (const t of tokens) {
      worker.send('progress', { v: 1, progressToken: t, progress: 2, message: 'followed' });
    }
    await eventually(() =>
      taskIds.every((taskId) =>
        told(mcp, id, taskId).some((now) => now.statusMessage.includes('followed')),
      )
        ? true
        : undefined,
    );
  }

  it('opens one daemon session for all the tasks of a listen, not one per task', async () => {
    const own = await startDaemon(['--abandon-grace-ms', '0']);
    const { mcp, worker, tokens, taskIds, sessions } = await tasksOver(own, 5);
    try {
      const before = await sessions();
      const { id } = await listen(mcp, taskIds);
      await followed(mcp, worker, id, tokens, taskIds);
      expect((await sessions()) - before).toBe(1);
      for (const t of tokens) worker.send('done', { v: 1, progressToken: t });
      expect((await mcp.ended(id)).result).toMatchObject({ resultType: 'complete' });
      await eventually(async () => ((await sessions()) === before ? true : undefined));
    } finally {
      worker.destroy();
      await mcp.close();
      await own.stop();
    }
  }, 60_000);

  it('opens one daemon session per --max-subscriptions tasks of a listen', async () => {
    const own = await startDaemon(['--abandon-grace-ms', '0', '--max-subscriptions', '2']);
    const { mcp, worker, tokens, taskIds, sessions } = await tasksOver(own, 5);
    try {
      const before = await sessions();
      const { id } = await listen(mcp, taskIds);
      await followed(mcp, worker, id, tokens, taskIds);
      expect((await sessions()) - before).toBe(3);
      for (const t of tokens) worker.send('done', { v: 1, progressToken: t });
      const end = await mcp.ended(id);
      expect(end.result).toMatchObject({ resultType: 'complete' });
      for (const taskId of taskIds) {
        expect(told(mcp, id, taskId).map((now) => now.status)).toContain('completed');
      }
    } finally {
      worker.destroy();
      await mcp.close();
      await own.stop();
    }
  }, 60_000);

  it('ends a listen whose task cannot be followed (the daemon at --max-sessions) with an error naming the task and the cause', async () => {
    // The one place is the stdio process's own connection: a follow gets no session.
    const own = await startDaemon(['--abandon-grace-ms', '0', '--max-sessions', '1']);
    const { mcp, worker, taskIds } = await tasksOver(own, 1);
    try {
      const { id } = await listen(mcp, taskIds);
      const end = await mcp.ended(id);
      expect(end.result).toBeUndefined();
      expect(end.error).toMatchObject({
        code: -32000,
        message: expect.stringContaining(JSON.stringify(taskIds[0])),
        data: { code: 'gateway_refused', taskIds },
      });
      expect(end.error?.message).toContain('--max-sessions');
      // Told the task as it was, then the error: nothing else.
      expect(told(mcp, id, taskIds[0] as string).map((now) => now.status)).toEqual(['working']);
    } finally {
      worker.destroy();
      await mcp.close();
      await own.stop();
    }
  }, 60_000);
});
