/**
 * The Python client's pipe transport, the one it uses on Windows (no AF_UNIX for Python there):
 * the daemon's pipe opened as a file, read by a thread. On Linux it is tested through a
 * pseudo-terminal in raw mode that socat joins to the daemon's socket: a file whose bytes are
 * the daemon's, both ways. (Windows itself, PeekNamedPipe included, is not run: no Python under
 * Wine here; docs/RELIABILITY.md says so.)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { pythonWorker } from '../helpers/driven-worker.js';
import { connectGateway } from '../helpers/gateway.js';
import { tool } from '../helpers/tools.js';

const socat = tool('socat', { debian: 'socat', probe: ['socat', '-V'] });

describe.skipIf(socat.skip)('the Python client through a pipe opened as a file', () => {
  let daemon: RunningDaemon;
  let relay: ChildProcess;
  let pipe: string;
  beforeAll(async () => {
    socat.require();
    daemon = await startDaemon();
    pipe = join(tempDir(), 'pipe');
    relay = spawn(
      'socat',
      [`PTY,link=${pipe},rawer,echo=0`, `UNIX-CONNECT:${daemon.info.socket}`],
      { stdio: 'ignore' },
    );
    await eventually(() => (existsSync(pipe) ? true : undefined), 10_000, 'the pty');
  });
  afterAll(async () => {
    relay?.kill('SIGTERM');
    if (relay !== undefined) await waitForExit(relay);
    await daemon?.stop();
    cleanupAll();
  });

  it('publishes, hears a cancel with its reason, and gets its done acked', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'py-pipe', minIntervalMs: 0 });
    const worker = pythonWorker({ MCP_PROGRESS_SOCKET: pipe, MCP_PROGRESS_TOKEN: 'py-pipe' });
    await worker.next((e) => e.event === 'ready', 'ready');
    worker.send({ update: { progress: 1, total: 2, message: 'one' } });
    await gateway.waitFor(1);
    expect(gateway.notifications[0]?.params).toEqual({
      progressToken: 'py-pipe',
      progress: 1,
      total: 2,
      message: 'one',
    });
    await eventually(async () => {
      const reply = await gateway.request('progress/cancel', {
        progressToken: 'py-pipe',
        reason: 'stop',
      });
      return (reply.result as { workers?: number }).workers === 1 ? true : undefined;
    });
    expect(await worker.next((e) => e.event === 'cancel', 'cancel')).toMatchObject({
      reason: 'stop',
    });
    worker.send({ done: 'cancelled' });
    expect(await worker.next((e) => e.event === 'done', 'done')).toMatchObject({
      delivered: true,
    });
    await gateway.waitFor(2);
    expect(gateway.notifications[1]).toMatchObject({
      method: 'notifications/progress/done',
      params: { progressToken: 'py-pipe', status: 'cancelled' },
    });
    expect(worker.stderr()).toBe('');
    await gateway.close();
  });
});
