/**
 * An acknowledged done is delivered or recoverable (issue 15): the daemon is
 * killed with SIGKILL right after it acked dones (before its tick could
 * deliver them); a daemon started on the same runtime dir ends those streams
 * again, so watchers that subscribe there learn every outcome. And the ack
 * waits for the disk: strace shows the journal's fdatasync between the
 * done's write to the journal and its ack, one sync for a batch of dones.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/wire.js';
import type { DaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  collectOutput,
  DAEMON_ENV,
  daemonCommand,
  eventually,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { tool } from '../helpers/tools.js';
import { rawWorker } from '../helpers/worker.js';

afterEach(cleanupAll);

const DONE = 'notifications/progress/done';

describe('acked done survives kill -9', () => {
  it('8 streams acked done, then kill -9: a restarted daemon ends each of them for re-subscribing watchers', async () => {
    const first = await startDaemon(['--min-interval-ms', '100']);
    const tokens = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? `job-${i}` : i));
    const watcher = await connectGateway(first.info);
    for (const progressToken of tokens)
      await watcher.request('progress/subscribe', { progressToken });
    const worker = await rawWorker(first.info.socket);
    tokens.forEach((progressToken, i) => {
      worker.send('progress', { v: 1, progressToken, progress: 1, total: 2 });
      worker.send('done', {
        v: 1,
        progressToken,
        status: i === 3 ? 'error' : 'ok',
        message: `finished ${i}`,
        seq: i + 1,
      });
    });
    // The last ack, and at once the kill: the coalescing tick (100 ms) has not delivered them.
    await eventually(
      () => (worker.replies.filter((r) => r.type === 'ack').length === 8 ? true : undefined),
      10_000,
      'all 8 acks',
    );
    first.child.kill('SIGKILL');
    await waitForExit(first.child);
    worker.destroy();
    await watcher.close();

    const second = await startDaemon([], first.runtimeDir);
    const again = await connectGateway(second.info);
    for (const progressToken of tokens)
      await again.request('progress/subscribe', { progressToken });
    const dones = await eventually(
      () => {
        const got = again.notifications.filter((n) => n.method === DONE);
        return got.length === tokens.length ? got : undefined;
      },
      10_000,
      'a done for each acked stream',
    );
    for (const [i, progressToken] of tokens.entries()) {
      const done = dones.find((n) => n.params.progressToken === progressToken);
      // The token keeps its type (string or integer) and the worker's status and message.
      expect(done?.params).toMatchObject({
        progressToken,
        status: i === 3 ? 'error' : 'ok',
        message: `finished ${i}`,
      });
    }
    await again.close();
    await second.stop();
  });

  it('a done acked and then delivered is not delivered twice to a watcher that stays', async () => {
    const daemon = await startDaemon();
    const watcher = await connectGateway(daemon.info);
    await watcher.request('progress/subscribe', { progressToken: 'once', minIntervalMs: 0 });
    const worker = await rawWorker(daemon.info.socket);
    worker.send('done', { v: 1, progressToken: 'once', status: 'ok', seq: 1 });
    await worker.reply((r) => r.type === 'ack');
    await watcher.waitFor(1);
    // A second stream after it, delivered too: by then the first would have repeated.
    worker.send('done', { v: 1, progressToken: 'after', status: 'ok', seq: 2 });
    await watcher.request('progress/subscribe', { progressToken: 'after', minIntervalMs: 0 });
    await eventually(
      () =>
        watcher.notifications.some((n) => n.params.progressToken === 'after') ? true : undefined,
      10_000,
    );
    expect(watcher.notifications.filter((n) => n.params.progressToken === 'once')).toHaveLength(1);
    worker.destroy();
    await watcher.close();
    await daemon.stop();
  });
});

const strace = tool('strace', {
  debian: 'strace',
  probe: ['strace', '-V'],
  why: 'the order of the journal sync and the ack',
});

/**
 * A daemon run under `strace -f` with `straceArgs` (what to trace, what to inject): its info, its
 * stderr, and once stopped, the trace as lines in the order the calls were made (each thread's
 * id cut off; a call another thread interrupted is split into "<unfinished ...>" and
 * "<... resumed>"), with `at` to find a call after another.
 */
