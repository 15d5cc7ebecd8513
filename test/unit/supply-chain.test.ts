/** node-ipc has shipped malicious releases: every runtime dependency is pinned exactly, and the reviewed pins hold. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8'));

describe('supply chain', () => {
  it('pins every dependency to an exact version', () => {
    for (const [name, range] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      expect(range, name).toMatch(/^\d+\.\d+\.\d+$/);
    }
    expect(pkg.dependencies['node-ipc']).toBe('14.0.0');
  });

  it('pins node-ipc transitive packages with overrides', () => {
    expect(Object.keys(pkg.overrides['node-ipc']).sort()).toEqual(
      ['easy-stack', 'event-pubsub', 'js-message', 'js-queue', 'strong-type'].sort(),
    );
  });

  it('installs node-ipc and its dependencies at their reviewed integrity', () => {
    const out = execFileSync(process.execPath, [resolve(ROOT, '.ci/check-pins.mjs')], {
      encoding: 'utf8',
    });
    expect(out).toContain('6 reviewed packages at their pinned integrity');
  });
});
