/** The daemon's footing on disk: socket paths near the Unix limit, and one owner per runtime dir. */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SOCKET_PATH_BYTES } from '../../src/daemon/runtime-dir.js';
import {
  cleanupAll,
  endRace,
  raceDaemons,
  runCli,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';

afterEach(cleanupAll);

/** A path of exactly `bytes` bytes inside a fresh temporary directory. */
function socketPathOf(bytes: number): string {
  const dir = tempDir('mcpp-');
  const name = 's'.repeat(bytes - dir.length - 1);
  expect(name.length).toBeGreaterThan(0);
  return join(dir, name);
}

describe.skipIf(process.platform === 'win32')('socket paths near the limit', () => {
  it.each([101, 104, MAX_SOCKET_PATH_BYTES])(
    'a %i-byte socket path starts and serves',
    async (bytes) => {
      const socket = socketPathOf(bytes);
      expect(Buffer.byteLength(socket)).toBe(bytes);
      const daemon = await startDaemon(['--socket', socket]);
      const status = await runCli(['status', '--socket', socket]);
      expect(status.code).toBe(0);
      await daemon.stop();
    },
  );

  it('a path over the limit is refused with an error naming the limit', async () => {
    const socket = socketPathOf(MAX_SOCKET_PATH_BYTES + 1);
    const runtimeDir = tempDir();
    mkdirSync(runtimeDir, { recursive: true });
    const result = await runCli([
      'daemon',
      '--runtime-dir',
      runtimeDir,
      '--port',
      '0',
      '--socket',
      socket,
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`${MAX_SOCKET_PATH_BYTES + 1} bytes`);
    expect(result.stderr).toContain(`at most ${MAX_SOCKET_PATH_BYTES} bytes`);
  });
});

describe.skipIf(process.platform !== 'linux')('one daemon per runtime directory', () => {
  it('of 4 daemons started at once on one runtime dir, each with its own --socket, exactly one runs', async () => {
    const runtimeDir = tempDir();
    const sockets = [0, 1, 2, 3].map((i) => join(tempDir('mcpp-'), `s${i}`));
    const settled = await raceDaemons(runtimeDir, sockets);
    try {
      // The losers exit; the winner says it is ready.
      expect(settled.ready).toHaveLength(1);
      expect(settled.exited).toHaveLength(3);
      for (const loser of settled.exited) {
        expect(loser.child.exitCode).not.toBe(0);
        expect(loser.output.stderr()).toMatch(/runtime dir|already running/);
      }
      const winner = settled.ready[0];
      const info = JSON.parse(readFileSync(join(runtimeDir, 'daemon.json'), 'utf8')) as {
        pid: number;
        socket: string;
      };
      expect(info.pid).toBe(winner?.child.pid);
      expect(info.socket).toBe(winner?.socket);
      expect((await runCli(['status', '--socket', info.socket])).code).toBe(0);
    } finally {
      await endRace(settled.all);
    }
  });

  it('the lock goes with its daemon, even by kill -9: the next daemon on the dir starts', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon(['--socket', join(tempDir('mcpp-'), 'a')], runtimeDir);
    first.child.kill('SIGKILL');
    await waitForExit(first.child);
    const second = await startDaemon(['--socket', join(tempDir('mcpp-'), 'b')], runtimeDir);
    expect((await runCli(['status', '--socket', second.info.socket])).code).toBe(0);
    await second.stop();
  });
});