async function daemonUnderStrace(straceArgs: string[]) {
  const runtimeDir = tempDir();
  const trace = join(tempDir('mcp-progress-strace-'), 'daemon.strace');
  const child = spawn(
    'strace',
    ['-f', '-qq', '-s', '256', ...straceArgs, '-o', trace, ...daemonCommand(runtimeDir)],
    { stdio: ['ignore', 'ignore', 'pipe'], env: DAEMON_ENV },
  );
  const { stderr } = collectOutput(child);
  const infoPath = join(runtimeDir, 'daemon.json');
  await eventually(
    () => (stderr().includes('ready:') && existsSync(infoPath) ? true : undefined),
    30_000,
    'the daemon under strace',
  );
  const info = JSON.parse(readFileSync(infoPath, 'utf8')) as DaemonInfo;
  return {
    info,
    stderr,
    /** The trace's lines as strace has written them so far (it writes each as its call returns). */
    soFar: () => traceLines(trace),
    /** Stops the daemon and reads its trace. */
    async stop() {
      process.kill(info.pid, 'SIGTERM');
      await waitForExit(child);
      const lines = traceLines(trace);
      const at = (test: (line: string) => boolean, from = 0) => {
        const found = lines.findIndex((line, i) => i >= from && test(line));
        expect(found, 'the call is in the trace').toBeGreaterThanOrEqual(0);
        return found;
      };
      return { lines, at };
    },
  };
}

/** An fdatasync that returned 0 (whole, or resumed after another thread's call). */
const syncReturns = (line: string) =>
  /^fdatasync\(\d+\)\s+= 0/.test(line) || /^<\.\.\. fdatasync resumed>.*= 0/.test(line);

/** A trace file's calls, in order, each with the id of its thread ('' where a line has none). */
function traceCalls(trace: string): Array<{ thread: string; call: string }> {
  if (!existsSync(trace)) return [];
  return readFileSync(trace, 'utf8')
    .split('\n')
    .map((line) => {
      const [, thread = '', call = ''] = /^(?:(\d+)\s+)?(.*)$/.exec(line) ?? [];
      return { thread, call };
    });
}

/** A trace file's lines, each thread's id cut off. */
function traceLines(trace: string): string[] {
  return traceCalls(trace).map(({ call }) => call);
}

