/**
 * Where V8 has no middle tier (Node 22), a process optimises its hot path sooner once progress
 * flows, and for a while only (shared/tiering.ts). Measured in a real Node by V8's own account
 * of a function's optimisation, after a number of calls.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { choosesOwnTiering, lacksMiddleTier } from '../../src/shared/tiering.js';
import { ROOT } from '../helpers/daemon.js';

const FIXTURE = join(ROOT, 'test/fixtures/tier-up-count.mjs');

/** Runs of the fixture per mode: one compilation in eight or so lands late (1,300-1,600 calls). */
const RUNS = 7;

/** After how many calls a function was optimised in a child Node run in `mode`: the median of RUNS. */
function tierUpCalls(mode: string, flags: string[] = []): number {
  const runs = Array.from({ length: RUNS }, () =>
    Number(
      execFileSync(process.execPath, ['--allow-natives-syntax', ...flags, FIXTURE, mode], {
        encoding: 'utf8',
      }),
    ),
  );
  return runs.sort((a, b) => a - b)[Math.floor(RUNS / 2)] ?? Number.NaN;
}

describe.skipIf(!lacksMiddleTier())('once progress flows (a V8 without Maglev)', () => {
  it('a function is optimised after hundreds of calls, not thousands; after the window, V8 decides again', () => {
    // V8's own count (3,000 calls' worth) against the flowing one (400).
    expect(tierUpCalls('default')).toBeGreaterThan(1200);
    expect(tierUpCalls('flowing')).toBeLessThan(1000);
    expect(tierUpCalls('after-window')).toBeGreaterThan(1200);
  });

  it("leaves a user's own tiering flags alone", () => {
    expect(tierUpCalls('flowing', ['--invocation-count-for-turbofan=3000'])).toBeGreaterThan(1200);
  });
});

describe('which Nodes and flags', () => {
  it('Node 22 (no Maglev) lacks the middle tier; a V8 with Maglev has it', () => {
    expect(lacksMiddleTier({ variables: { v8_enable_maglev: 0 } })).toBe(true);
    expect(lacksMiddleTier({ variables: { v8_enable_maglev: 1 } })).toBe(false);
    expect(lacksMiddleTier({ variables: { v8_enable_maglev: 'true' } })).toBe(false);
  });

  it('flags of its own for tiering are the user’s choice; others are not', () => {
    expect(choosesOwnTiering(['--invocation-count-for-turbofan=100'])).toBe(true);
    expect(choosesOwnTiering(['--maglev'])).toBe(true);
    expect(choosesOwnTiering(['--no-maglev'])).toBe(true);
    expect(choosesOwnTiering(['--minimum-invocations-after-ic-update=10'])).toBe(true);
    expect(choosesOwnTiering(['--disable-sigusr1', '--max-semi-space-size=4'])).toBe(false);
  });
});
