/**
 * Windows for real (issue 24): the daemon, workers and the CLI run as Windows programs (npm's
 * Windows build of Node) under Wine, over a named pipe; the sessions that watch them are Linux
 * ones, over loopback TCP. Outside CI a missing Wine skips this file; under CI it fails.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { buildCProgram, buildCWorker, mingw } from '../helpers/c-client.js';
import { BIN, cleanupAll, eventually, ROOT } from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import {
  events,
  expectCancelReaches,
  expectEveryValueThenOneDone,
  progressValues,
  stepThrough,
  untilWorkerConnected,
  waitForEvent,
} from '../helpers/stepped-worker.js';
import {
  type WindowsProcess,
  type WinePrefix,
  windowsNode,
  wine,
  winePrefix,
  winPath,
} from '../helpers/wine.js';

const PIPE = /^\\\\\.\\pipe\\mcp-progress-[0-9a-f]{32}$/;
const WORKER = winPath(join(ROOT, 'test/fixtures/windows_worker.mjs'));
const MCP_HOST = winPath(join(ROOT, 'test/fixtures/windows_mcp_client.mjs'));
const TREE = winPath(join(ROOT, 'test/fixtures/windows_tree.mjs'));

interface WindowsDaemon {
  readonly runtimeDir: string;
  readonly process: WindowsProcess;
  readonly info: DaemonInfo;
}

let prefix: WinePrefix;

/** `mcp-progress daemon` under Wine on `runtimeDir`, on an ephemeral gateway port. */
const windowsDaemon = (runtimeDir: string) =>
  prefix.node([winPath(BIN), 'daemon', '--runtime-dir', winPath(runtimeDir), '--port', '0']);

/** Starts `mcp-progress daemon` under Wine on `runtimeDir` and waits until it is ready. */
async function startWindowsDaemon(runtimeDir: string): Promise<WindowsDaemon> {
  mkdirSync(runtimeDir, { recursive: true });
  const daemon = windowsDaemon(runtimeDir);
  await eventually(
    () => (daemon.stderr().includes('ready:') ? true : undefined),
    60_000,
    () => `the Windows daemon to be ready (stderr: ${daemon.stderr()})`,
  );
  const info = JSON.parse(readFileSync(join(runtimeDir, 'daemon.json'), 'utf8')) as DaemonInfo;
  return { runtimeDir, process: daemon, info };
}

/** Lines the daemon logged at error or warn level. */
function complaints(daemon: WindowsDaemon): string[] {
  return daemon.process
    .stderr()
    .split('\n')
    .filter((line) => /^mcp-progress (error|warn):/.test(line));
}

