/** `mcp-progress open`: the real binary, a real daemon, and a real program as the browser. */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  runCli,
  startDaemon,
  tempDir,
} from '../helpers/daemon.js';
import { httpAsk } from '../helpers/page.js';

let daemon: RunningDaemon;
beforeAll(async () => {
  daemon = await startDaemon();
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

describe('mcp-progress open', () => {
  it('--help says what it does and how the URL works', async () => {
    const help = await runCli(['open', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: mcp-progress open [--print]');
    expect(help.stdout).toContain('one-time URL');
    expect(help.stdout).toContain('Options:');
    for (const line of help.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });

  it('--print prints a one-time URL of the page and starts nothing', async () => {
    const printed = await runCli(['open', '--print', '--runtime-dir', daemon.runtimeDir], {
      BROWSER: '/nonexistent/browser',
    });
    expect(printed.code).toBe(0);
    expect(printed.stderr).toBe('');
    const url = printed.stdout.trim();
    const { port } = new URL(daemon.info.url);
    expect(url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/\\?ticket=[\\w.-]+$`));
    expect(url).not.toContain(daemon.info.secret);
    expect((await httpAsk(url)).status).toBe(303);
    expect((await httpAsk(url)).status).toBe(401);
  });

  it('starts $BROWSER with the URL it printed', async () => {
    const dir = tempDir();
    const opened = join(dir, 'opened');
    const browser = join(dir, 'browser.sh');
    writeFileSync(browser, `#!/bin/sh\nprintf '%s' "$1" > ${JSON.stringify(opened)}\n`);
    chmodSync(browser, 0o755);
    const run = await runCli(['open', '--runtime-dir', daemon.runtimeDir], { BROWSER: browser });
    expect(run.code).toBe(0);
    const url = run.stdout.trim();
    const got = await eventually(
      () => {
        try {
          return readFileSync(opened, 'utf8') || undefined;
        } catch {
          return undefined;
        }
      },
      10_000,
      'the browser to be started',
    );
    expect(got).toBe(url);
  });

  it('says so, and exits 0 with the URL, when no browser can be started', async () => {
    const run = await runCli(['open', '--runtime-dir', daemon.runtimeDir], {
      BROWSER: '/nonexistent/browser',
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?ticket=/);
    expect(run.stderr).toContain('could not start a browser');
  });

  it('exits 1 naming the fix when no daemon runs', async () => {
    const run = await runCli(['open', '--print', '--runtime-dir', tempDir()]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('start the daemon with "mcp-progress daemon"');
  });
});
