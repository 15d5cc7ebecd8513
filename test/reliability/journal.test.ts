/**
 * The done journal against the real daemon (issue 23 items 3 and 4, issue 22 item 6): a replayed
 * done keeps the stream's last value and times; a journal the daemon cannot read is kept and
 * named, as an unprivileged user; on a full (1 MiB tmpfs) or read-only file system a done is
 * refused journal_failed, not applied, and the clients resend it; a journal the disk cannot
 * hold at start is a clear start error.
 */

import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectPublisher } from '../../src/client/index.js';
import { doneJournalPath } from '../../src/daemon/done-journal.js';
import type { DaemonStatus, StreamSummary } from '../../src/protocol/frames.js';
import { buildCWorker, cc } from '../helpers/c-client.js';
import {
  cleanupAll,
  collectOutput,
  DAEMON_ENV,
  daemonCommand,
  eventually,
  ROOT,
  type RunningDaemon,
  runCli,
  startDaemon,
  tempDir,
  untilReady,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio, httpBase, textOf } from '../helpers/mcp.js';
import { letOthersReachCheckout } from '../helpers/other-user.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { tool } from '../helpers/tools.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const mounts: string[] = [];
afterEach(() => {
  // The daemons first: a mount they hold open cannot be unmounted.
  cleanupAll();
  for (const mountPoint of mounts.splice(0)) {
    spawnSync('umount', ['-l', mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  }
});

async function get(daemon: RunningDaemon, progressToken: string): Promise<StreamSummary> {
  const gateway = await connectGateway(daemon.info);
  try {
    const reply = await gateway.request('progress/get', { progressToken });
    return (reply.result as { stream: StreamSummary }).stream;
  } finally {
    await gateway.close();
  }
}

async function status(daemon: RunningDaemon): Promise<DaemonStatus> {
  const gateway = await connectGateway(daemon.info);
  try {
    return (await gateway.request('progress/status')).result as DaemonStatus;
  } finally {
    await gateway.close();
  }
}

async function metricsOf(daemon: RunningDaemon): Promise<string> {
  const answer = await fetch(`${httpBase(daemon.info)}/metrics`, {
    headers: { authorization: `Bearer ${daemon.info.secret}` },
  });
  return answer.text();
}

async function kill9(daemon: RunningDaemon): Promise<void> {
  daemon.child.kill('SIGKILL');
  await waitForExit(daemon.child);
}

describe('a replayed done keeps the stream as it was', () => {
  it('after kill -9 a late subscriber gets the last value, then done; progress/get and list_progress show the real progress and times', async () => {
    // Coalescing of 100 ms: the done is acked, not yet delivered, when the daemon dies.
    const first = await startDaemon(['--min-interval-ms', '100']);
    const worker = await rawWorker(first.info.socket);
    worker.send('progress', { v: 1, progressToken: 'render', progress: 1, total: 2, seq: 1 });
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 1);
    // The first value's time is read back before done: the stream then lasts at least 1 ms.
    const started = await get(first, 'render');
    await eventually(() => (Date.now() > started.startedAt ? true : undefined));
    worker.send('progress', {
      v: 1,
      progressToken: 'render',
      progress: 2,
      total: 2,
      message: 'frame 2',
    });
    worker.send('done', {
      v: 1,
      progressToken: 'render',
      status: 'ok',
      message: 'rendered',
      seq: 2,
    });
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 2);
    const before = await get(first, 'render');
    expect(before).toMatchObject({ state: 'done', last: { progress: 2 } });
    await kill9(first);
    worker.destroy();

    const second = await startDaemon([], first.runtimeDir);
    const late = await connectGateway(second.info);
    await late.request('progress/subscribe', { progressToken: 'render', minIntervalMs: 0 });
    const seen = await late.waitFor(2);
    expect(seen.map((n) => [n.method, n.params])).toEqual([
      [
        'notifications/progress',
        { progressToken: 'render', progress: 2, total: 2, message: 'frame 2' },
      ],
      [
        'notifications/progress/done',
        { progressToken: 'render', status: 'ok', message: 'rendered' },
      ],
    ]);
    await late.close();
    const after = await get(second, 'render');
    // The times are the first daemon's, not the restart's: the retention counts from the done.
    expect(after).toEqual({ ...before, subscribers: 0 });
    expect(after.updatedAt - after.startedAt).toBeGreaterThan(0);
    expect((await status(second)).journal).toMatchObject({ recovered: 1, refusedLines: 0 });

    const mcp = await connectStdio(['--runtime-dir', second.runtimeDir]);
    try {
      const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
      const durationS = ((before.updatedAt - before.startedAt) / 1000).toFixed(1);
      expect(textOf(listed)).toContain(
        `"render" done (ok) at 2/2 (100%) after ${durationS} s: rendered`,
      );
    } finally {
      await mcp.close();
    }
    await second.stop();
  });
});

