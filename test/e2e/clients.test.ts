/**
 * The Node and Python clients, each run as a separate worker process against
 * a real daemon and watched through a real gateway connection. Both clients
 * promise the same behaviour, so the same scenarios run against each.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import { DEFAULT_MIN_INTERVAL_MS } from '../../src/shared/defaults.js';
import { silentLogger } from '../../src/shared/log.js';
import { expectBackedOff, startClosingListener } from '../helpers/closing-listener.js';
import { cleanupAll, eventually, ROOT, startDaemon, tempDir } from '../helpers/daemon.js';
import { startDoneCuttingRelay } from '../helpers/done-cutting-relay.js';
import {
  type DrivenWorker,
  killWorkers,
  nodeWorker,
  pythonWorker,
} from '../helpers/driven-worker.js';
import {
  connectGateway,
  expectRefusalsBackedOff,
  type GatewayClient,
  type Received,
  useWatchedBridge,
} from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { rawWorker } from '../helpers/worker.js';

afterEach(() => killWorkers());
afterAll(() => cleanupAll());
// Each test starts several real processes; on a machine shared with other test runs that can take long.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

/** Both clients' coalescing interval: the Node client's default, and py_worker.py's 0.1 s (the Python default too). */
const CLIENT_INTERVAL_MS = DEFAULT_MIN_INTERVAL_MS;

type Start = (env: Record<string, string>, options?: Record<string, unknown>) => DrivenWorker;

const CLIENTS: Array<{
  name: string;
  start: Start;
  loop: number;
  /** Worker options: a short done retry, and one far longer than any test waits. */
  timeouts: { short: Record<string, unknown>; long: Record<string, unknown> };
}> = [
  {
    name: 'Node',
    start: nodeWorker,
    loop: 1_000_000,
    timeouts: { short: { doneTimeoutMs: 300 }, long: { doneTimeoutMs: 3_600_000 } },
  },
  {
    name: 'Python',
    start: pythonWorker,
    loop: 1_000_000,
    timeouts: { short: { done_timeout: 0.3 }, long: { done_timeout: 3600 } },
  },
];

let counter = 0;
const uniqueToken = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

/** The worker's `ready` event: it has loaded the client. */
const ready = (worker: DrivenWorker) => worker.next((e) => e.event === 'ready', 'ready');

/** The worker's `done` event: whether its done was delivered. */
const doneOutcome = (worker: DrivenWorker) =>
  worker.next((e) => e.event === 'done', 'done outcome');

/** The worker's done was delivered, or reported not delivered. */
async function expectDelivered(worker: DrivenWorker, delivered: boolean): Promise<void> {
  expect(await doneOutcome(worker)).toMatchObject({ delivered });
}

function progressOf(notifications: Received[], token: string): Array<Record<string, unknown>> {
  return notifications
    .filter((n) => n.method === 'notifications/progress' && n.params.progressToken === token)
    .map((n) => n.params);
}

async function until<T>(
  gateway: GatewayClient,
  find: (notifications: Received[]) => T | undefined,
  what: string,
): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = find(gateway.notifications);
    if (found !== undefined) return found;
    if (Date.now() > deadline)
      throw new Error(
        `timed out waiting for ${what}; got ${JSON.stringify(gateway.notifications)}`,
      );
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until the worker's client reports a live connection to the daemon. */
const connected = (worker: DrivenWorker) =>
  eventually(
    async () => {
      worker.send({ state: true });
      const state = await worker.next((e) => e.event === 'state', 'state');
      return state.connected === true ? true : undefined;
    },
    60_000,
    'connected',
  );

const doneNotice = (gateway: GatewayClient, token: string) =>
  until(
    gateway,
    (all) =>
      all.find(
        (n) => n.method === 'notifications/progress/done' && n.params.progressToken === token,
      )?.params,
    `done notice for ${token}`,
  );

