/** The "already running" refusals read exactly as docs/PROTOCOL.md section 1 quotes them. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, ROOT, runCli, startDaemon, tempDir } from '../helpers/daemon.js';

/** The doc's text with line breaks and indentation collapsed, as a reader sees it rendered. */
const doc = readFileSync(join(ROOT, 'docs/PROTOCOL.md'), 'utf8').replace(/\s+/g, ' ');

afterAll(() => cleanupAll());

/** The quoted template in the doc, with its placeholders replaced by the real values. */
function documented(template: string, values: Record<string, string>): string {
  expect(doc).toContain(`\`${template}\``);
  return Object.entries(values).reduce(
    (text, [name, value]) => text.replace(new RegExp(`\\b${name}\\b`, 'g'), value),
    template,
  );
}

describe('a second daemon', () => {
  it('on the same socket from another runtime dir, and in the same runtime dir, says what the doc says', async () => {
    const first = await startDaemon();
    const values = { P: String(first.info.pid), V: first.info.version };
    const same = await runCli([
      'daemon',
      '--runtime-dir',
      tempDir(),
      '--socket',
      first.info.socket,
      '--port',
      '0',
    ]);
    expect(same.code).toBe(1);
    expect(same.stderr).toContain(
      documented(
        'a daemon (pid P, version V) is already running on PATH: use it, or stop it first (kill P)',
        { ...values, PATH: first.info.socket },
      ),
    );
    const other = join(tempDir(), 'other.sock');
    const elsewhere = await runCli([
      'daemon',
      '--runtime-dir',
      first.runtimeDir,
      '--socket',
      other,
      '--port',
      '0',
    ]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain(
      documented(
        'a daemon (pid P, version V) is already running with runtime dir DIR (socket PATH): use it, or stop it first (kill P)',
        { ...values, DIR: first.runtimeDir, PATH: first.info.socket },
      ),
    );
    expect(await first.stop()).toBe(0);
  });
});
