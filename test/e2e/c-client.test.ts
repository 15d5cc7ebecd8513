/**
 * The single-header C client (clients/c/mcp_progress.h) on Linux: built with cc as strict C99,
 * run against the real daemon. (Its Windows build runs in test/windows/ under Wine.)
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { buildCWorker, cc } from '../helpers/c-client.js';
import { expectBackedOff, startClosingListener } from '../helpers/closing-listener.js';
import {
  cleanupAll,
  collectOutput,
  eventually,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { startDoneCuttingRelay } from '../helpers/done-cutting-relay.js';
import { connectGateway, expectRefusalsBackedOff, type GatewayClient } from '../helpers/gateway.js';
import {
  events,
  expectCancelReaches,
  expectEveryValueThenOneDone,
  progressValues,
  stepThrough,
  untilWorkerConnected,
  waitForEvent,
} from '../helpers/stepped-worker.js';
import { rawWorker } from '../helpers/worker.js';

describe.skipIf(cc.skip)('the C client on Linux', () => {
  let daemon: RunningDaemon;
  let program: string;
  beforeAll(async () => {
    cc.require();
    program = buildCWorker('cc', tempDir());
    daemon = await startDaemon();
  });
  afterAll(async () => {
    await daemon?.stop();
    cleanupAll();
  });

  /**
   * The worker in `mode` on `token`, publishing `values` in steps, to `socket` (the daemon's),
   * its done waiting `doneTimeoutMs` for its ack (the fixture's 10 s when not given).
   */
  function startWorker(
    mode: string,
    token: string,
    {
      values = 3,
      socket = daemon.info.socket,
      doneTimeoutMs,
    }: { values?: number; socket?: string; doneTimeoutMs?: number } = {},
  ) {
    const steps = tempDir();
    mkdirSync(steps, { recursive: true });
    const more = doneTimeoutMs === undefined ? [] : [String(doneTimeoutMs)];
    const child = spawn(program, [mode, String(values), steps, ...more], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: socket, MCP_PROGRESS_TOKEN: token },
    });
    return { child, worker: collectOutput(child), steps };
  }

  /**
   * The worker in `mode`, publishing `values` in steps (and given `more` arguments), on a token
   * that is not UTF-8 (an 0xFF byte), to `socket`: the daemon refuses each connection's first
   * frame with invalid_utf8 and closes it. Node passes an environment only as text, so sh makes
   * it. It is killed when the test ends: one waiting for a step file would wait on forever.
   */
  function startRefusedWorker(mode: string, values: number, socket: string, more: string[] = []) {
    const steps = tempDir();
    const child = spawn(
      'sh',
      [
        '-c',
        // Not UTF-8: the client refuses it at open, so it is put in behind the client's back.
        `C_WORKER_RAW_TOKEN="$(printf 'c-bad\\377')" MCP_PROGRESS_TOKEN=c-bad exec "$0" "$@"`,
        program,
        mode,
        String(values),
        steps,
        ...more,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: socket } },
    );
    onTestFinished(() => {
      child.kill();
    });
    return { child, worker: collectOutput(child), steps };
  }

  it('publishes every value, then a done that is acked; the session sees it once', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-job', minIntervalMs: 0 });
    const { child, worker, steps } = startWorker('done', 'c-job');
    await expectEveryValueThenOneDone(gateway, 'c-job', worker, steps);
    expect(await waitForExit(child)).toBe(0);
    expect(worker.stderr()).toBe('');
    await gateway.close();
  });

  it('is told of a cancel, with its reason, through its callback', async () => {
    const gateway = await connectGateway(daemon.info);
    const { child, worker } = startWorker('cancel', 'c-cancel');
    await expectCancelReaches(gateway, 'c-cancel', worker);
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
  });

  it('started before any daemon: says so; once one listens, its kept update arrives, and a cancel reaches it', async () => {
    const runtimeDir = tempDir();
    const { child, worker } = startWorker('cancel', 'c-early', {
      values: 1,
      socket: join(runtimeDir, 'bridge.sock'),
    });
    expect(await waitForEvent(worker, 'ready')).toMatchObject({ connected: false });
    // Written before "ready", but on another pipe: it may be read after it.
    await eventually(
      () =>
        worker.stderr().includes('is the daemon running? (later calls try again)')
          ? true
          : undefined,
      30_000,
      'the worker to say why it is not connected',
    );
    await eventually(
      () =>
        worker.stderr().includes('the update is kept and sent once connected') ? true : undefined,
      30_000,
      'the worker to keep its first update',
    );
    // Its claim and first value went nowhere; waiting for its next step, it connects, claims, and
    // sends the value it kept (a late subscriber is sent the stream's value).
    const late = await startDaemon([], runtimeDir);
    const gateway = await connectGateway(late.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-early', minIntervalMs: 0 });
    await eventually(
      () => (progressValues(gateway, 'c-early').includes(1) ? true : undefined),
      60_000,
      'the kept value 1',
    );
    await expectCancelReaches(gateway, 'c-early', worker);
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
    expect(await late.stop()).toBe(0);
  });

  it('connects again to a daemon restarted under it: its newest value, later values and the done reach the new one', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const before = await connectGateway(first.info);
    await before.request('progress/subscribe', { progressToken: 'c-restart', minIntervalMs: 0 });
    const { child, worker, steps } = startWorker('done', 'c-restart', {
      socket: first.info.socket,
    });
    const values = (gateway: GatewayClient) => progressValues(gateway, 'c-restart');
    await eventually(() => (values(before).includes(1) ? true : undefined), 60_000, 'value 1');
    await before.close();
    expect(await first.stop()).toBe(0);

    const second = await startDaemon([], runtimeDir);
    const after = await connectGateway(second.info);
    await after.request('progress/subscribe', { progressToken: 'c-restart', minIntervalMs: 0 });
    await untilWorkerConnected(after);
    await stepThrough(steps, 3, (value) => value === 1 || values(after).includes(value));
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true });
    expect(await waitForExit(child)).toBe(0);
    // Value 1, sent again once it was back, before value 2.
    expect(values(after)).toEqual([1, 2, 3]);
    // It saw the loss in poll, between its calls: no call of its failed.
    expect(worker.stderr()).toBe('');
    await after.close();
    expect(await second.stop()).toBe(0);
  });

  it('tells a daemon restarted while it is idle its newest value, with no update of its to come', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const before = await connectGateway(first.info);
    await before.request('progress/subscribe', { progressToken: 'c-idle', minIntervalMs: 0 });
    const { child, worker, steps } = startWorker('done', 'c-idle', {
      values: 2,
      socket: first.info.socket,
    });
    // Its value 1 was taken; it waits for its step file, polling, and updates nothing meanwhile.
    const values = (gateway: GatewayClient) => progressValues(gateway, 'c-idle');
    await eventually(() => (values(before).includes(1) ? true : undefined), 60_000, 'value 1');
    await before.close();
    expect(await first.stop()).toBe(0);

    // A host watching it on the new daemon learns where the job is from the worker's reconnect
    // alone: the value it published before, whole.
    const second = await startDaemon([], runtimeDir);
    const after = await connectGateway(second.info);
    await after.request('progress/subscribe', { progressToken: 'c-idle', minIntervalMs: 0 });
    const resent = await eventually(
      () =>
        after.notifications.find(
          (n) => n.method === 'notifications/progress' && n.params.progressToken === 'c-idle',
        ),
      // Back within its 2 s backoff: well inside the test's time, so a miss is named here.
      20_000,
      () => `value 1 sent again to the new daemon (stderr: ${worker.stderr()})`,
    );
    expect(resent.params).toEqual({
      progressToken: 'c-idle',
      progress: 1,
      total: 2,
      message: 'step 1',
    });
    await stepThrough(steps, 2, (value) => values(after).includes(value));
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true, code: null });
    expect(await waitForExit(child)).toBe(0);
    expect(values(after)).toEqual([1, 2]);
    expect(worker.stderr()).toBe('');
    await after.close();
    expect(await second.stop()).toBe(0);
  });

  it('sends its newest value again when only its connection was lost: the daemon had it (non_monotonic), which is no failure', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-cut', minIntervalMs: 0 });
    const relay = await startDoneCuttingRelay(daemon.info.socket, { cutAtDone: false });
    onTestFinished(() => relay.close());
    const { child, worker, steps } = startWorker('done', 'c-cut', {
      values: 2,
      socket: relay.path,
    });
    onTestFinished(() => {
      child.kill();
    });
    const values = () => progressValues(gateway, 'c-cut');
    await eventually(() => (values().includes(1) ? true : undefined), 30_000, 'value 1');
    relay.cutAll();
    // Back on a second connection, polling, it claims and sends value 1 again first, with a seq;
    // the daemon, which never lost the stream, refuses it as not an increase.
    const refusal = await eventually(
      () =>
        relay.frames.find(
          (f) => f.connection === 2 && f.from === 'daemon' && f.envelope?.type === 'rejected',
        ),
      20_000,
      () => `the daemon's answer to value 1 sent again (stderr: ${worker.stderr()})`,
    );
    const sent = relay.frames.filter((f) => f.connection === 2 && f.from === 'worker');
    expect(sent.map((f) => f.envelope)).toEqual([
      { type: 'claim', data: { v: 1, progressToken: 'c-cut' } },
      {
        type: 'progress',
        data: {
          v: 1,
          progressToken: 'c-cut',
          progress: 1,
          total: 2,
          message: 'step 1',
          seq: expect.any(Number),
        },
      },
    ]);
    expect(refusal.envelope?.data).toMatchObject({
      code: 'non_monotonic',
      seq: sent[1]?.envelope?.data?.seq,
    });
    await stepThrough(steps, 2, (value) => values().includes(value));
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true, code: null });
    expect(await waitForExit(child)).toBe(0);
    // Not a failure: neither a poll nor a later call of the worker reported it.
    expect(worker.stderr()).toBe('');
    expect(values()).toEqual([1, 2]);
    await gateway.close();
  });

  it("reports its done delivered when an earlier update of its was refused: the refusal is that update's", async () => {
    const { child, worker, steps } = startWorker('stale', 'c-stale', { values: 1 });
    // Its one value needs no wait: it may take its step at once.
    writeFileSync(join(steps, 'ack-1'), '');
    expect(await waitForExit(child)).toBe(0);
    expect(events(worker).find((event) => event.event === 'done')).toMatchObject({
      delivered: true,
    });
    const gateway = await connectGateway(daemon.info);
    const reply = await gateway.request('progress/get', { progressToken: 'c-stale' });
    expect(reply.result).toMatchObject({ stream: { state: 'done' } });
    await gateway.close();
  });

  it('at a daemon that is full: comes back with backoff, not at once, and gets in once there is room', async () => {
    const full = await startDaemon(['--max-connections', '1']);
    const gateway = await connectGateway(full.info);
    const held = await rawWorker(full.info.socket);
    await gateway.request('progress/subscribe', { progressToken: 'c-full', minIntervalMs: 0 });
    await eventually(
      async () => {
        const status = (await gateway.request('progress/status')).result as { connections: number };
        return status.connections === 1 ? true : undefined;
      },
      10_000,
      'the daemon to serve the connection that fills it',
    );
    const { child, worker, steps } = startWorker('done', 'c-full', {
      values: 1,
      socket: full.info.socket,
    });
    // It waits for its step file: if the test fails first, it would wait on forever.
    onTestFinished(() => {
      child.kill();
    });
    await expectRefusalsBackedOff(gateway, (c) => c.connectionsRefused, 'refused connections');
    held.destroy();
    // Its update went out on a refused connection, which the daemon ignored: it is kept and sent
    // once the worker is in.
    await eventually(
      () => (progressValues(gateway, 'c-full').includes(1) ? true : undefined),
      10_000,
      'value 1',
    );
    writeFileSync(join(steps, 'ack-1'), '');
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true });
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
    expect(await full.stop()).toBe(0);
  });

  it('refuses a NaN or infinite progress or total itself: sends nothing, keeps its connection and newest value, and a good update after them arrives', async () => {
    // A daemon of its own: its framesRejected counts this worker's frames only.
    const own = await startDaemon();
    onTestFinished(async () => {
      await own.stop();
    });
    const gateway = await connectGateway(own.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-nan', minIntervalMs: 0 });
    const { child, worker } = startWorker('nonfinite', 'c-nan', { socket: own.info.socket });
    expect(await waitForExit(child)).toBe(0);
    expect(events(worker).filter((event) => event.event === 'bad')).toEqual([
      { event: 'bad', field: 'progress', failed: true, connected: true },
      { event: 'bad', field: 'progress', failed: true, connected: true },
      { event: 'bad', field: 'total', failed: true, connected: true },
      { event: 'bad', field: 'total', failed: true, connected: true },
    ]);
    expect(worker.stderr().trim().split('\n')).toEqual([
      'update ignored: progress must be a finite number within +-9007199254740991, got nan',
      'update ignored: progress must be a finite number within +-9007199254740991, got inf',
      'update ignored: total must be a finite number from 0 to 9007199254740991 (or MCP_PROGRESS_NO_TOTAL, -1, for none), got nan',
      'update ignored: total must be a finite number from 0 to 9007199254740991 (or MCP_PROGRESS_NO_TOTAL, -1, for none), got inf',
    ]);
    expect(events(worker).find((event) => event.event === 'done')).toMatchObject({
      delivered: true,
    });
    await eventually(
      () => (progressValues(gateway, 'c-nan').includes(2) ? true : undefined),
      10_000,
      'value 2',
    );
    expect(progressValues(gateway, 'c-nan')).toEqual([1, 2]);
    const status = (await gateway.request('progress/status')).result as {
      counters: { framesRejected: Partial<Record<string, number>> };
    };
    expect(status.counters.framesRejected).toEqual({});
    await gateway.close();
  });

  it('whose every frame is refused as malformed: comes back with backoff, not at once', async () => {
    const refusing = await startDaemon();
    const gateway = await connectGateway(refusing.info);
    // It waits for its step file, which never comes, polling: each poll may connect again.
    startRefusedWorker('done', 1, refusing.info.socket);
    // One refusal a connection.
    await expectRefusalsBackedOff(
      gateway,
      (c) => c.framesRejected.invalid_utf8 ?? 0,
      'frames refused invalid_utf8',
    );
    await gateway.close();
    expect(await refusing.stop()).toBe(0);
  });

  it("fails its done at once, not at the done's deadline, when the daemon refuses a frame of its connection as malformed", async () => {
    // Its done may wait ten minutes for its ack, far longer than the wait for its event here:
    // only a done that fails on the refusal (as the Node client's does) ends in time. Sent again,
    // the frame refused (its claim, or the done itself) would be refused on every connection.
    const { child, worker, steps } = startRefusedWorker('done', 1, daemon.info.socket, ['600000']);
    writeFileSync(join(steps, 'ack-1'), '');
    expect(await waitForEvent(worker, 'done')).toEqual({
      event: 'done',
      delivered: false,
      code: 'invalid_utf8',
    });
    const why =
      'the done was not delivered: the daemon refused a frame (invalid_utf8) and closed the connection; it is not sent again:';
    // On another pipe than the event: it may be read after it.
    await eventually(
      () => (worker.stderr().includes(why) ? true : undefined),
      30_000,
      () => `the worker to say why its done failed (stderr: ${worker.stderr()})`,
    );
    expect(await waitForExit(child)).toBe(0);
  }, 120_000);

  it("reads the daemon's refusal when a write finds the connection closed after it: reports its code and message, and comes back with backoff, not at once", async () => {
    const refusing = await startDaemon();
    const gateway = await connectGateway(refusing.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-epipe', minIntervalMs: 0 });
    const { child, worker, steps } = startWorker('refused-write', 'c-epipe', {
      values: 2,
      socket: refusing.info.socket,
    });
    // It waits for its step file: if the test fails first, it would wait on forever.
    onTestFinished(() => {
      child.kill();
    });
    // Its value 1 (a message that is not UTF-8) was refused, and the daemon, its linger over,
    // closed the connection: the worker, which has read nothing since, now writes value 2 into it.
    await eventually(
      async () => {
        const status = (await gateway.request('progress/status')).result as {
          connections: number;
          counters: { framesRejected: Partial<Record<string, number>> };
        };
        return (status.counters.framesRejected.invalid_utf8 ?? 0) >= 1 && status.connections === 0
          ? true
          : undefined;
      },
      30_000,
      'the daemon to refuse value 1 and close the connection',
    );
    writeFileSync(join(steps, 'ack-1'), '');
    expect(await waitForEvent(worker, 'refused')).toEqual({
      event: 'refused',
      failed: true,
      code: 'invalid_utf8',
      connected: false,
    });
    // Why is the daemon's refusal, not a bare broken pipe (stderr is another pipe than the
    // event's: it may be read after it).
    await eventually(
      () =>
        worker
          .stderr()
          .includes(
            'the daemon refused a frame (invalid_utf8) and closed the connection; it is not sent again: ',
          )
          ? true
          : undefined,
      30_000,
      () => `the worker to say what the daemon refused (stderr: ${worker.stderr()})`,
    );
    // Polling at once and every 5 ms, it got in only after the first backoff step: 50 ms, of
    // which at most half is taken off. (Coming back at once, it was in within a few ms.)
    const back = await waitForEvent(worker, 'back');
    expect(back).toMatchObject({ connected: true });
    expect(Number(back.afterMs)).toBeGreaterThanOrEqual(25);
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true, code: null });
    expect(await waitForExit(child)).toBe(0);
    // Value 2, kept while it was away, reached the session; value 1 was refused.
    await eventually(
      () => (progressValues(gateway, 'c-epipe').includes(2) ? true : undefined),
      30_000,
      'value 2',
    );
    expect(progressValues(gateway, 'c-epipe')).toEqual([2]);
    await gateway.close();
    expect(await refusing.stop()).toBe(0);
  });

  it('at a socket that closes every connection at once, saying nothing: each try waits its backoff step, not a tight loop', async () => {
    const closing = await startClosingListener(tempDir());
    // It only polls, for a second by its own clock.
    const { child, worker } = startWorker('poll', 'c-closing', {
      values: 1000,
      socket: closing.path,
    });
    const polled = await waitForEvent(worker, 'polled');
    expect(await waitForExit(child)).toBe(0);
    expectBackedOff(closing, Number(polled.ms));
  });

  it('counts a done it sent again as delivered when the daemon answers stream_closed: the first one, taken before the connection was lost, ended the stream', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-resent', minIntervalMs: 0 });
    // The relay cuts the worker's connection once the daemon has acked its done, the ack unread.
    const relay = await startDoneCuttingRelay(daemon.info.socket);
    onTestFinished(() => relay.close());
    const { child, worker } = startWorker('done', 'c-resent', { values: 0, socket: relay.path });
    expect(await waitForEvent(worker, 'done')).toEqual({
      event: 'done',
      delivered: true,
      code: null,
    });
    expect(await waitForExit(child)).toBe(0);
    expect(worker.stderr()).toBe('');
    // It sent the done again on a second connection, after the first was cut at the ack.
    expect(relay.cut).toBe(true);
    expect(relay.connections).toBe(2);
    const notice = await eventually(
      () =>
        gateway.notifications.find(
          (n) =>
            n.method === 'notifications/progress/done' && n.params.progressToken === 'c-resent',
        ),
      30_000,
      'the done notice',
    );
    expect(notice.params).toEqual({
      progressToken: 'c-resent',
      status: 'ok',
      message: 'the result',
    });
    await gateway.close();
  });

  /** The daemon's count of worker connections is 0: the worker's is closed. */
  async function untilNoConnection(gateway: GatewayClient): Promise<void> {
    await eventually(
      async () => {
        const reply = await gateway.request('progress/status');
        return (reply.result as { connections: number }).connections === 0 ? true : undefined;
      },
      30_000,
      'the worker to close its connection',
    );
  }

  it('closes its connection after a done the daemon refused, and connects no more: its claim ends with the job', async () => {
    const refusing = await startDaemon();
    const gateway = await connectGateway(refusing.info);
    // Another connection ended the stream: the worker's done is refused stream_closed, which
    // leaves the connection open on the daemon's side.
    const other = await rawWorker(refusing.info.socket);
    other.send('done', { v: 1, progressToken: 'c-over', status: 'ok', seq: 1 });
    expect((await other.reply((r) => r.type === 'ack')).data).toEqual({ seq: 1 });
    other.destroy();
    const { child, worker, steps } = startWorker('done-wait', 'c-over', {
      values: 0,
      socket: refusing.info.socket,
    });
    onTestFinished(() => {
      child.kill();
    });
    expect(await waitForEvent(worker, 'done')).toEqual({
      event: 'done',
      delivered: false,
      code: 'stream_closed',
    });
    // An update after it fails without connecting again.
    expect(await waitForEvent(worker, 'after')).toEqual({
      event: 'after',
      failed: true,
      connected: false,
    });
    // Still running (until its exit file), it holds no connection.
    await untilNoConnection(gateway);
    await eventually(
      () =>
        worker.stderr().includes('the stream is over: mcp_progress_done was called')
          ? true
          : undefined,
      30_000,
      () => `the worker to say why its update failed (stderr: ${worker.stderr()})`,
    );
    writeFileSync(join(steps, 'exit'), '');
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
    expect(await refusing.stop()).toBe(0);
  });

  it('closes its connection after a done the daemon did not answer in time; the daemon, resumed, still reads that done', async () => {
    const stopped = await startDaemon();
    const gateway = await connectGateway(stopped.info);
    await gateway.request('progress/subscribe', {
      progressToken: 'c-unanswered',
      minIntervalMs: 0,
    });
    const { child, worker, steps } = startWorker('done-wait', 'c-unanswered', {
      values: 1,
      socket: stopped.info.socket,
      doneTimeoutMs: 300,
    });
    onTestFinished(() => {
      stopped.child.kill('SIGCONT');
      child.kill();
    });
    await eventually(
      () => (progressValues(gateway, 'c-unanswered').includes(1) ? true : undefined),
      30_000,
      'value 1',
    );
    stopped.child.kill('SIGSTOP');
    writeFileSync(join(steps, 'ack-1'), '');
    expect(await waitForEvent(worker, 'done')).toEqual({
      event: 'done',
      delivered: false,
      code: null,
    });
    expect(await waitForEvent(worker, 'after')).toEqual({
      event: 'after',
      failed: true,
      connected: false,
    });
    stopped.child.kill('SIGCONT');
    // Written before the close, the done is read once the daemon runs again: the stream ends ok.
    const done = await eventually(
      () =>
        gateway.notifications.find(
          (n) =>
            n.method === 'notifications/progress/done' && n.params.progressToken === 'c-unanswered',
        ),
      30_000,
      'the done notice',
    );
    expect(done.params).toEqual({
      progressToken: 'c-unanswered',
      status: 'ok',
      message: 'the result',
    });
    await untilNoConnection(gateway);
    writeFileSync(join(steps, 'exit'), '');
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
    expect(await stopped.stop()).toBe(0);
  });

  it('says what is missing when there is no token', async () => {
    const child = spawn(program, ['done', '1', tempDir()], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: '' },
    });
    const output = collectOutput(child);
    // 'close', not 'exit': only then has all of its stderr been read.
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(1);
    expect(output.stderr()).toContain('no token: set MCP_PROGRESS_TOKEN');
  });
});