const progressReaching = (gateway: GatewayClient, token: string, progress: number) =>
  until(
    gateway,
    (all) => progressOf(all, token).find((p) => p.progress === progress),
    `progress ${progress} for ${token}`,
  );

describe.each(CLIENTS)('the $name client, as a worker process', ({ start, loop, timeouts }) => {
  const bridge = useWatchedBridge();

  const envFor = (token: string) => ({
    MCP_PROGRESS_SOCKET: bridge.daemon.info.socket,
    MCP_PROGRESS_TOKEN: token,
  });
  const watch = async (token: string) => {
    const reply = await bridge.gateway.request('progress/subscribe', {
      progressToken: token,
      minIntervalMs: 0,
    });
    expect(reply.result).toEqual({});
  };
  /** A fresh token, watched, and a worker publishing to it that is ready. */
  const readyWorker = async (prefix: string) => {
    const token = uniqueToken(prefix);
    await watch(token);
    const worker = start(envFor(token));
    await ready(worker);
    return { token, worker };
  };

  it('publishes from its environment, counts an omitted progress, remembers total, and delivers done', async () => {
    const token = uniqueToken('basic');
    await watch(token);
    const worker = start(envFor(token));
    await worker.next((e) => e.event === 'ready' && e.enabled === true, 'ready');
    worker.send({ update: { progress: 1, total: 4, message: 'frame 1' } });
    expect(await progressReaching(bridge.gateway, token, 1)).toEqual({
      progressToken: token,
      progress: 1,
      total: 4,
      message: 'frame 1',
    });
    worker.send({ update: {} });
    expect(await progressReaching(bridge.gateway, token, 2)).toEqual({
      progressToken: token,
      progress: 2,
      total: 4,
    });
    worker.send({ update: { progress: 3.5, message: 'almost' } });
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    expect(await doneNotice(bridge.gateway, token)).toEqual({ progressToken: token, status: 'ok' });
    // The update sent just before done was flushed first, not lost to the throttle.
    expect(progressOf(bridge.gateway.notifications, token).at(-1)).toEqual({
      progressToken: token,
      progress: 3.5,
      total: 4,
      message: 'almost',
    });
  });

  it(`coalesces a tight loop of ${loop} updates into few frames and ends on the newest`, async () => {
    const { token, worker } = await readyWorker('loop');
    // The loop runs between this command and its ok: as long as the machine makes it take.
    const sentAt = performance.now();
    worker.send({ loop });
    await worker.next((e) => e.event === 'ok', 'loop finished');
    const loopMs = performance.now() - sentAt;
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    await doneNotice(bridge.gateway, token);
    const seen = progressOf(bridge.gateway.notifications, token);
    expect(seen.at(-1)).toEqual({
      progressToken: token,
      progress: loop,
      total: loop,
      message: `item ${loop}`,
    });
    // Every accepted frame reaches this unthrottled subscriber, so this counts frames sent: one
    // at once, then at most one per interval while the loop ran, then the newest (at the end of
    // that interval or before done). A slow machine makes a long loop, and so a looser bound;
    // half the interval, so that a timer that fires a little early does not count.
    const intervals = Math.ceil(loopMs / (CLIENT_INTERVAL_MS / 2));
    expect(
      seen.length,
      `${seen.length} frames for a ${Math.round(loopMs)} ms loop`,
    ).toBeLessThanOrEqual(intervals + 2);
    expect(seen.map((p) => p.progress)).toEqual(
      [...seen.map((p) => p.progress as number)].sort((a, b) => a - b),
    );
  });

  it('hears a cancel with its reason, and ends the stream as cancelled', async () => {
    const { token, worker } = await readyWorker('cancel');
    worker.send({ update: { progress: 1 } });
    await progressReaching(bridge.gateway, token, 1);
    const reply = await bridge.gateway.request('progress/cancel', {
      progressToken: token,
      reason: 'user pressed stop',
    });
    expect(reply.result).toEqual({ workers: 1 });
    expect(await worker.next((e) => e.event === 'cancel', 'cancel callback')).toMatchObject({
      reason: 'user pressed stop',
      cancelled: true,
    });
    worker.send({ done: 'cancelled' });
    await expectDelivered(worker, true);
    expect(await doneNotice(bridge.gateway, token)).toEqual({
      progressToken: token,
      status: 'cancelled',
    });
  });

  it('drops a value that does not increase, says why, and goes on', async () => {
    const { token, worker } = await readyWorker('mono');
    worker.send({ update: { progress: 5 } });
    await progressReaching(bridge.gateway, token, 5);
    worker.send({ update: { progress: 3 } });
    const error = await worker.next((e) => e.event === 'error', 'a report');
    expect(String(error.message)).toContain('progress 3 is not greater than the last progress 5');
    worker.send({ update: { progress: 6 } });
    await progressReaching(bridge.gateway, token, 6);
    expect(progressOf(bridge.gateway.notifications, token).map((p) => p.progress)).toEqual([5, 6]);
  });

  it('cuts a message over 4096 UTF-8 bytes at a code point, in an update and in done', async () => {
    const { token, worker } = await readyWorker('long');
    // 70,000 bytes make a frame over 64 KiB; 6,000 of "€" (3 bytes each) one the daemon would refuse.
    worker.send({ update: { progress: 1, message: 'x'.repeat(70_000) } });
    expect((await progressReaching(bridge.gateway, token, 1)).message).toBe(
      `${'x'.repeat(4093)}...`,
    );
    worker.send({ update: { progress: 2, message: '€'.repeat(2000) } });
    expect((await progressReaching(bridge.gateway, token, 2)).message).toBe(
      `${'€'.repeat(1364)}...`,
    );
    worker.send({ done: 'error', message: `${'a'.repeat(4092)}€€` });
    await expectDelivered(worker, true);
    expect(await doneNotice(bridge.gateway, token)).toEqual({
      progressToken: token,
      status: 'error',
      message: `${'a'.repeat(4092)}...`,
    });
  });

  it('does nothing, and says it is off, without a token', async () => {
    const worker = start({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket });
    expect(await worker.next((e) => e.event === 'ready', 'ready')).toMatchObject({
      enabled: false,
    });
    worker.send({ update: { progress: 1 } });
    worker.send({ done: 'ok' });
    await expectDelivered(worker, false);
  });

  it('runs on when no daemon is there, and sends the newest update once one starts', async () => {
    const runtimeDir = tempDir();
    const token = uniqueToken('late');
    const worker = start({
      MCP_PROGRESS_SOCKET: join(runtimeDir, 'bridge.sock'),
      MCP_PROGRESS_TOKEN: token,
    });
    await ready(worker);
    worker.send({ update: { progress: 1, message: 'early' } });
    worker.send({ update: { progress: 2, message: 'newest' } });
    // The report may come before or after "ready": the client tries to connect at once.
    const error = await eventually(
      () => worker.events.find((e) => e.event === 'error'),
      60_000,
      'a report',
    );
    expect(String(error.message)).toMatch(/no daemon/);
    const late = await startDaemon([], runtimeDir);
    const lateGateway = await connectGateway(late.info);
    await lateGateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const seen = await until(lateGateway, (all) => progressOf(all, token)[0], 'the newest update');
    expect(seen).toEqual({ progressToken: token, progress: 2, message: 'newest' });
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    expect(progressOf(lateGateway.notifications, token).map((p) => p.progress)).toEqual([2]);
    await lateGateway.close();
    await late.stop();
  });

  it('reports done as not delivered without its long retry when it never reached a daemon', async () => {
    const token = uniqueToken('never');
    const worker = start(
      { MCP_PROGRESS_SOCKET: join(tempDir(), 'bridge.sock'), MCP_PROGRESS_TOKEN: token },
      timeouts.long,
    );
    await ready(worker);
    worker.send({ update: { progress: 1 } });
    worker.send({ done: 'ok' });
    // An hour's retry: only the never-connected grace lets this answer come within the wait.
    await expectDelivered(worker, false);
  });

  it('keeps retrying done after losing a daemon it had, until one is back', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const token = uniqueToken('regained');
    const worker = start(
      { MCP_PROGRESS_SOCKET: first.info.socket, MCP_PROGRESS_TOKEN: token },
      timeouts.long,
    );
    await ready(worker);
    await connected(worker);
    await first.stop();
    worker.send({ done: 'ok' });
    const second = await startDaemon([], runtimeDir);
    await expectDelivered(worker, true);
    await second.stop();
  });

  it('reports done as not delivered after its bounded retry when the daemon it had does not come back', async () => {
    const gone = await startDaemon();
    const token = uniqueToken('nodaemon');
    const worker = start(
      { MCP_PROGRESS_SOCKET: gone.info.socket, MCP_PROGRESS_TOKEN: token },
      timeouts.short,
    );
    await ready(worker);
    worker.send({ update: { progress: 1 } });
    await connected(worker);
    await gone.stop();
    worker.send({ done: 'ok' });
    await expectDelivered(worker, false);
  });
});

