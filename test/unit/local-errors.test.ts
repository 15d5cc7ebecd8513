/** docs/CLIENTS.md lists the local error codes exactly as src/shared/errors.ts declares them. */
import { readdirSync, readFileSync } from 'node:fs';
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

describe('local failures', () => {
  it('are BridgeErrors with a code from the table: no plain Error is thrown or rejected in src/', () => {
    const root = resolve(import.meta.dirname, '../../src');
    const plain: string[] = [];
    for (const file of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts')) continue;
      const lines = readFileSync(resolve(root, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (/\bnew (?:Type|Range)?Error\(/.test(line)) plain.push(`src/${file}:${i + 1}`);
      });
    }
    expect(plain).toEqual([]);
  });
});

describe('JSON-RPC error codes', () => {
  it('come from the typed tables of src/protocol/errors.ts: no bare -32xxx number elsewhere in src/', () => {
    const root = resolve(import.meta.dirname, '../../src');
    const bare: string[] = [];
    for (const file of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts') || file === 'protocol/errors.ts') continue;
      const lines = readFileSync(resolve(root, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        // Comments may name a code (the MCP SDK's own, such as -32021); code may not.
        if (/^\s*(?:\/\/|\/\*|\*)/.test(line)) return;
        if (/-32\d{3}\b/.test(line)) bare.push(`src/${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(bare).toEqual([]);
  });
});
