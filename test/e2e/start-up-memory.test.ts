/**
 * Start-up leaves V8's optimising compiler asleep: through Node's resolver, start-up's module
 * resolutions alone made V8 optimise three path functions, and the compiler's code, mapped
 * for them, was 6 MiB of an idle daemon's 61 (bin/mcp-progress resolves the package's own
 * modules directly: src/shared/own-modules.ts). The hot path is optimised as before.
 */
import { spawn } from 'node:child_process';
import { registerHooks } from 'node:module';
import { afterAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  collectOutput,
  DAEMON_ENV,
  daemonCommand,
  tempDir,
  untilReady,
  waitForExit,
} from '../helpers/daemon.js';

afterAll(() => cleanupAll());

// module.registerHooks is Node 22.15+; older Nodes resolve as before (and pay the 6 MiB).
describe.skipIf(typeof registerHooks !== 'function')('the daemon at start-up', () => {
  it('does not wake the optimising compiler before it is ready', async () => {
    // --trace-opt (a flag of the node that runs the binary) is kept by the binary's re-exec and
    // prints each function V8 optimises on stdout.
    const [node, ...command] = daemonCommand(tempDir());
    const child = spawn(node as string, ['--trace-opt', ...command], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: DAEMON_ENV,
    });
    const output = collectOutput(child);
    try {
      await untilReady(output);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await waitForExit(child)).toBe(0);
    const optimised = output
      .stdout()
      .split('\n')
      .filter((line) => line.includes('completed optimizing'));
    expect(optimised).toEqual([]);
  });
});
