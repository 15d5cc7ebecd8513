/** Windows defaults, decided in one place (src/shared/locate.ts); run for real in test/windows/. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  defaultSocketPath,
  isRandomPipeName,
  newPipeName,
  resolveRuntimeDir,
} from '../../src/shared/locate.js';
import { cleanupAll, tempDir } from '../helpers/daemon.js';

afterAll(cleanupAll);

describe('Windows defaults', () => {
  it('the runtime dir is %LOCALAPPDATA%\\mcp-progress, after the flag and $MCP_PROGRESS_RUNTIME_DIR', () => {
    const env = { LOCALAPPDATA: 'C:\\Users\\ada\\AppData\\Local', XDG_RUNTIME_DIR: '/run/user/1' };
    expect(resolveRuntimeDir(undefined, env, 'win32')).toBe(
      'C:\\Users\\ada\\AppData\\Local\\mcp-progress',
    );
    expect(resolveRuntimeDir('D:\\rt', env, 'win32')).toBe('D:\\rt');
    expect(
      resolveRuntimeDir(undefined, { ...env, MCP_PROGRESS_RUNTIME_DIR: 'E:\\x' }, 'win32'),
    ).toBe('E:\\x');
    expect(resolveRuntimeDir(undefined, env, 'linux')).toBe('/run/user/1/mcp-progress');
  });

  it('a pipe name carries 128 random bits, and is never the user name', () => {
    const names = new Set(Array.from({ length: 100 }, () => newPipeName()));
    expect(names.size).toBe(100);
    for (const name of names) {
      expect(name).toMatch(/^\\\\\.\\pipe\\mcp-progress-[0-9a-f]{32}$/);
      expect(isRandomPipeName(name)).toBe(true);
    }
    expect(isRandomPipeName('\\\\.\\pipe\\mcp-progress-root')).toBe(false);
  });

  it('the default pipe is the one kept in pipe-name, else a fresh random one', () => {
    const dir = tempDir();
    const first = defaultSocketPath(dir, 'win32');
    expect(isRandomPipeName(first)).toBe(true);
    expect(defaultSocketPath(dir, 'win32')).not.toBe(first);
    const kept = newPipeName();
    writeFileSync(join(dir, 'pipe-name'), `${kept}\n`);
    expect(defaultSocketPath(dir, 'win32')).toBe(kept);
    // A planted or broken file is not a name: a fresh one instead.
    writeFileSync(join(dir, 'pipe-name'), '\\\\.\\pipe\\guessable\n');
    expect(isRandomPipeName(defaultSocketPath(dir, 'win32'))).toBe(true);
    expect(defaultSocketPath(dir, 'linux')).toBe(join(dir, 'bridge.sock'));
  });
});
