/**
 * A second daemon is refused, in the words docs/PROTOCOL.md section 1 quotes, and leaves the
 * first one's files alone. (cli.test.ts: the same runtime dir and socket, and the start race.)
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, ROOT, runSecondDaemon, startDaemon, tempDir } from '../helpers/daemon.js';

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
    const same = await runSecondDaemon(tempDir(), first.info.socket);
    expect(same.code).toBe(1);
    expect(same.stderr).toContain(
      documented(
        'a daemon (pid P, version V) is already running on PATH: use it, or stop it first (kill P)',
        { ...values, PATH: first.info.socket },
      ),
    );
    const infoPath = join(first.runtimeDir, 'daemon.json');
    const before = readFileSync(infoPath, 'utf8');
    const other = join(tempDir(), 'other.sock');
    const elsewhere = await runSecondDaemon(first.runtimeDir, other);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain(
      documented(
        'a daemon (pid P, version V) is already running with runtime dir DIR (socket PATH): use it, or stop it first (kill P)',
        { ...values, DIR: first.runtimeDir, PATH: first.info.socket },
      ),
    );
    // It leaves the first one's daemon.json alone, and binds no socket of its own.
    expect(readFileSync(infoPath, 'utf8')).toBe(before);
    expect(() => statSync(other)).toThrow();
    for (const refused of [same, elsewhere]) expect(refused.stderr).not.toContain('internal error');
    expect(await first.stop()).toBe(0);
  });
});
