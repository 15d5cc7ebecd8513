/**
 * Fairness between workers (issue 13): while many connections flood the
 * worker socket, a new connection's ping and an honest worker's frame to an
 * honest subscriber are served early in the flood, not after it; and the flood
 * loses nothing and is slowed by backpressure, never disconnected. Ordering,
 * not time: half way into each flood is a marker (a done for its
 * own token); one subscriber, with coalescing off, receives the markers, the
 * honest frame, and a done the probe sent right behind its ping, in the order
 * the daemon read them: both probes must come before every marker. (The latencies are measured by `npm run bench -- --only probe`.)
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, ROOT, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';

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
    const marks = tokens.map((_, i) => `flood-mark-${i}`);
    for (const progressToken of [honestToken, 'probe-mark', ...marks])
      await watcher.request('progress/subscribe', { progressToken, minIntervalMs: 0 });

    const events: Array<{ event: string; token?: string }> = [];
    const flooder = spawn(
      process.execPath,
      [
        join(ROOT, 'test/fixtures/flooder.mjs'),
        daemon.info.socket,
        String(FLOODERS),
        String(FRAMES),
        'flood',
        honestToken,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    createInterface({ input: flooder.stdout }).on('line', (line) => {
      const event = JSON.parse(line) as { event: string; token?: string };
      events.push(event);
    });
    // The flooder process itself probes once all its connections flood: a new connection's
    // ping, and an honest frame (acked once the router has it).
    const honestDelivered = eventually(
      () =>
        watcher.notifications.some((n) => n.params.progressToken === honestToken)
          ? true
          : undefined,
      60_000,
      'the honest frame at its subscriber',
    );
    await eventually(
      () => (events.some((e) => e.event === 'pong') ? true : undefined),
      60_000,
      'the pong',
    );
    await honestDelivered;

    // Then the flood ends: every flooder's done acked, none refused or cut off.
    await eventually(
      () => (events.filter((e) => e.event === 'acked').length === FLOODERS ? true : undefined),
      120_000,
      'every flooder acked',
    );
    // In the order the daemon read them: the honest frame and the ping (its probe-mark) before
    // any flood's marker.
    const seen = await eventually(
      () => {
        const order = watcher.notifications
          .map((n) => String(n.params.progressToken))
          .filter((t) => t === honestToken || t === 'probe-mark' || t.startsWith('flood-mark-'));
        return order.length === marks.length + 2 ? order : undefined;
      },
      30_000,
      'every marker',
    );
    const firstMark = seen.findIndex((t) => t.startsWith('flood-mark-'));
    expect(seen.indexOf(honestToken), seen.join(', ')).toBeLessThan(firstMark);
    expect(seen.indexOf('probe-mark'), seen.join(', ')).toBeLessThan(firstMark);
    expect(
      events.filter((e) => !['acked', 'flooding', 'pong', 'honest-acked'].includes(e.event)),
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
    await watcher.close();
    await daemon.stop();
  });
});
