/**
 * The count reporter (test/setup/count-reporter.ts) and tools.ts, in a real vitest run of the
 * fixtures in test/fixtures/count-reporter: the plain count line, and under CI a skip, or a
 * missing tool, fails the run by name.
 */
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectOutput, ROOT } from '../helpers/daemon.js';
import { letOthersReachCheckout } from '../helpers/other-user.js';
import { rootOnly } from '../helpers/tools.js';

const FIXTURES = join(ROOT, 'test/fixtures/count-reporter');
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');

/** Runs vitest on fixture files; CI is set only when asked; as another user when named. */
async function vitest(
  files: string[],
  ci: boolean,
  asUser?: string,
): Promise<{ code: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, CI: ci ? 'true' : '', NO_COLOR: '1' };
  // This run's own vitest state is not the child's.
  for (const key of Object.keys(env)) if (key.startsWith('VITEST')) delete env[key];
  // Node loads the config itself: no bundled copy is written beside it (another user could not).
  const args = [
    VITEST,
    'run',
    '--configLoader',
    'native',
    '--config',
    join(FIXTURES, 'vitest.config.ts'),
    ...files,
  ];
  const [command, ...commandArgs] =
    asUser === undefined
      ? [process.execPath, ...args]
      : // runuser sets HOME to the user's, which may not exist; vitest keeps a token there.
        ['runuser', '-u', asUser, '--', 'env', `HOME=${tmpdir()}`, process.execPath, ...args];
  const child = spawn(command, commandArgs, {
    cwd: FIXTURES,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  // 'close', not 'exit': the last lines of output are read by then.
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, output: output.stdout() + output.stderr() };
}

const switchUser = rootOnly('runuser -u nobody', 'a run of the fixtures as a user without root');

describe('the count reporter', () => {
  it('outside CI: skips pass, the missing tool is named, and the line counts them', async () => {
    const run = await vitest(['skips.fixture.ts', 'missing-tool.fixture.ts'], false);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/^2 passed, 0 failed, 2 skipped$/m);
    expect(run.output).toContain(
      'mcp-progress-missing-tool is not available: apt-get install mcp-progress-missing-package; its tests are skipped',
    );
    expect(run.output).not.toContain('FAIL: ');
  });

  it('under CI: a skip fails the run, named', async () => {
    const run = await vitest(['skips.fixture.ts'], true);
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^1 passed, 0 failed, 1 skipped$/m);
    expect(run.output).toContain('FAIL: 1 skipped under CI');
    expect(run.output).toMatch(/^ {2}skipped: skips\.fixture\.ts > is skipped by its author$/m);
  });

  it('under CI: a missing tool fails its tests, naming the package', async () => {
    const run = await vitest(['missing-tool.fixture.ts'], true);
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^1 passed, 1 failed, 0 skipped$/m);
    expect(run.output).toContain(
      'Error: mcp-progress-missing-tool is not available: apt-get install mcp-progress-missing-package',
    );
  });

  it.skipIf(switchUser.skip)('under CI: a test that needs root fails when not root', async () => {
    switchUser.require();
    letOthersReachCheckout();
    const run = await vitest(['needs-root.fixture.ts'], true, 'nobody');
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^0 passed, 1 failed, 0 skipped$/m);
    expect(run.output).toMatch(
      /Error: the fixture needs root \(a uid of 0\), and this run is uid \d+: run the tests as root/,
    );
  });

  it('counts the tests of a describe whose beforeAll threw as failed', async () => {
    const run = await vitest(['set-up-throws.fixture.ts'], false);
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^0 passed, 2 failed, 0 skipped$/m);
  });

  it('counts a test a -t filter left out as skipped, beside a failed one of its describe', async () => {
    const run = await vitest(['filtered.fixture.ts', '-t', 'fails when chosen'], false);
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^0 passed, 1 failed, 1 skipped$/m);
  });

  it('counts a failed test as failed', async () => {
    const run = await vitest(['fails.fixture.ts'], false);
    expect(run.code, run.output).toBe(1);
    expect(run.output).toMatch(/^0 passed, 1 failed, 0 skipped$/m);
  });
});
