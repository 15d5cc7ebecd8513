/**
 * Fairness between workers (issue 13): while many connections flood the
 * worker socket, a new connection's ping and an honest worker's frame to an
 * honest subscriber are served early in the flood, not after it; and the flood
 * loses nothing and is slowed by backpressure, never disconnected. Ordering,
 * not time: the probes must be answered before the daemon has read a fifth of
 * any flooder's frames (each flooder asks for an ack there). (The latencies are measured by `npm run bench -- --only probe`.)
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, ROOT, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { rawWorker } from '../helpers/worker.js';

afterEach(cleanupAll);

const FLOODERS = 24;
const FRAMES = 20_000;

describe.skipIf(process.platform === 'win32')('fairness under a flood', () => {
  it(`${FLOODERS} flooding connections: a new ping and an honest pair are served during the flood; the flood loses nothing`, async () => {
    const daemon = await startDaemon();
    const watcher = await connectGateway(daemon.info);
    const tokens = Array.from({ length: FLOODERS }, (_, i) => `flood-${i}`);
    for (const progressToken of tokens)
      await watcher.request('progress/subscribe', { progressToken });
    const honestToken = 'honest';
    await watcher.request('progress/subscribe', { progressToken: honestToken, minIntervalMs: 0 });
    const honest = await rawWorker(daemon.info.socket);

    const events: Array<{ event: string; token?: string }> = [];
    const flooder = spawn(
      process.execPath,
      [
        join(ROOT, 'test/fixtures/flooder.mjs'),
        daemon.info.socket,
        String(FLOODERS),
        String(FRAMES),
        'flood',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const order: string[] = [];
    createInterface({ input: flooder.stdout }).on('line', (line) => {
      const event = JSON.parse(line) as { event: string; token?: string };
      events.push(event);
      if (event.event === 'fifth') order.push(`fifth ${event.token}`);
    });
    await eventually(() => events.find((e) => e.event === 'flooding'), 20_000, 'the flood');

    // A new connection's ping, and one honest frame through to its subscriber, while it floods.
    const probe = await rawWorker(daemon.info.socket);
    probe.send('ping', {});
    const honestDelivered = eventually(
      () =>
        watcher.notifications.some((n) => n.params.progressToken === honestToken)
          ? true
          : undefined,
      60_000,
      'the honest frame at its subscriber',
    ).then(() => order.push('honest delivered'));
    honest.send('progress', { v: 1, progressToken: honestToken, progress: 1, seq: 1 });
    await probe.reply((r) => r.type === 'pong', 60_000);
    order.push('pong');
    await honestDelivered;

    // Then the flood ends: every flooder's done acked, none refused or cut off.
    await eventually(
      () => (events.filter((e) => e.event === 'acked').length === FLOODERS ? true : undefined),
      120_000,
      'every flooder acked',
    );
    expect(order.slice(0, 2).sort()).toEqual(['honest delivered', 'pong']);
    expect(
      events.filter((e) => e.event !== 'acked' && e.event !== 'fifth' && e.event !== 'flooding'),
    ).toEqual([]);

    // Nothing accepted was lost: each flood stream ends with its final value, then done.
    await eventually(
      () => {
        const done = new Set(
          watcher.notifications
            .filter((n) => n.method === 'notifications/progress/done')
            .map((n) => n.params.progressToken),
        );
        return tokens.every((t) => done.has(t)) ? true : undefined;
      },
      30_000,
      'every flood stream done',
    );
    for (const token of tokens) {
      const last = watcher.notifications
        .filter((n) => n.method === 'notifications/progress' && n.params.progressToken === token)
        .at(-1);
      expect(last?.params.progress, token).toBe(FRAMES);
    }
    flooder.kill();
    probe.destroy();
    honest.destroy();
    await watcher.close();
    await daemon.stop();
  });
});
