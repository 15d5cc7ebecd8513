/**
 * The V8 flags bin/mcp-progress starts the daemon with. Its young generation is capped: a steady
 * flow of small messages grew Node's default to 16 MiB per semi-space, and the daemon's peak RSS
 * with it. Its optimizing compiler is not woken by start-up: module resolution alone made V8
 * optimize three path functions, and TurboFan's code, mapped for them, was 5.6 MiB of an idle
 * daemon's 61. A user's own choice stands.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  collectOutput,
  DAEMON_ENV,
  daemonCommand,
  startDaemon,
  tempDir,
  untilReady,
  waitForExit,
} from '../helpers/daemon.js';

afterAll(() => cleanupAll());

const argvOf = (pid: number | undefined) =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

describe.skipIf(process.platform !== 'linux')("the daemon's V8 flags", () => {
  it('cap the young generation at 4 MiB a semi-space, unless NODE_OPTIONS chooses', async () => {
    const daemon = await startDaemon();
    expect(argvOf(daemon.child.pid)).toContain('--max-semi-space-size=4');
    expect(await daemon.stop()).toBe(0);

    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = '--max-semi-space-size=16';
    const chosen = await startDaemon().finally(() => {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    });
    expect(argvOf(chosen.child.pid).filter((arg) => arg.includes('semi-space'))).toEqual([]);
    expect(await chosen.stop()).toBe(0);
  });

  it('leave the optimizing compiler asleep through start-up', async () => {
    // --trace-opt (a flag of the node that runs the binary) is kept by its re-exec, and prints each
    // function V8 optimizes on stdout.
    const [node, ...command] = daemonCommand(tempDir());
    const child = spawn(node as string, ['--trace-opt', ...command], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: DAEMON_ENV,
    });
    const output = collectOutput(child);
    try {
      await untilReady(output);
      expect(argvOf(child.pid)).toContain('--invocation-count-for-turbofan=30000');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await waitForExit(child)).toBe(0);
    const optimized = output
      .stdout()
      .split('\n')
      .filter((line) => line.includes('target TURBOFAN'));
    expect(optimized).toEqual([]);
  });
});