describe.skipIf(wine.skip || mingw.skip)('on Windows (Windows Node under Wine)', () => {
  let work: string;
  let daemon: WindowsDaemon;
  let cWorkerExe: string;
  let consoleCtrlExe: string;
  beforeAll(async () => {
    prefix = await winePrefix();
    work = join(prefix.dir, 'work');
    mingw.require();
    cWorkerExe = winPath(buildCWorker('x86_64-w64-mingw32-gcc', prefix.dir));
    consoleCtrlExe = winPath(buildCProgram('x86_64-w64-mingw32-gcc', prefix.dir, 'console_ctrl'));
    daemon = await startWindowsDaemon(join(work, 'runtime'));
  }, 180_000);
  afterAll(() => {
    prefix?.stop();
    cleanupAll();
  });

  it('listens on a named pipe with 128 random bits in its name, kept in the runtime dir', () => {
    expect(daemon.info.socket).toMatch(PIPE);
    expect(readFileSync(join(daemon.runtimeDir, 'pipe-name'), 'utf8').trim()).toBe(
      daemon.info.socket,
    );
  });

  /** A worker program under Wine, on `token`, with a steps dir of its own. */
  function startWorker(program: readonly string[], mode: string, token: string) {
    const steps = join(work, `steps-${token}`);
    mkdirSync(steps, { recursive: true });
    const worker = prefix.start(
      program[0] ?? '',
      [...program.slice(1), mode, '3', winPath(steps)],
      {
        MCP_PROGRESS_SOCKET: daemon.info.socket,
        MCP_PROGRESS_TOKEN: token,
      },
    );
    return { worker, steps };
  }

  it.each([
    ['Windows Node', () => [windowsNode(), WORKER]],
    ['mingw-built C', () => [cWorkerExe]],
  ])(
    'a %s worker publishes over the pipe: a Linux session gets every value, done once; cancel reaches it',
    async (kind, program) => {
      const token = `win-${kind.replace(/\W/g, '')}`;
      const gateway = await connectGateway(daemon.info);
      await gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
      const { worker, steps } = startWorker(program(), 'done', token);
      await expectEveryValueThenOneDone(gateway, token, worker, steps);
      await worker.exited();
      const { worker: cancelled } = startWorker(program(), 'cancel', `${token}-cancel`);
      await expectCancelReaches(gateway, `${token}-cancel`, cancelled);
      await gateway.close();
    },
    180_000,
  );

  it('a Windows MCP host spawning `mcp-progress mcp` and a Linux session both get every value, done once, and the result', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'win-mcp', minIntervalMs: 0 });
    const host = prefix.node([MCP_HOST, winPath(BIN), winPath(daemon.runtimeDir), 'win-mcp']);
    await waitForEvent(host, 'connected');
    const { worker, steps } = startWorker([windowsNode(), WORKER], 'done', 'win-mcp');
    await expectEveryValueThenOneDone(gateway, 'win-mcp', worker, steps, (value) =>
      events(host).some((e) => e.event === 'progress' && e.progress === value),
    );
    const result = await waitForEvent(host, 'result');
    expect(result.result).toMatchObject({
      progressToken: 'win-mcp',
      state: 'done',
      status: 'ok',
      progress: 3,
      total: 3,
    });
    expect(
      events(host)
        .filter((e) => e.event === 'progress')
        .map((e) => e.progress),
    ).toEqual([1, 2, 3]);
    expect(await host.exited()).toBe(0);
    await gateway.close();
  }, 180_000);

  it('status --json and tail --json, run by Windows Node, read the daemon through daemon.json', async () => {
    const status = prefix.node([
      winPath(BIN),
      'status',
      '--json',
      '--runtime-dir',
      winPath(daemon.runtimeDir),
    ]);
    expect(await status.exited()).toBe(0);
    expect(JSON.parse(status.stdout())).toMatchObject({ pid: expect.any(Number) });
    const tail = prefix.node([
      winPath(BIN),
      'tail',
      '--json',
      '--runtime-dir',
      winPath(daemon.runtimeDir),
    ]);
    try {
      // The finished stream of the test before is listed.
      await eventually(
        () => (tail.stdout().includes('win-WindowsNode') ? true : undefined),
        60_000,
        () => `tail --json to show win-WindowsNode (stderr: ${tail.stderr()})`,
      );
      const line =
        tail
          .stdout()
          .split('\n')
          .find((text) => text.includes('win-WindowsNode')) ?? '';
      expect(() => JSON.parse(line)).not.toThrow();
    } finally {
      tail.child.kill('SIGKILL');
    }
  }, 120_000);

  it('run stops CMD and its grandchild when the job is cancelled', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'win-run', minIntervalMs: 0 });
    const pids = join(work, 'tree.json');
    const run = prefix.node(
      [
        winPath(BIN),
        'run',
        '--token',
        'win-run',
        '--',
        winPath(windowsNode()),
        TREE,
        winPath(pids),
      ],
      {
        MCP_PROGRESS_SOCKET: daemon.info.socket,
      },
    );
    const tree = await eventually(
      () =>
        existsSync(pids)
          ? (JSON.parse(readFileSync(pids, 'utf8')) as { child: number; grandchild: number })
          : undefined,
      60_000,
      () => `CMD to start (run's stderr: ${run.stderr()})`,
    );
    await eventually(
      async () => {
        const reply = await gateway.request('progress/cancel', { progressToken: 'win-run' });
        return (reply.result as { workers?: number } | undefined)?.workers === 1 ? true : undefined;
      },
      60_000,
      'the cancel to reach run',
    );
    await eventually(
      async () => (run.child.exitCode !== null || run.child.signalCode !== null ? true : undefined),
      90_000,
      () => `run to exit after the cancel (run's stderr: ${run.stderr()})`,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; run's stderr now: ${run.stderr()}`);
    });
    await run.exited();
    const probe = prefix.node([
      '-e',
      `for (const pid of [${tree.child}, ${tree.grandchild}]) { try { process.kill(pid, 0); console.log(pid, 'alive'); } catch { console.log(pid, 'gone'); } }`,
    ]);
    await probe.exited();
    expect(probe.stdout()).toContain(`${tree.child} gone`);
    expect(probe.stdout()).toContain(`${tree.grandchild} gone`);
    await gateway.close();
  }, 180_000);

  it('a daemon killed and started again replays an acked done, on the same pipe', async () => {
    const first = await startWindowsDaemon(join(work, 'runtime-restart'));
    const steps = join(work, 'steps-restart');
    mkdirSync(steps, { recursive: true });
    writeFileSync(join(steps, 'ack-1'), '');
    const worker = prefix.node([WORKER, 'done', '1', winPath(steps)], {
      MCP_PROGRESS_SOCKET: first.info.socket,
      MCP_PROGRESS_TOKEN: 'win-durable',
    });
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true });
    first.process.child.kill('SIGKILL');
    await first.process.exited();
    const second = await startWindowsDaemon(first.runtimeDir);
    expect(second.info.socket).toBe(first.info.socket);
    const gateway = await connectGateway(second.info);
    await gateway.request('progress/subscribe', { progressToken: 'win-durable' });
    await eventually(
      () => gateway.notifications.find((n) => n.method === 'notifications/progress/done'),
      60_000,
      'the replayed done',
    );
    expect(
      gateway.notifications.filter((n) => n.method === 'notifications/progress/done')[0]?.params,
    ).toMatchObject({ progressToken: 'win-durable', status: 'ok' });
    await gateway.close();
    expect(complaints(second)).toEqual([]);
    second.process.child.kill('SIGKILL');
  }, 240_000);

  // What stops a console program gracefully on Windows: a SIGTERM or SIGINT that another process
  // sends is TerminateProcess there. Under Wine, an event no handler takes ends the process with
  // exit 0 too: the log and daemon.json tell a clean stop from that.
  it.each([
    ['Ctrl+Break', 1],
    ['Ctrl+C', 0],
    ['its console window closing', 2],
  ])(
    '%s stops the daemon gracefully: exit 0, its worker let go, daemon.json removed, the acked done kept for the next daemon',
    async (name, event) => {
      const first = await startWindowsDaemon(join(work, `runtime-stop-${event}`));
      const token = `win-stop-${event}`;
      const workerOn = (suffix: string, mode: string) => {
        const steps = join(work, `steps-stop-${event}-${suffix}`);
        mkdirSync(steps, { recursive: true });
        writeFileSync(join(steps, 'ack-1'), '');
        return prefix.node([WORKER, mode, '1', winPath(steps)], {
          MCP_PROGRESS_SOCKET: first.info.socket,
          MCP_PROGRESS_TOKEN: `${token}-${suffix}`,
        });
      };
      const finished = workerOn('done', 'done');
      expect(await waitForEvent(finished, 'done')).toMatchObject({ delivered: true });
      const gateway = await connectGateway(first.info);
      const sessionClosed = new Promise<number>((resolve) =>
        gateway.ws.once('close', (code) => resolve(code)),
      );
      await gateway.request('progress/subscribe', { progressToken: `${token}-held` });
      // Published its value and waits for a cancel: connected when the event comes.
      const held = workerOn('held', 'cancel');
      await eventually(
        () => (progressValues(gateway, `${token}-held`).includes(1) ? true : undefined),
        60_000,
        () => `the held worker's value (stderr: ${held.stderr()})`,
      );

      const ctrl = prefix.start(consoleCtrlExe, [String(first.info.pid), String(event)]);
      expect(await ctrl.exited(), ctrl.stderr()).toBe(0);
      await eventually(
        () => (first.process.child.exitCode !== null ? true : undefined),
        60_000,
        () => `the daemon to exit after ${name} (stderr: ${first.process.stderr()})`,
      );
      expect(first.process.child.exitCode, first.process.stderr()).toBe(0);
      expect(existsSync(join(first.runtimeDir, 'daemon.json')), 'daemon.json left behind').toBe(
        false,
      );
      expect(first.process.stderr()).toMatch(/^mcp-progress info: stopped$/m);
      expect(complaints(first)).toEqual([]);
      expect(await sessionClosed).toBe(1001);
      expect(await waitForEvent(held, 'error')).toMatchObject({ code: 'daemon_disconnected' });

      const second = await startWindowsDaemon(first.runtimeDir);
      expect(second.info.socket).toBe(first.info.socket);
      const after = await connectGateway(second.info);
      await after.request('progress/subscribe', { progressToken: `${token}-done` });
      const replayed = await eventually(
        () => after.notifications.find((n) => n.method === 'notifications/progress/done'),
        60_000,
        'the replayed done',
      );
      expect(replayed.params).toMatchObject({ progressToken: `${token}-done`, status: 'ok' });
      await after.close();
      expect(complaints(second)).toEqual([]);
      held.child.kill('SIGKILL');
      second.process.child.kill('SIGKILL');
    },
    240_000,
  );

  it('a mingw-built C worker connects again to a daemon started again on its pipe: its newest value, later values and the done reach it', async () => {
    const first = await startWindowsDaemon(join(work, 'runtime-c-restart'));
    const before = await connectGateway(first.info);
    await before.request('progress/subscribe', {
      progressToken: 'win-c-restart',
      minIntervalMs: 0,
    });
    const steps = join(work, 'steps-c-restart');
    mkdirSync(steps, { recursive: true });
    const worker = prefix.start(cWorkerExe, ['done', '3', winPath(steps)], {
      MCP_PROGRESS_SOCKET: first.info.socket,
      MCP_PROGRESS_TOKEN: 'win-c-restart',
    });
    const values = (gateway: GatewayClient) => progressValues(gateway, 'win-c-restart');
    await eventually(() => (values(before).includes(1) ? true : undefined), 60_000, 'value 1');
    await before.close();
    first.process.child.kill('SIGKILL');
    await first.process.exited();

    const second = await startWindowsDaemon(first.runtimeDir);
    expect(second.info.socket).toBe(first.info.socket);
    const after = await connectGateway(second.info);
    await after.request('progress/subscribe', { progressToken: 'win-c-restart', minIntervalMs: 0 });
    await untilWorkerConnected(after);
    await stepThrough(steps, 3, (value) => value === 1 || values(after).includes(value));
    expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true });
    await worker.exited();
    // Value 1, sent again once it was back, before value 2.
    expect(values(after)).toEqual([1, 2, 3]);
    await after.close();
    expect(complaints(second)).toEqual([]);
    second.process.child.kill('SIGKILL');
  }, 240_000);

  it('a pipe that already exists stops the daemon with an error naming it', async () => {
    const squatter = prefix.node([
      '-e',
      "const n = require('net'); const name = '\\\\\\\\.\\\\pipe\\\\mcp-progress-' + require('crypto').randomBytes(16).toString('hex'); n.createServer(() => {}).listen(name, () => console.log(name));",
    ]);
    const name = await eventually(
      () => squatter.stdout().trim() || undefined,
      60_000,
      () => `the squatter's pipe (stderr: ${squatter.stderr()})`,
    );
    const runtimeDir = join(work, 'runtime-squatted');
    mkdirSync(runtimeDir, { recursive: true });
    writeFileSync(join(runtimeDir, 'pipe-name'), `${name}\n`);
    const refused = windowsDaemon(runtimeDir);
    expect(await refused.exited()).not.toBe(0);
    expect(refused.stderr()).toContain(`the named pipe ${name} already exists`);
    squatter.child.kill('SIGKILL');
  }, 120_000);

  it("a running daemon's daemon.lock cannot be opened by another process", async () => {
    const lock = winPath(join(daemon.runtimeDir, 'daemon.lock'));
    const probe = prefix.node([
      '-e',
      `require('fs').promises.open(${JSON.stringify(lock)}, 'r+').then(() => console.log('opened'), (e) => console.log('refused', e.code))`,
    ]);
    await probe.exited();
    expect(probe.stdout().trim()).toBe('refused EBUSY');
  }, 120_000);

  it('of 3 daemons started at once on one runtime dir, one runs: daemon.lock is held with no sharing', async () => {
    const runtimeDir = join(work, 'runtime-race');
    mkdirSync(runtimeDir, { recursive: true });
    const daemons = [0, 1, 2].map(() => windowsDaemon(runtimeDir));
    const exits = daemons.map((d) => d.exited());
    const settled = await eventually(
      () => {
        const ready = daemons.filter((d) => d.stderr().includes('ready:'));
        const gone = daemons.filter((d) => d.child.exitCode !== null);
        return ready.length + gone.length === daemons.length ? { ready, gone } : undefined;
      },
      90_000,
      'every daemon to be ready or gone',
    );
    // Every daemon's stderr with the count: a second winner (seen once, under load) says how.
    expect(
      settled.ready.length,
      daemons.map((d, i) => `daemon ${i} (exit ${d.child.exitCode}):\n${d.stderr()}`).join('\n'),
    ).toBe(1);
    for (const loser of settled.gone) expect(loser.stderr()).toMatch(/already running/);
    for (const d of settled.ready) d.child.kill('SIGKILL');
    await Promise.all(exits);
  }, 180_000);

  it('the daemon logged no error or warning', () => {
    expect(complaints(daemon)).toEqual([]);
  });
});
