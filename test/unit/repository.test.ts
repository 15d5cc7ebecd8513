/** The repository itself: what .gitignore says matches what is tracked. */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';

describe('.gitignore', () => {
  it('names no tracked file (a committed .pyc once sat under an ignored __pycache__/)', () => {
    const ignored = spawnSync('git', ['ls-files', '--cached', '--ignored', '--exclude-standard'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(ignored.status, ignored.stderr).toBe(0);
    expect(ignored.stdout).toBe('');
    // The check itself works: a tracked path that a pattern names is reported.
    const probe = spawnSync(
      'git',
      ['ls-files', '--cached', '--ignored', '--exclude=README.md', 'README.md'],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(probe.stdout).toBe('README.md\n');
  });
});