describe('the journal is shared fairly', () => {
  it("a worker flooding long dones is refused on its own share (a quarter); the other workers' dones are acked", async () => {
    const maxBytes = 1024 * 1024;
    const daemon = await startDaemon(['--max-journal-bytes', String(maxBytes)]);
    const flooder = await rawWorker(daemon.info.socket);
    const message = '\u0001'.repeat(4096); // 24 KiB a line once escaped
    let acked = 0;
    let refusal: { code?: string; message?: string } | undefined;
    for (let seq = 1; seq <= 100 && refusal === undefined; seq++) {
      flooder.send('done', { v: 1, progressToken: `flood-${seq}`, status: 'ok', message, seq });
      const answer = await flooder.reply((r) => (r.data as { seq?: number }).seq === seq);
      if (answer.type === 'ack') acked++;
      else refusal = answer.data as typeof refusal;
    }
    expect(refusal?.code).toBe('journal_failed');
    expect(refusal?.message).toContain(
      `one connection may hold at most ${maxBytes / 4} (a quarter of --max-journal-bytes ${maxBytes})`,
    );
    expect(acked).toBeGreaterThan(5);
    expect(acked).toBeLessThan(15);
    // The journal is not failing, and another worker's long dones are still taken.
    const other = await rawWorker(daemon.info.socket);
    for (let seq = 1; seq <= acked; seq++) {
      other.send('done', { v: 1, progressToken: `other-${seq}`, status: 'ok', message, seq });
      const answer = await other.reply((r) => (r.data as { seq?: number }).seq === seq);
      expect(answer.type, JSON.stringify(answer.data)).toBe('ack');
    }
    expect((await status(daemon)).journal.failing).toBe(false);
    expect(daemon.stderr()).toContain('its share (a quarter of --max-journal-bytes');
    flooder.destroy();
    other.destroy();
    await daemon.stop();
  });
});

describe('journal lines that are not dones the daemon wrote', () => {
  it('are refused, counted in status and /metrics, and logged at start; the good ones replay', async () => {
    const runtimeDir = tempDir();
    const now = Date.now();
    const line = (fields: Record<string, unknown>) =>
      JSON.stringify({ v: 1, at: now - 1000, startedAt: now - 2000, status: 'ok', ...fields });
    writeFileSync(
      doneJournalPath(runtimeDir),
      [
        line({ progressToken: 'good' }),
        line({ progressToken: { object: true } }),
        line({ progressToken: 'bogus', status: 'bogus' }),
        line({ progressToken: 'x'.repeat(100_000) }),
        line({ progressToken: 'future', at: now + 365 * 24 * 3600_000 }),
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const daemon = await startDaemon([], runtimeDir);
    expect(daemon.stderr()).toContain('error: done journal: refused 4 line(s)');
    expect((await get(daemon, 'good'))?.state).toBe('done');
    expect(await get(daemon, 'future')).toBeUndefined();
    expect(await get(daemon, 'bogus')).toBeUndefined();
    expect((await status(daemon)).journal).toMatchObject({ recovered: 1, refusedLines: 4 });
    const metrics = await metricsOf(daemon);
    expect(metrics).toContain('mcp_progress_journal_refused_lines_total 4');
    expect(metrics).toContain('mcp_progress_journal_failing 0');
    // Only the good line is left in the journal.
    expect(readFileSync(doneJournalPath(runtimeDir), 'utf8')).toBe(
      `${line({ progressToken: 'good' })}\n`,
    );
    await daemon.stop();
  });
});

// Root is no package: CI runs as root, so there this never fails for a missing package.
const root = tool('root', {
  debian: 'coreutils',
  check: () => process.getuid?.() === 0,
  why: 'the test runs the daemon as another user (nobody), which needs root',
});

const NOBODY = { uid: 65534, gid: 65534 };

describe.skipIf(root.skip)('as an unprivileged user (nobody)', () => {
  beforeAll(() => {
    root.require();
    letOthersReachCheckout();
  });

  it('a journal the daemon cannot read is renamed aside, named in an error with what to do, never deleted', async () => {
    const runtimeDir = tempDir();
    chownSync(runtimeDir, NOBODY.uid, NOBODY.gid);
    chmodSync(runtimeDir, 0o700);
    const first = await startDaemon([], runtimeDir, NOBODY);
    const worker = await rawWorker(first.info.socket);
    worker.send('done', { v: 1, progressToken: 'job', status: 'ok', seq: 1 });
    await worker.reply((r) => r.type === 'ack');
    await kill9(first);
    worker.destroy();
    const journal = doneJournalPath(runtimeDir);
    const content = readFileSync(journal, 'utf8');
    expect(content).toContain('"progressToken":"job"');
    // The owner cannot read it any more (a mistaken chmod, a restore from a backup).
    chmodSync(journal, 0o000);

    const second = await startDaemon([], runtimeDir, NOBODY);
    const aside = readdirSync(runtimeDir).filter((name) =>
      name.startsWith('dones.jsonl.unreadable-'),
    );
    expect(aside).toHaveLength(1);
    const asidePath = join(runtimeDir, aside[0] as string);
    expect(readFileSync(asidePath, 'utf8')).toBe(content);
    expect(second.stderr()).toContain(
      `error: done journal: cannot read ${journal} (EACCES: permission denied`,
    );
    expect(second.stderr()).toContain(`moved it to ${asidePath}`);
    expect(second.stderr()).toContain('move it back');
    expect((await status(second)).journal).toMatchObject({ recovered: 0, failing: false });
    await second.stop();
  });
});

const mountable = tool('mount', {
  debian: 'mount',
  check: () => {
    if (process.getuid?.() !== 0) return false;
    const probe = mkdtempSync(join(tmpdir(), 'mcp-progress-mount-probe-'));
    const mounted =
      spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]).status === 0;
    if (mounted) spawnSync('umount', [probe]);
    rmSync(probe, { recursive: true, force: true });
    return mounted;
  },
  why: 'a 1 MiB tmpfs and a read-only bind mount need root (mount); CI runs as root',
});

