/**
 * The binary caches compiled code in a directory of the user's own, never in
 * the tmpdir every user shares, and not in a directory someone else could write.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, cleanupAll, tempDir } from '../helpers/daemon.js';

afterAll(() => cleanupAll());

/** Runs `mcp-progress --version` with only these cache settings in its environment. */
function runWithCacheHome(cacheHome: string): void {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: cacheHome };
  delete env.NODE_COMPILE_CACHE;
  delete env.NODE_DISABLE_COMPILE_CACHE;
  const run = spawnSync(process.execPath, [BIN, '--version'], { env, encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
}

/** Files the cache holds, in every Node version's subdirectory. */
function cached(dir: string): number {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .reduce((sum, entry) => sum + readdirSync(join(dir, entry.name)).length, 0);
}

describe('compile cache', () => {
  it('is written to $XDG_CACHE_HOME/mcp-progress-bridge/compile-cache, made 0700', () => {
    const home = tempDir();
    runWithCacheHome(home);
    const dir = join(home, 'mcp-progress-bridge', 'compile-cache');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(cached(dir)).toBeGreaterThan(0);
  });

  it('is not used when its directory is writable by others', () => {
    const home = tempDir();
    const dir = join(home, 'mcp-progress-bridge', 'compile-cache');
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o777);
    runWithCacheHome(home);
    expect(cached(dir)).toBe(0);
  });

  it('is not used when its directory is a symbolic link', () => {
    const home = tempDir();
    const elsewhere = tempDir();
    chmodSync(elsewhere, 0o700);
    mkdirSync(join(home, 'mcp-progress-bridge'), { recursive: true });
    symlinkSync(elsewhere, join(home, 'mcp-progress-bridge', 'compile-cache'));
    runWithCacheHome(home);
    expect(cached(elsewhere)).toBe(0);
  });
});