describe('the Node client, given what it must not throw on', () => {
  const bridge = useWatchedBridge();

  it('counts one up on update() with no argument, and reports and ignores what is not an object', async () => {
    const token = uniqueToken('noarg');
    await bridge.gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const worker = nodeWorker(
      { MCP_PROGRESS_SOCKET: bridge.daemon.info.socket, MCP_PROGRESS_TOKEN: token },
      { intervalMs: 0 },
    );
    await ready(worker);
    worker.send({ updateWith: 'nothing' });
    await worker.next((e) => e.event === 'ok', 'update() returned');
    for (const bad of [null, 5, 'text', [1, 2]]) {
      worker.send({ updateWith: bad });
      expect(
        await worker.next((e) => e.event !== 'ok', `a report on ${String(bad)}`),
      ).toMatchObject({ event: 'error', code: 'invalid_field' });
    }
    worker.send({ updateWith: 'nothing' });
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    await doneNotice(bridge.gateway, token);
    expect(progressOf(bridge.gateway.notifications, token).map((p) => p.progress)).toEqual([1, 2]);
  });
});

describe.each(CLIENTS)('the $name client, refused a frame as malformed', ({ start }) => {
  let daemon: Daemon;
  let gateway: GatewayClient;
  beforeAll(async () => {
    // A daemon with a small frame limit (a library option, no flag) refuses a frame that another would take.
    daemon = await Daemon.start(
      { runtimeDir: tempDir(), port: 0, maxFrameBytes: 512 },
      silentLogger,
    );
    gateway = await connectGateway(daemon.info);
  });
  afterAll(async () => {
    await gateway.close();
    await daemon.stop();
  });

  /** An error event of that code (both fixtures report the code their client gives). */
  const reports = (event: { event: string; code?: unknown }, code: string) =>
    event.event === 'error' && event.code === code;

  it('does not send that frame again, and delivers the done that follows', async () => {
    const token = uniqueToken('refused');
    await gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const worker = start({ MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: token });
    await ready(worker);
    await connected(worker);
    worker.send({ update: { progress: 1, message: 'y'.repeat(1000) } });
    await worker.next((e) => reports(e, 'frame_too_large'), 'the refusal');
    // The daemon closed the connection; once the client is back on a new one, it has sent what it resends.
    await worker.next((e) => reports(e, 'daemon_disconnected'), 'the close');
    await connected(worker);
    // Had the client sent the refused frame again on this connection, before done, done could
    // never be delivered: each new connection would be refused and closed before done's ack.
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    expect(await doneNotice(gateway, token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(gateway.notifications, token)).toEqual([]);
  });
});

describe.each(CLIENTS)('the $name client, at a daemon that is full', ({ start }) => {
  it('comes back with backoff, not at once, and gets in once there is room', async () => {
    const daemon = await startDaemon(['--max-connections', '1']);
    const gateway = await connectGateway(daemon.info);
    const held = await rawWorker(daemon.info.socket);
    const token = uniqueToken('full');
    await gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const worker = start({ MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: token });
    await ready(worker);
    worker.send({ update: { progress: 1 } });
    await expectRefusalsBackedOff(gateway, (c) => c.connectionsRefused, 'refused connections');
    held.destroy();
    const value = await progressReaching(gateway, token, 1);
    expect(value).toMatchObject({ progressToken: token, progress: 1 });
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    await gateway.close();
    await daemon.stop();
  });
});

describe.each(CLIENTS)(
  'the $name client, whose connection is lost after its done reached the daemon',
  ({ start }) => {
    const bridge = useWatchedBridge();

    it('sends the done again and counts its stream_closed as delivered: the first one ended the stream', async () => {
      const token = uniqueToken('resent');
      await bridge.gateway.request('progress/subscribe', {
        progressToken: token,
        minIntervalMs: 0,
      });
      // The relay cuts the worker's connection once the daemon has acked its done, the ack unread.
      const relay = await startDoneCuttingRelay(bridge.daemon.info.socket);
      onTestFinished(() => relay.close());
      const worker = start({ MCP_PROGRESS_SOCKET: relay.path, MCP_PROGRESS_TOKEN: token });
      await ready(worker);
      await connected(worker);
      worker.send({ done: 'ok' });
      await expectDelivered(worker, true);
      expect(relay.cut).toBe(true);
      expect(relay.connections).toBe(2);
      expect(await doneNotice(bridge.gateway, token)).toEqual({
        progressToken: token,
        status: 'ok',
      });
    });
  },
);

describe('the Python client, given text that is not Unicode', () => {
  const bridge = useWatchedBridge();

  it('sends a message holding lone surrogates (a name decoded with surrogateescape) with U+FFFD for each', async () => {
    const token = uniqueToken('surrogate');
    await bridge.gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const worker = pythonWorker({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket }, { token });
    await ready(worker);
    worker.send({ update: { progress: 1, message: 'file-\udcff\udcfe.bin' } });
    expect((await progressReaching(bridge.gateway, token, 1)).message).toBe(
      'file-\ufffd\ufffd.bin',
    );
    worker.send({ done: 'error', message: 'stopped at \ud800' });
    await expectDelivered(worker, true);
    expect(await doneNotice(bridge.gateway, token)).toMatchObject({
      message: 'stopped at \ufffd',
    });
  });

  it('refuses a token that holds a lone surrogate itself (invalid_token), turns progress off, and runs on', async () => {
    const worker = pythonWorker(
      { MCP_PROGRESS_SOCKET: bridge.daemon.info.socket },
      { token: 'job-\udcff', done_timeout: 0.3 },
    );
    // Said as the client starts, before it is ready: nothing is sent under that token.
    const error = await worker.next((e) => e.event === 'error', 'the refusal');
    expect(error.code).toBe('invalid_token');
    expect(String(error.message)).toContain('holds a lone surrogate');
    expect(await ready(worker)).toMatchObject({ enabled: false });
    worker.send({ update: { progress: 1 } });
    worker.send({ state: true });
    await worker.next((e) => e.event === 'state', 'the worker still running');
    worker.send({ done: 'ok' });
    await expectDelivered(worker, false);
  });
});

describe('the Python client, whose connection carries bytes that are not UTF-8', () => {
  const bridge = useWatchedBridge();

  it('reports the daemon refusing them with its code (invalid_utf8), comes back, and delivers its done', async () => {
    const token = uniqueToken('not-utf8');
    await bridge.gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const worker = pythonWorker({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket }, { token });
    await ready(worker);
    await connected(worker);
    // The client sends only UTF-8 (it cleans lone surrogates first): the fixture writes this
    // frame, a message holding the byte 0xFF, on the client's own connection, as it is.
    const frame = Buffer.concat([
      Buffer.from(`{"type":"progress","data":{"v":1,"progressToken":${JSON.stringify(token)},`),
      Buffer.from('"progress":1,"message":"bad '),
      Buffer.from([0xff]),
      Buffer.from('"}}\f'),
    ]);
    worker.send({ raw: frame.toString('base64') });
    const refusal = await worker.next(
      (e) => e.event === 'error' && e.code === 'invalid_utf8',
      'the refusal, with its code',
    );
    expect(String(refusal.message)).toContain(
      'the daemon refused a frame (invalid_utf8) and closed the connection; it is not sent again: ',
    );
    // The daemon closed that connection; the client is back on a new one, and its done is delivered.
    await worker.next((e) => e.event === 'error' && e.code === 'daemon_disconnected', 'the close');
    await connected(worker);
    worker.send({ done: 'ok' });
    await expectDelivered(worker, true);
    expect(await doneNotice(bridge.gateway, token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(bridge.gateway.notifications, token)).toEqual([]);
  });
});

describe('the Python client, at a socket that closes every connection at once, saying nothing', () => {
  it('waits its backoff step after each lost connection, not a tight loop', async () => {
    const closing = await startClosingListener(tempDir());
    const worker = pythonWorker({
      MCP_PROGRESS_SOCKET: closing.path,
      MCP_PROGRESS_TOKEN: uniqueToken('closing'),
    });
    await ready(worker);
    // It publishes for a second by its own clock, then closes: its client ran for `ms`.
    worker.send({ publish_for: 1 });
    const published = await worker.next((e) => e.event === 'published', 'published');
    worker.send({ exit: 0 });
    expect(await worker.exit()).toBe(0);
    expectBackedOff(closing, Number(published.ms));
  });
});

describe('the Python client, on its own', () => {
  const python = (code: string, env: Record<string, string>) =>
    spawnSync(PYTHON, [...PYTHON_ARGS, '-c', `import sys\nsys.path.insert(0, ".")\n${code}`], {
      // Isolated mode (-I) leaves the working directory off sys.path: the client's folder is put on it.
      cwd: join(ROOT, 'clients/python'),
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });

  it('turns progress off, saying why and how to fix it, for a relative $MCP_PROGRESS_RUNTIME_DIR', () => {
    const run = python(
      'import mcp_progress\nwith mcp_progress.Progress() as p:\n    p.update(1)\nprint(p.token)',
      {
        MCP_PROGRESS_RUNTIME_DIR: 'relative/dir',
        MCP_PROGRESS_TOKEN: 'rel',
        MCP_PROGRESS_SOCKET: '',
      },
    );
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('None');
    expect(run.stderr).toContain('$MCP_PROGRESS_RUNTIME_DIR is "relative/dir", a relative path');
    expect(run.stderr).toContain(`such as "${join(ROOT, 'clients/python/relative/dir')}"`);
    expect(run.stderr).toContain('progress is off');
  });

  it('waits between reconnects as the Node client does: a random part of each doubling step taken off', () => {
    const run = python(
      [
        'import json, mcp_progress',
        'waits = [[mcp_progress.backoff_delay(a) for _ in range(200)] for a in range(8)]',
        'print(json.dumps(waits))',
      ].join('\n'),
      {},
    );
    expect(run.status, run.stderr).toBe(0);
    const waits = JSON.parse(run.stdout) as number[][];
    for (const [attempt, samples] of waits.entries()) {
      const step = Math.min(2000, 50 * 2 ** attempt) / 1000;
      for (const wait of samples) {
        expect(wait).toBeGreaterThanOrEqual(step / 2);
        expect(wait).toBeLessThanOrEqual(step);
      }
      // Jitter: 200 draws are not all one value.
      expect(new Set(samples).size).toBeGreaterThan(100);
    }
  });
});
