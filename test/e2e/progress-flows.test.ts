/**
 * The two places where progress first flows through a process, where V8 is told to optimise the
 * hot path sooner (src/shared/tiering.ts): the daemon's first accepted frame, and a gateway
 * client's first notification. Each case loads the modules afresh, so each starts with nothing
 * having flowed; what happens to V8's counts then is test/e2e/tiering.test.ts's part.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Notification } from '../../src/protocol/notifications.js';
import { silentLogger } from '../../src/shared/log.js';
import { cleanupAll, eventually, startDaemon, tempDir } from '../helpers/daemon.js';
import { progressFrame as progress, rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());
beforeEach(() => {
  vi.resetModules();
});

describe('progress flowing through a process', () => {
  it("starts with the daemon's first accepted frame, not before, and not with a refused one", async () => {
    const { Daemon } = await import('../../src/daemon/daemon.js');
    const { progressHasFlowed } = await import('../../src/shared/tiering.js');
    const daemon = await Daemon.start({ runtimeDir: tempDir(), port: 0 }, silentLogger);
    try {
      const worker = await rawWorker(daemon.info.socket);
      worker.send('progress', { v: 1, progressToken: 'flows', progress: 'half' });
      await worker.reply((r) => r.type === 'rejected');
      expect(progressHasFlowed()).toBe(false);
      worker.send('progress', progress('flows', 1));
      await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 1);
      expect(progressHasFlowed()).toBe(true);
    } finally {
      await daemon.stop();
    }
  });

  it("starts with a gateway client's first notification, not with connecting or subscribing", async () => {
    const { GatewayClient } = await import('../../src/gateway-client/gateway-client.js');
    const { progressHasFlowed } = await import('../../src/shared/tiering.js');
    // The daemon in a process of its own: its frames flow there, not here.
    const daemon = await startDaemon();
    const client = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    try {
      const got: Notification[] = [];
      await client.subscribe({ progressToken: 'flows', minIntervalMs: 0 }, (n) => got.push(n));
      expect(progressHasFlowed()).toBe(false);
      const worker = await rawWorker(daemon.info.socket);
      worker.send('progress', progress('flows', 1));
      await eventually(() => (got.length === 1 ? true : undefined), 10_000, 'the notification');
      expect(progressHasFlowed()).toBe(true);
    } finally {
      await client.close();
      await daemon.stop();
    }
  });
});
