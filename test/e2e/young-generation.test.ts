/**
 * The daemon's young generation is capped by the flag bin/mcp-progress starts it with: a steady
 * flow of small messages grew Node's default to 16 MiB per semi-space, and the daemon's peak RSS
 * with it. A user's own choice in NODE_OPTIONS stands.
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, startDaemon } from '../helpers/daemon.js';

afterAll(() => cleanupAll());

const argv = (pid: number | undefined) =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

describe.skipIf(process.platform !== 'linux')("the daemon's young generation", () => {
  it('is capped at 4 MiB a semi-space, unless NODE_OPTIONS chooses', async () => {
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
});
