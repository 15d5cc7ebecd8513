/** Which revision a message claims, and that 2025 traffic never loads the 2.x package. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  claimsSessionlessRevision,
  isSessionlessRevision,
  PROTOCOL_VERSION_META_KEY,
} from '../../src/mcp/revision.js';

const SRC = resolve(import.meta.dirname, '../../src');
const claim = { [PROTOCOL_VERSION_META_KEY]: '2026-07-28' };

describe('the revision a message claims', () => {
  it('2026-07-28 when the envelope key is in _meta, in one message or any of a batch', () => {
    expect(claimsSessionlessRevision({ method: 'server/discover', params: { _meta: claim } })).toBe(
      true,
    );
    expect(
      claimsSessionlessRevision([
        { method: 'notifications/cancelled', params: {} },
        { method: 'tools/call', params: { _meta: { ...claim, progressToken: 1 } } },
      ]),
    ).toBe(true);
    // A claim naming a revision the server does not serve still goes to the 2.x side, which answers it.
    expect(
      claimsSessionlessRevision({
        method: 'tools/list',
        params: { _meta: { [PROTOCOL_VERSION_META_KEY]: 'bogus' } },
      }),
    ).toBe(true);
  });

  it('a 2025 revision for initialize, a bare progressToken, responses and non-objects', () => {
    expect(
      claimsSessionlessRevision({
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {} },
      }),
    ).toBe(false);
    expect(
      claimsSessionlessRevision({ method: 'tools/call', params: { _meta: { progressToken: 1 } } }),
    ).toBe(false);
    expect(claimsSessionlessRevision({ id: 1, result: {} })).toBe(false);
    expect(claimsSessionlessRevision(null)).toBe(false);
    expect(claimsSessionlessRevision('x')).toBe(false);
  });

  it('tells the HTTP header of 2026-07-28 and later from the 2025 ones', () => {
    expect(isSessionlessRevision('2026-07-28')).toBe(true);
    expect(isSessionlessRevision('2027-01-01')).toBe(true);
    expect(isSessionlessRevision('2025-11-25')).toBe(false);
    expect(isSessionlessRevision(undefined)).toBe(false);
  });

  it('stdio and /mcp load @modelcontextprotocol/server only on first 2026-07-28 use', () => {
    for (const file of ['mcp/stdio.ts', 'mcp/http-sessions.ts']) {
      const source = readFileSync(resolve(SRC, file), 'utf8');
      const valueImports = [
        ...source.matchAll(/^import\s(?!type\s)[^'"]*?from\s*['"]([^'"]+)['"]/gm),
      ].map((match) => match[1]);
      expect(
        valueImports.filter((s) => s?.startsWith('@modelcontextprotocol/server')),
        file,
      ).toEqual([]);
      expect(valueImports, file).not.toContain('./modern-http.js');
      expect(valueImports, file).not.toContain('./modern-server.js');
    }
  });
});
