/**
 * What `npm pack` ships is what a host's `npx -y mcp-progress-bridge mcp` runs: the bin shim, the
 * build it imports, the schemas and the one-file Python client, and nothing stray.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/daemon.js';

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8'));

/** What `npm pack` would put in the tarball, packed in `cwd`. */
const packed = (cwd: string, args: string[] = []): string[] => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return JSON.parse(out)[0].files.map((file: { path: string }) => file.path);
};

/** The files of this checkout that git knows or would add (as they are now), without dist/. */
function freshCheckout(): string {
  const copy = tempDir('mcp-progress-pack-');
  const listed = execFileSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      cwd: ROOT,
      encoding: 'utf8',
    },
  );
  for (const path of listed.split('\0')) {
    if (path === '' || !existsSync(join(ROOT, path))) continue;
    cpSync(join(ROOT, path), join(copy, path), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  return copy;
}

/** The package files the bin shim imports (`../dist/...`), as paths in the package. */
function importedByBin(bin: string): string[] {
  const shim = readFileSync(join(ROOT, bin), 'utf8');
  return [...shim.matchAll(/['"](\.\.\/dist\/[^'"]+)['"]/g)].map((m) =>
    join(dirname(bin), m[1] ?? '').replace(/\\/g, '/'),
  );
}

describe('the published package', () => {
  // A whole build (tsc) in the copy: more than the default timeout on a busy machine.
  it('packed from a checkout without dist/, builds it first: the bin and every entry point ship', () => {
    const checkout = freshCheckout();
    expect(existsSync(join(checkout, 'dist'))).toBe(false);
    const files = packed(checkout);
    const bins = Object.values(pkg.bin as Record<string, string>);
    const entryPoints = Object.values(pkg.exports as Record<string, string>).map((path) =>
      path.replace(/^\.\//, ''),
    );
    const needed = [...bins, ...bins.flatMap(importedByBin), ...entryPoints];
    expect(needed.filter((path) => path.startsWith('dist/')).length).toBeGreaterThan(1);
    expect(files).toEqual(expect.arrayContaining(needed));
  }, 120_000);

  it('ships the bin, every entry point, the schemas, the Python client and the live page, and nothing else', () => {
    // --ignore-scripts: prepack rebuilds dist/, which other test files are running from right now.
    const files = packed(ROOT, ['--ignore-scripts']);
    const bins = Object.values(pkg.bin as Record<string, string>);
    const entryPoints = Object.values(pkg.exports as Record<string, string>).map((path) =>
      path.replace(/^\.\//, ''),
    );
    expect(files).toEqual(
      expect.arrayContaining([
        ...bins,
        ...bins.flatMap(importedByBin),
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
