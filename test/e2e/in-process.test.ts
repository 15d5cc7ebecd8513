/**
 * In-process sessions: the daemon's own MCP tools subscribe through the
 * router without a WebSocket, sharing the subscriber ids of WS sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import type { Notification } from '../../src/protocol/notifications.js';
import { silentLogger } from '../../src/shared/log.js';
import { cleanupAll, eventually, tempDir } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { progressFrame as progress, rawWorker } from '../helpers/worker.js';

let daemon: Daemon;

beforeAll(async () => {
  daemon = await Daemon.start({ runtimeDir: tempDir(), port: 0 }, silentLogger);
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

describe('in-process sessions', () => {
  it('deliver in order under each label, alongside a WebSocket session, and stop at close', async () => {
    const a = await daemon.progressSource.openSession();
    const b = await daemon.progressSource.openSession();
    const gotA: Notification[] = [];
    const gotB: Notification[] = [];
    await a.subscribe({ progressToken: 'shared', as: 1, minIntervalMs: 0 }, (n) => gotA.push(n));
    await b.subscribe({ progressToken: 'shared', as: 1, minIntervalMs: 0 }, (n) => gotB.push(n));
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'shared', minIntervalMs: 0 });
    expect(daemon.status().sessions).toBe(3);
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', progress('shared', 1));
    worker.send('progress', progress('shared', 2));
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 2);
    await eventually(() => (gotA.length === 2 && gotB.length === 2 ? true : undefined));
    for (const got of [gotA, gotB])
      expect(got.map((n) => n.params)).toEqual([
        { progressToken: 1, progress: 1 },
        { progressToken: 1, progress: 2 },
      ]);
    // A closed session receives nothing more; the others go on.
    await a.close();
    worker.send('progress', progress('shared', 3));
    worker.send('done', { v: 1, progressToken: 'shared', seq: 4 });
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 4);
    await gateway.waitFor(4);
    await eventually(() => (gotB.length === 4 ? true : undefined));
    expect(gotB.map((n) => n.method)).toEqual([
      'notifications/progress',
      'notifications/progress',
      'notifications/progress',
      'notifications/progress/done',
    ]);
    expect(gotA).toHaveLength(2);
    expect(gateway.notifications.map((n) => n.params.progressToken)).toEqual([
      'shared',
      'shared',
      'shared',
      'shared',
    ]);
    worker.destroy();
    await b.close();
    await gateway.close();
  });

  it('a receiver that throws costs only itself', async () => {
    const bad = await daemon.progressSource.openSession();
    const good = await daemon.progressSource.openSession();
    const got: number[] = [];
    await bad.subscribe({ progressToken: 'throws', minIntervalMs: 0 }, () => {
      throw new Error('a bug in a tool');
    });
    await good.subscribe({ progressToken: 'throws', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') got.push(n.params.progress);
    });
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', progress('throws', 1));
    worker.send('progress', progress('throws', 2));
    await eventually(() => (got.length === 2 ? true : undefined));
    expect(got).toEqual([1, 2]);
    worker.destroy();
    await bad.close();
    await good.close();
  });

  it('refuses a second subscription under the same label in one session', async () => {
    const session = await daemon.progressSource.openSession();
    await session.subscribe({ progressToken: 'dup' }, () => {});
    await expect(session.subscribe({ progressToken: 'dup' }, () => {})).rejects.toMatchObject({
      code: 'duplicate_subscription',
    });
    await session.close();
  });

  it('the package exports relayProgress at mcp-progress-bridge/mcp', async () => {
    const specifier = 'mcp-progress-bridge/mcp';
    const mcp = (await import(specifier)) as Record<string, unknown>;
    expect(typeof mcp.relayProgress).toBe('function');
    expect(typeof mcp.createProgressMcpServer).toBe('function');
  });
});
