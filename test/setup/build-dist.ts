/**
 * Vitest global setup: compile src/ to dist/ before any test runs, however the run was started
 * (`npm test`, `npx vitest run FILE`, an editor). End-to-end tests run `bin/mcp-progress`, which
 * loads dist/, while unit tests import src/: without this a single e2e file run after a change
 * in src/ tests the old build. A failed build fails the run; it is never skipped.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export default function buildDist(): void {
  const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (result.status !== 0) {
    throw new Error(
      `the tests run against dist/, and building it failed (tsc -p tsconfig.build.json exited ${result.status ?? result.signal}):\n${result.stdout}${result.stderr}\nFix the build, then run the tests again.`,
    );
  }
}
