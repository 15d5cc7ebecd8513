/** The daemon's footing on disk: socket paths near the Unix limit, and one owner per runtime dir. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SOCKET_PATH_BYTES } from '../../src/daemon/runtime-dir.js';
import { cleanupAll, runCli, startDaemon, tempDir } from '../helpers/daemon.js';

afterEach(cleanupAll);

/** A path of exactly `bytes` bytes inside a fresh temporary directory. */
function socketPathOf(bytes: number): string {
  const dir = tempDir('mcpp-');
  const name = 's'.repeat(bytes - dir.length - 1);
  expect(name.length).toBeGreaterThan(0);
  return join(dir, name);
}

describe.skipIf(process.platform === 'win32')('socket paths near the limit', () => {
  it.each([101, 104, MAX_SOCKET_PATH_BYTES])(
    'a %i-byte socket path starts and serves',
    async (bytes) => {
      const socket = socketPathOf(bytes);
      expect(Buffer.byteLength(socket)).toBe(bytes);
      const daemon = await startDaemon(['--socket', socket]);
      const status = await runCli(['status', '--socket', socket]);
      expect(status.code).toBe(0);
      await daemon.stop();
    },
  );

  it('a path over the limit is refused with an error naming the limit', async () => {
    const socket = socketPathOf(MAX_SOCKET_PATH_BYTES + 1);
    const runtimeDir = tempDir();
    mkdirSync(runtimeDir, { recursive: true });
    const result = await runCli([
      'daemon',
      '--runtime-dir',
      runtimeDir,
      '--port',
      '0',
      '--socket',
      socket,
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`${MAX_SOCKET_PATH_BYTES + 1} bytes`);
    expect(result.stderr).toContain(`at most ${MAX_SOCKET_PATH_BYTES} bytes`);
  });
});