/** The daemon's write of its ack of `seq` to a worker. */
const ackOf = (seq: number) => (line: string) =>
  /^writev?\(/.test(line) && line.includes(`{\\"type\\":\\"ack\\",\\"data\\":{\\"seq\\":${seq}}}`);

/** The daemon's write of `token`'s done to a journal file. */
const journaled = (token: string) => (line: string) =>
  line.startsWith('write(') &&
  line.includes(`\\"progressToken\\":\\"${token}\\"`) &&
  line.includes('\\"at\\":');

describe.skipIf(process.platform !== 'linux')('acked done survives a power loss', () => {
  it.skipIf(strace.skip)(
    'the ack follows the fdatasync of the journal: one sync for the dones of one read (strace)',
    async () => {
      strace.require();
      // The daemon's writes and syncs, in the order they were made.
      const daemon = await daemonUnderStrace(['-e', 'trace=write,writev,fdatasync']);
      let trace: Awaited<ReturnType<typeof daemon.stop>>;
      try {
        const worker = await rawWorker(daemon.info.socket);
        // Twenty dones in one write (so the daemon reads them in one turn), then one more alone.
        const batch = Array.from({ length: 20 }, (_, i) =>
          encodeFrame('done', { v: 1, progressToken: `batch-${i}`, status: 'ok', seq: i + 1 }),
        ).join('');
        worker.write(batch);
        await eventually(
          () => (worker.replies.filter((r) => r.type === 'ack').length === 20 ? true : undefined),
          10_000,
          '20 acks',
        );
        worker.send('done', { v: 1, progressToken: 'alone', status: 'ok', seq: 21 });
        await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 21);
        worker.destroy();
      } finally {
        trace = await daemon.stop();
      }
      const { lines, at } = trace;
      const syncStarts = (line: string) => line.startsWith('fdatasync(');
      /** The ack of a done comes after a sync that started after its journal write had returned. */
      const expectSyncedBeforeAck = (token: string, seq: number) => {
        const started = at(syncStarts, at(journaled(token)) + 1);
        expect(at(ackOf(seq))).toBeGreaterThan(at(syncReturns, started));
      };
      for (let i = 0; i < 20; i++) expectSyncedBeforeAck(`batch-${i}`, i + 1);
      expectSyncedBeforeAck('alone', 21);
      // Group commit: the twenty dones of one read took one fdatasync.
      const syncs = lines.slice(at(journaled('batch-0')), at(ackOf(1))).filter(syncStarts);
      expect(syncs).toHaveLength(1);
    },
  );

  it.skipIf(strace.skip)(
    'a sync at once while one is in flight (a holding connection closes, the daemon stops) returns after an fdatasync',
    async () => {
      strace.require();
      const trace = join(tempDir('mcp-progress-strace-'), 'journal.strace');
      const child = spawn(
        'strace',
        [
          '-f',
          '-qq',
          '-s',
          '256',
          '-e',
          'trace=write,fdatasync',
          '-o',
          trace,
          process.execPath,
          fileURLToPath(new URL('../fixtures/journal-sync-now.mjs', import.meta.url)),
          tempDir(),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const output = collectOutput(child);
      await waitForExit(child);
      expect(output.stdout()).toBe('released\n');
      // Each line with its thread: the sync in flight runs on the thread pool, so only a sync on
      // the thread that releases (the main one) is known to have returned when it releases.
      const calls = traceCalls(trace);
      const released = calls.findIndex(({ call }) => call.startsWith('write(1, "released'));
      expect(released, 'the write of "released"').toBeGreaterThanOrEqual(0);
      const written = calls.findIndex(({ call }) => journaled('synced-at-once')(call));
      expect(written, "the done's write").toBeGreaterThanOrEqual(0);
      const mainThread = calls[released]?.thread;
      const syncedHere = calls
        .slice(written + 1, released)
        .some(({ thread, call }) => thread === mainThread && syncReturns(call));
      expect(
        syncedHere,
        'an fdatasync on the releasing thread, between the write and the release',
      ).toBe(true);
    },
  );

  it.skipIf(strace.skip)(
    'a failed fdatasync (EIO, injected): the journal is written again to a new file, synced and renamed into place before the ack',
    async () => {
      strace.require();
      // Every fdatasync of the daemon fails with EIO, as on a failing disk; fsync does not.
      const daemon = await daemonUnderStrace([
        '-e',
        'trace=write,writev,fdatasync,fsync,rename',
        '-e',
        'inject=fdatasync:error=EIO',
      ]);
      let trace: Awaited<ReturnType<typeof daemon.stop>>;
      try {
        const worker = await rawWorker(daemon.info.socket);
        worker.send('done', { v: 1, progressToken: 'on-a-bad-disk', status: 'ok', seq: 1 });
        await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 1);
        worker.destroy();
      } finally {
        trace = await daemon.stop();
      }
      expect(daemon.stderr()).toContain('wrote its 1 live done(s) again to a new file');
      const { at } = trace;
      const failedSync = (line: string) =>
        /^fdatasync\(\d+\)\s+= -1 EIO/.test(line) ||
        /^<\.\.\. fdatasync resumed>.*= -1 EIO/.test(line);
      const fsynced = (line: string) => /^fsync\(\d+\)\s+= 0/.test(line);
      const renamed = (line: string) => /^rename\(".*\.tmp", ".*dones\.jsonl"\) = 0/.test(line);
      // Written to the journal, its sync failed; written again (to the new file), fsynced,
      // renamed into place; then acked.
      const failed = at(failedSync, at(journaled('on-a-bad-disk')) + 1);
      const again = at(journaled('on-a-bad-disk'), failed + 1);
      const replaced = at(renamed, at(fsynced, again + 1) + 1);
      expect(at(ackOf(1))).toBeGreaterThan(replaced);
    },
  );
});
