/**
 * Issue 23 item 7: values that used to be taken and then misbehaved are refused up front, by the
 * real binary, with a message naming what was wrong and how to fix it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { DAEMON_FLAGS, MAX_TIMER_MS } from '../../src/daemon/options.js';
import { cleanupAll, daemonStart, runCli } from '../helpers/daemon.js';

afterAll(() => cleanupAll());

describe('option bounds', () => {
  it('every -ms flag above 2^31-1 (which Node would make 1 ms) is refused, naming the flag and its range', async () => {
    const timing = DAEMON_FLAGS.filter((spec) => spec.name.endsWith('-ms'));
    expect(timing.map((spec) => spec.name)).toContain('handshake-timeout-ms');
    for (const spec of timing) {
      const max = spec.kind === 'integer' ? (spec.max ?? MAX_TIMER_MS) : MAX_TIMER_MS;
      expect(max).toBeLessThanOrEqual(MAX_TIMER_MS);
      const result = await daemonStart([`--${spec.name}`, String(MAX_TIMER_MS + 1)]);
      expect(result.code, spec.name).toBe(2);
      expect(result.stderr).toContain(`--${spec.name}: expected an integer from`);
      expect(result.stderr).toContain(`to ${max}`);
    }
  }, 120_000);

  it('a relative MCP_PROGRESS_RUNTIME_DIR is refused by the daemon and the commands, with the absolute path to use', async () => {
    for (const args of [['daemon', '--port', '0'], ['status'], ['publish', '--token', 't']]) {
      const result = await runCli(args, { MCP_PROGRESS_RUNTIME_DIR: 'relative/dir' });
      expect(result.code, args[0]).toBe(1);
      expect(result.stderr).toContain(
        '$MCP_PROGRESS_RUNTIME_DIR is "relative/dir", a relative path',
      );
      expect(result.stderr).toMatch(/an absolute path, such as "\/.*\/relative\/dir"/);
    }
  });
});