/** A fresh 1 MiB tmpfs, unmounted after the test, with a runtime directory in it. */
function smallFileSystem(): { mountPoint: string; runtimeDir: string } {
  const mountPoint = mkdtempSync(join(tmpdir(), 'mcp-progress-tmpfs-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mountPoint]);
  if (mounted.status !== 0) throw new Error(`mount tmpfs failed: ${mounted.stderr}`);
  mounts.push(mountPoint);
  const runtimeDir = join(mountPoint, 'runtime');
  mkdirSync(runtimeDir, { mode: 0o700 });
  return { mountPoint, runtimeDir };
}

/** Fills the file system to the last byte; returns the file to remove to make room again. */
function fill(mountPoint: string): string {
  const filler = join(mountPoint, 'filler');
  const chunk = Buffer.alloc(4096, 120);
  for (;;) {
    try {
      appendFileSync(filler, chunk);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
      throw error;
    }
  }
  // A last partial block: what is left is smaller than a page.
  for (let size = 2048; size >= 1; size = Math.floor(size / 2)) {
    try {
      appendFileSync(filler, chunk.subarray(0, size));
    } catch {}
  }
  return filler;
}

describe.skipIf(mountable.skip)(
  'a journal that cannot take a done (a full or read-only disk)',
  () => {
    beforeAll(() => mountable.require());

    it('ENOSPC: the done is refused journal_failed and not applied; status and /metrics say so; once there is room the resent done is acked and survives kill -9', async () => {
      const { mountPoint, runtimeDir } = smallFileSystem();
      const daemon = await startDaemon([], runtimeDir);
      const worker = await rawWorker(daemon.info.socket);
      worker.send('progress', { v: 1, progressToken: 'job', progress: 1, total: 2, seq: 1 });
      await worker.reply((r) => r.type === 'ack');
      const filler = fill(mountPoint);
      worker.send('done', { v: 1, progressToken: 'job', status: 'ok', seq: 2 });
      const refused = await worker.reply((r) => r.type === 'rejected');
      expect(refused.data).toMatchObject({ code: 'journal_failed', progressToken: 'job', seq: 2 });
      const message = (refused.data as { message: string }).message;
      expect(message).toContain(doneJournalPath(runtimeDir));
      expect(message).toContain('ENOSPC');
      expect(message).toContain('send it again later');
      // Not applied: the stream is active with its last value, as before the done.
      expect(await get(daemon, 'job')).toMatchObject({ state: 'active', last: { progress: 1 } });
      const failing = (await status(daemon)).journal;
      expect(failing).toMatchObject({ failing: true, writeFailures: 1 });
      expect(failing.lastError).toContain('ENOSPC');
      const metrics = await metricsOf(daemon);
      expect(metrics).toContain('mcp_progress_journal_failing 1');
      expect(metrics).toContain('mcp_progress_journal_write_failures_total 1');
      expect(daemon.stderr()).toContain('error: done journal: cannot write to');
      const shown = await runCli(['status', '--runtime-dir', runtimeDir]);
      expect(shown.stdout).toMatch(
        /^journal {8}FAILING \(ENOSPC.*dones are refused journal_failed/m,
      );

      rmSync(filler);
      worker.send('done', { v: 1, progressToken: 'job', status: 'ok', seq: 3 });
      const answer = await worker.reply((r) => (r.data as { seq?: number }).seq === 3);
      expect(answer.type).toBe('ack');
      expect((await status(daemon)).journal.failing).toBe(false);
      await kill9(daemon);
      worker.destroy();
      const again = await startDaemon([], runtimeDir);
      expect(await get(again, 'job')).toMatchObject({
        state: 'done',
        status: 'ok',
        last: { progress: 1, total: 2 },
      });
      await again.stop();
    });

    it('EROFS: a read-only runtime directory refuses the done journal_failed; writable again, the resent done is acked', async () => {
      const { runtimeDir } = smallFileSystem();
      const daemon = await startDaemon([], runtimeDir);
      const worker = await rawWorker(daemon.info.socket);
      for (const args of [
        ['--bind', runtimeDir, runtimeDir],
        ['-o', 'remount,ro,bind', runtimeDir],
      ])
        expect(spawnSync('mount', args).status).toBe(0);
      let readOnly = true;
      try {
        worker.send('done', { v: 1, progressToken: 'ro', status: 'ok', seq: 1 });
        const refused = await worker.reply((r) => r.type === 'rejected');
        expect(refused.data).toMatchObject({ code: 'journal_failed', seq: 1 });
        expect((refused.data as { message: string }).message).toContain('EROFS');
        expect(await get(daemon, 'ro')).toBeUndefined();
      } finally {
        readOnly = spawnSync('umount', [runtimeDir]).status !== 0;
      }
      expect(readOnly).toBe(false);
      worker.send('done', { v: 1, progressToken: 'ro', status: 'ok', seq: 2 });
      const answer = await worker.reply((r) => (r.data as { seq?: number }).seq === 2);
      expect(answer.type).toBe('ack');
      worker.destroy();
      await daemon.stop();
    });

    /** Each client's done for `token` on `socket`, with a minute to be delivered; true when acked. */
    let cWorkerProgram: string | undefined;
    const clientDones: Array<
      [string, (socket: string, token: string) => Promise<boolean>, string]
    > = [
      [
        'Node',
        async (socket, token) => {
          const publisher = await connectPublisher({
            token,
            socket,
            intervalMs: 0,
            doneTimeoutMs: 60_000,
            onError: () => {},
          });
          const { delivered } = await publisher.done('ok', 'finished');
          await publisher.close();
          return delivered;
        },
        'finished',
      ],
      [
        'Python',
        async (socket, token) => {
          const script = [
            'import sys',
            `sys.path.insert(0, ${JSON.stringify(join(ROOT, 'clients/python'))})`,
            'import mcp_progress',
            'p = mcp_progress.Progress(sys.argv[1], sys.argv[2], interval=0, done_timeout=60)',
            'print("delivered" if p.done("ok", "finished") else "lost", flush=True)',
          ].join('\n');
          const child = spawn(PYTHON, [...PYTHON_ARGS, '-c', script, token, socket], {
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          const output = collectOutput(child);
          await waitForExit(child);
          return output.stdout().trim() === 'delivered';
        },
        'finished',
      ],
      [
        'C',
        async (socket, token) => {
          cc.require();
          cWorkerProgram ??= buildCWorker('cc', tempDir());
          // No values: it claims, then sends its done (10 s timeout) and says whether it was acked.
          const child = spawn(cWorkerProgram, ['done', '0', tempDir()], {
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...process.env, MCP_PROGRESS_SOCKET: socket, MCP_PROGRESS_TOKEN: token },
          });
          const output = collectOutput(child);
          await waitForExit(child);
          return output.stdout().includes('"event":"done","delivered":true');
        },
        'the result',
      ],
    ];

    it.each(clientDones)(
      'the %s client resends a done refused journal_failed until the journal takes it',
      async (_client, sendDone, message) => {
        const { mountPoint, runtimeDir } = smallFileSystem();
        const daemon = await startDaemon([], runtimeDir);
        const filler = fill(mountPoint);
        const delivered = sendDone(daemon.info.socket, 'client-job');
        // The daemon refused it at least once: then there is room again.
        await eventually(async () =>
          (await status(daemon)).journal.writeFailures > 0 ? true : undefined,
        );
        rmSync(filler);
        expect(await delivered).toBe(true);
        expect(await get(daemon, 'client-job')).toMatchObject({ state: 'done', message });
        await daemon.stop();
      },
    );

    it('a journal too big for the disk at start stops the start with an error naming it, not "cannot listen"', async () => {
      const { runtimeDir } = smallFileSystem();
      const now = Date.now();
      // About 700 KiB of valid dones within the window: the rewrite at start needs as much again.
      const lines = Array.from({ length: 170 }, (_, i) =>
        JSON.stringify({
          v: 1,
          at: now - 1000,
          startedAt: now - 2000,
          progressToken: `job-${i}`,
          status: 'ok',
          message: 'm'.repeat(4000),
        }),
      );
      writeFileSync(doneJournalPath(runtimeDir), `${lines.join('\n')}\n`, { mode: 0o600 });
      const result = await runCli(['daemon', '--runtime-dir', runtimeDir, '--port', '0']);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(
        `could not rewrite its done journal ${doneJournalPath(runtimeDir)} at start (ENOSPC`,
      );
      expect(result.stderr).toContain('free space');
      expect(result.stderr).not.toContain('cannot listen');
      // Nothing was lost: the journal is as it was.
      expect(readFileSync(doneJournalPath(runtimeDir), 'utf8')).toBe(`${lines.join('\n')}\n`);
    });
  },
);

// Lowering its own descriptor limit needs no privilege: this runs as any user, on Linux (/proc).
describe.skipIf(process.platform !== 'linux')('a journal that cannot open its file', () => {
  it('EMFILE: with every descriptor in use (ulimit -n in the daemon) the done is refused journal_failed; with one free, the resent done is acked', async () => {
    const runtimeDir = tempDir();
    const limit = 64;
    const child = spawn(
      'sh',
      ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, ...daemonCommand(runtimeDir)],
      { stdio: ['ignore', 'ignore', 'pipe'], env: DAEMON_ENV },
    );
    const output = collectOutput(child);
    try {
      await untilReady(output);
      const socket = join(runtimeDir, 'bridge.sock');
      const worker = await rawWorker(socket);
      // Descriptors numbered below the limit: one inherited above it (a CI runner's) is not one
      // the daemon could use.
      const descriptors = () => readdirSync(`/proc/${child.pid}/fd`).map(Number);
      const open = () => descriptors().filter((fd) => fd < limit).length;
      // One more connection at a time until the daemon holds its last descriptor (libuv drops
      // the ones past it), however slowly it accepts them.
      const others: RawWorker[] = [];
      await eventually(
        async () => {
          if (open() >= limit) return true;
          if (others.length < 4 * limit) others.push(await rawWorker(socket));
          return undefined;
        },
        20_000,
        'every descriptor in use',
      ).catch((error: Error) => {
        throw new Error(`${error.message}: the daemon holds ${descriptors().join(' ')}`);
      });
      worker.send('done', { v: 1, progressToken: 'emfile', status: 'ok', seq: 1 });
      const refused = await worker.reply((r) => (r.data as { seq?: number }).seq === 1);
      expect(refused.data).toMatchObject({ code: 'journal_failed', seq: 1 });
      expect((refused.data as { message: string }).message).toContain('EMFILE');
      for (const other of others) other.destroy();
      await eventually(() => (open() < limit - 4 ? true : undefined), 10_000, 'descriptors freed');
      worker.send('done', { v: 1, progressToken: 'emfile', status: 'ok', seq: 2 });
      const answer = await worker.reply((r) => (r.data as { seq?: number }).seq === 2);
      expect(answer.type).toBe('ack');
      worker.destroy();
    } finally {
      child.kill('SIGTERM');
      await waitForExit(child);
    }
  });
});
