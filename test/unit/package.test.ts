/**
 * What `npm pack` ships is what a host's `npx -y mcp-progress-bridge mcp` runs: the bin shim, the
 * build it imports, the schemas and the one-file Python client, and nothing stray.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8'));

// --ignore-scripts: prepack rebuilds dist/, which other test files are running from right now.
const packed = (): string[] => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return JSON.parse(out)[0].files.map((file: { path: string }) => file.path);
};

describe('the published package', () => {
  it('builds dist/ before packing, since dist/ is not in git', () => {
    expect(pkg.scripts.prepack).toBe('npm run build');
  });

  it('ships the bin, every entry point, the schemas, the Python client and the live page, and nothing else', () => {
    const files = packed();
    const entryPoints = Object.values(pkg.exports as Record<string, string>).map((path) =>
      path.replace(/^\.\//, ''),
    );
    expect(files).toEqual(
      expect.arrayContaining([
        'bin/mcp-progress',
        'dist/cli/main.js',
        'schemas/progress-frame.v1.json',
        'clients/python/mcp_progress.py',
        'README.md',
        'page/index.html',
        'page/page.js',
        'page/page.css',
        ...entryPoints,
      ]),
    );
    const stray = files.filter(
      (path) =>
        !/^(bin|dist|schemas|docs|page)\//.test(path) &&
        !['clients/python/mcp_progress.py', 'README.md', 'package.json', 'LICENSE'].includes(path),
    );
    expect(stray).toEqual([]);
  });
});
