/** node-ipc has shipped malicious releases: every runtime dependency is pinned exactly, and the reviewed pins hold. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (path: string) => JSON.parse(readFileSync(resolve(ROOT, path), 'utf8'));
const pkg = read('package.json');
const lock: { packages: Record<string, LockedPackage> } = read('package-lock.json');
const reviewed: Record<string, { version: string; integrity: string }> =
  read('.ci/reviewed-pins.json').packages;

interface LockedPackage {
  version?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const locked = (name: string): LockedPackage | undefined => lock.packages[`node_modules/${name}`];

/** `name` and every package it depends on, transitively, as the lockfile installs them. */
function closure(name: string, seen = new Set<string>()): Set<string> {
  if (seen.has(name)) return seen;
  seen.add(name);
  for (const dependency of Object.keys(locked(name)?.dependencies ?? {})) closure(dependency, seen);
  return seen;
}

describe('supply chain', () => {
  it('pins every dependency to an exact version, and the lockfile installs that version', () => {
    const declared = { ...pkg.dependencies, ...pkg.devDependencies } as Record<string, string>;
    expect(Object.keys(declared).length).toBeGreaterThan(0);
    for (const [name, range] of Object.entries(declared)) {
      expect(range, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(locked(name)?.version, name).toBe(range);
    }
    // The lockfile was written from this package.json, not an older one.
    expect(lock.packages['']?.dependencies).toEqual(pkg.dependencies);
    expect(lock.packages['']?.devDependencies).toEqual(pkg.devDependencies);
  });

  it('reviews node-ipc and every package it pulls in, and overrides pin each of those', () => {
    const pulledIn = [...closure('node-ipc')].sort();
    expect(pulledIn.length).toBeGreaterThan(1);
    expect(Object.keys(reviewed).sort()).toEqual(pulledIn);
    expect(pkg.dependencies['node-ipc']).toBe(reviewed['node-ipc']?.version);
    const overrides = pkg.overrides['node-ipc'] as Record<string, string>;
    expect(Object.keys(overrides).sort()).toEqual(pulledIn.filter((name) => name !== 'node-ipc'));
    for (const [name, version] of Object.entries(overrides))
      expect(version, name).toBe(reviewed[name]?.version);
  });

  it('the lockfile holds each reviewed package once, at its reviewed version and integrity', () => {
    for (const [name, pin] of Object.entries(reviewed)) {
      expect(locked(name), name).toMatchObject({ version: pin.version, integrity: pin.integrity });
      const copies = Object.keys(lock.packages).filter((key) =>
        key.endsWith(`node_modules/${name}`),
      );
      expect(copies, name).toEqual([`node_modules/${name}`]);
    }
  });

  it("CI's own check (.ci/check-pins.mjs) passes on what is installed", () => {
    const out = execFileSync(process.execPath, [resolve(ROOT, '.ci/check-pins.mjs')], {
      encoding: 'utf8',
    });
    expect(out).toContain(
      `${Object.keys(reviewed).length} reviewed packages at their pinned integrity`,
    );
  });
});
