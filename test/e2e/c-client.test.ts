/**
 * The single-header C client (clients/c/mcp_progress.h) on Linux: built with cc as strict C99,
 * run against the real daemon. (Its Windows build runs in test/windows/ under Wine.)
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCWorker, cc } from '../helpers/c-client.js';
import {
  cleanupAll,
  collectOutput,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { expectCancelReaches, expectEveryValueThenOneDone } from '../helpers/stepped-worker.js';

describe.skipIf(cc.skip)('the C client on Linux', () => {
  let daemon: RunningDaemon;
  let program: string;
  beforeAll(async () => {
    cc.require();
    program = buildCWorker('cc', tempDir());
    daemon = await startDaemon();
  });
  afterAll(async () => {
    await daemon?.stop();
    cleanupAll();
  });

  function startWorker(mode: string, token: string) {
    const steps = tempDir();
    mkdirSync(steps, { recursive: true });
    const child = spawn(program, [mode, '3', steps], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: token },
    });
    return { child, worker: collectOutput(child), steps };
  }

  it('publishes every value, then a done that is acked; the session sees it once', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'c-job', minIntervalMs: 0 });
    const { child, worker, steps } = startWorker('done', 'c-job');
    await expectEveryValueThenOneDone(gateway, 'c-job', worker, steps);
    expect(await waitForExit(child)).toBe(0);
    expect(worker.stderr()).toBe('');
    await gateway.close();
  });

  it('is told of a cancel, with its reason, through its callback', async () => {
    const gateway = await connectGateway(daemon.info);
    const { child, worker } = startWorker('cancel', 'c-cancel');
    await expectCancelReaches(gateway, 'c-cancel', worker);
    expect(await waitForExit(child)).toBe(0);
    await gateway.close();
  });

  it('says what is missing when there is no token', async () => {
    const child = spawn(program, ['done', '1', tempDir()], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: '' },
    });
    const output = collectOutput(child);
    expect(await waitForExit(child)).toBe(1);
    expect(output.stderr()).toContain('no token: set MCP_PROGRESS_TOKEN');
  });
});
