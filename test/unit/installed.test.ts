/** missingPackage: what the daemon loads at first use is looked for at start. */
import { describe, expect, it } from 'vitest';
import { missingPackage } from '../../src/daemon/installed.js';

describe('missingPackage', () => {
  it('is undefined for the packages the daemon loads later, which are installed', () => {
    expect(missingPackage('ws')).toBeUndefined();
    expect(missingPackage('node-ipc')).toBeUndefined();
  });

  it('is start_failed naming a package that cannot be found, and what to do', () => {
    const missing = missingPackage('mcp-progress-no-such-package');
    expect(missing?.code).toBe('start_failed');
    expect(missing?.message).toMatch(
      /^cannot find mcp-progress-no-such-package \(reinstall mcp-progress-bridge\): /,
    );
  });
});
