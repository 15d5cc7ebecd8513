/** docs/CLIENTS.md lists the local error codes exactly as src/shared/errors.ts declares them. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOCAL_ERRORS } from '../../src/shared/errors.js';

const clients = readFileSync(resolve(import.meta.dirname, '../../docs/CLIENTS.md'), 'utf8');

describe('docs/CLIENTS.md error codes', () => {
  it('has one row per local code, with its meaning, and no other', () => {
    const section = clients.slice(clients.indexOf('## Error codes'));
    const rows = [...section.matchAll(/^\| `([a-z_]+)`\s*\| (.+?)\s*\|$/gm)].map((m) => [
      m[1],
      m[2],
    ]);
    expect(Object.fromEntries(rows)).toEqual(LOCAL_ERRORS);
    expect(rows).toHaveLength(Object.keys(LOCAL_ERRORS).length);
  });
});
