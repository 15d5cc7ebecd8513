/**
 * The binary resolves its own modules by URL arithmetic (src/shared/own-modules.ts): only a
 * relative `.js` import from a module under the root, to a module under it; everything else
 * is left to Node.
 */
import { describe, expect, it } from 'vitest';
import { resolveOwnModule } from '../../src/shared/own-modules.js';

const ROOT = 'file:///opt/mcp-progress-bridge/dist/';
const PARENT = `${ROOT}daemon/daemon.js`;

describe('resolveOwnModule', () => {
  it('resolves relative .js imports among the modules under the root', () => {
    expect(resolveOwnModule('./router.js', PARENT, ROOT)).toBe(`${ROOT}daemon/router.js`);
    expect(resolveOwnModule('../protocol/index.js', PARENT, ROOT)).toBe(`${ROOT}protocol/index.js`);
    expect(resolveOwnModule('./a%20b.js', PARENT, ROOT)).toBe(`${ROOT}daemon/a%20b.js`);
  });

  it('leaves packages, built-ins, other files, other parents and escapes to Node', () => {
    for (const specifier of [
      'ws',
      'node:fs',
      '@modelcontextprotocol/sdk/server/mcp.js',
      '/opt/mcp-progress-bridge/dist/daemon/router.js',
      'file:///opt/mcp-progress-bridge/dist/daemon/router.js',
      './schema.json',
      './router',
      './router.js?x=1',
      './router.js#x',
      '../../package.js',
      '../../../etc/x.js',
    ])
      expect(resolveOwnModule(specifier, PARENT, ROOT), specifier).toBeUndefined();
    expect(resolveOwnModule('./router.js', undefined, ROOT)).toBeUndefined();
    expect(
      resolveOwnModule('./x.js', 'file:///opt/mcp-progress-bridge/node_modules/ws/index.js', ROOT),
    ).toBeUndefined();
    expect(resolveOwnModule('./x.js', 'file:///opt/mcp-progress-bridge/dist2/a.js', ROOT)).toBe(
      undefined,
    );
  });

  it('works on Windows file URLs', () => {
    const root = 'file:///C:/Users/me/AppData/npm/node_modules/mcp-progress-bridge/dist/';
    expect(resolveOwnModule('../shared/log.js', `${root}cli/main.js`, root)).toBe(
      `${root}shared/log.js`,
    );
  });
});
