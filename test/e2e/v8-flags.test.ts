/**
 * The V8 flags bin/mcp-progress starts long-lived commands with, seen in the started process's own
 * command line (Node passes them on execve): the daemon's young generation is capped (a steady
 * flow of small messages grew Node's default to 16 MiB per semi-space, and the daemon's peak RSS
 * with it), and the daemon's and `mcp`'s garbage collection runs on the main thread alone (helper
 * threads woken for each small collection cost more CPU than they saved: `npm run bench` measures
 * it). A user's own choice, in NODE_OPTIONS or in node's flags, stands.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BIN,
  cleanupAll,
  eventually,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';

afterAll(() => cleanupAll());

const argv = (pid: number | undefined) =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

/** The command line `mcp` runs under once it has replaced itself, started with node's `flags`. */
async function mcpArgv(flags: string[]): Promise<string[]> {
  const child = spawn(process.execPath, [...flags, BIN, 'mcp'], {
    stdio: ['pipe', 'ignore', 'ignore'],
    env: { ...process.env, MCP_PROGRESS_RUNTIME_DIR: tempDir() },
  });
  try {
    // Replaced in place (same pid) by a Node that blocks SIGUSR1: its flags are the final ones.
    return await eventually(
      () => {
        const now = argv(child.pid);
        return now.includes('--disable-sigusr1') ? now : undefined;
      },
      15_000,
      'mcp to replace itself',
    );
  } finally {
    child.stdin?.end();
    child.kill();
    await waitForExit(child);
  }
}

describe.skipIf(process.platform !== 'linux')('the V8 flags of long-lived commands', () => {
  it("cap the daemon's young generation at 4 MiB a semi-space, unless NODE_OPTIONS chooses", async () => {
    const daemon = await startDaemon();
    expect(argv(daemon.child.pid)).toContain('--max-semi-space-size=4');
    expect(await daemon.stop()).toBe(0);

    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = '--max-semi-space-size=16';
    const chosen = await startDaemon().finally(() => {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    });
    expect(argv(chosen.child.pid).filter((arg) => arg.includes('semi-space'))).toEqual([]);
    expect(await chosen.stop()).toBe(0);
  });

  it('collect garbage on one thread in the daemon and in mcp; only the daemon caps its young generation', async () => {
    const daemon = await startDaemon();
    expect(argv(daemon.child.pid)).toContain('--single-threaded-gc');
    expect(await daemon.stop()).toBe(0);
    const mcp = await mcpArgv([]);
    expect(mcp).toContain('--single-threaded-gc');
    // The young generation's cap stays the daemon's alone: it costs start-up, which mcp pays often.
    expect(mcp).not.toContain('--max-semi-space-size=4');
  });

  it("leave collection to the user's own flags for it", async () => {
    const flags = await mcpArgv(['--no-concurrent-marking']);
    expect(flags).toContain('--no-concurrent-marking');
    expect(flags).not.toContain('--single-threaded-gc');
  });
});
