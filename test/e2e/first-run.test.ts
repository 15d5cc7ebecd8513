/**
 * A fresh clone, as a new user has it: the README's commands work as written. Before a build
 * `bin/mcp-progress` says in one line what to run (no stack trace); `npm ci` builds through the
 * `prepare` script, here run alone on a clone of HEAD that shares this checkout's node_modules.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, ROOT, tempDir } from '../helpers/daemon.js';

afterAll(() => cleanupAll());

/** A clone of HEAD with this checkout's node_modules, not yet built. */
function freshClone(): string {
  const dir = join(tempDir('mcp-progress-clone-'), 'repo');
  execFileSync('git', ['clone', '--quiet', '--no-hardlinks', ROOT, dir]);
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

const run = (cwd: string, command: string, args: string[]) =>
  spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, CI: '' } });

describe('a fresh clone', () => {
  const clone = freshClone();

  it('before a build, mcp-progress says in one line to run npm run build', () => {
    expect(existsSync(join(clone, 'dist'))).toBe(false);
    const result = run(clone, process.execPath, ['bin/mcp-progress', '--version']);
    expect(result.status).toBe(70);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('not built yet');
    expect(lines[0]).toContain('npm run build');
    expect(result.stderr).not.toContain('ERR_MODULE_NOT_FOUND');
  });

  it("npm ci's prepare step builds it, and then it runs", () => {
    const prepare = run(clone, 'npm', ['run', '--silent', 'prepare']);
    expect(prepare.status, prepare.stderr).toBe(0);
    const { version } = JSON.parse(run(clone, 'git', ['show', 'HEAD:package.json']).stdout) as {
      version: string;
    };
    const result = run(clone, process.execPath, ['bin/mcp-progress', '--version']);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(`${version}\n`);
  });
});
