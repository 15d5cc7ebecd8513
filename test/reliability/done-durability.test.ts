/**
 * An acknowledged done is delivered or recoverable (issue 15): the daemon is
 * killed with SIGKILL right after it acked dones (before its tick could
 * deliver them); a daemon started on the same runtime dir ends those streams
 * again, so watchers that subscribe there learn every outcome.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, startDaemon, waitForExit } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { rawWorker } from '../helpers/worker.js';

afterEach(cleanupAll);

const DONE = 'notifications/progress/done';

describe('acked done survives kill -9', () => {
  it('8 streams acked done, then kill -9: a restarted daemon ends each of them for re-subscribing watchers', async () => {
    const first = await startDaemon(['--min-interval-ms', '100']);
    const tokens = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? `job-${i}` : i));
    const watcher = await connectGateway(first.info);
    for (const progressToken of tokens)
      await watcher.request('progress/subscribe', { progressToken });
    const worker = await rawWorker(first.info.socket);
    tokens.forEach((progressToken, i) => {
      worker.send('progress', { v: 1, progressToken, progress: 1, total: 2 });
      worker.send('done', {
        v: 1,
        progressToken,
        status: i === 3 ? 'error' : 'ok',
        message: `finished ${i}`,
        seq: i + 1,
      });
    });
    // The last ack, and at once the kill: the coalescing tick (100 ms) has not delivered them.
    await eventually(
      () => (worker.replies.filter((r) => r.type === 'ack').length === 8 ? true : undefined),
      10_000,
      'all 8 acks',
    );
    first.child.kill('SIGKILL');
    await waitForExit(first.child);
    worker.destroy();
    await watcher.close();

    const second = await startDaemon([], first.runtimeDir);
    const again = await connectGateway(second.info);
    for (const progressToken of tokens)
      await again.request('progress/subscribe', { progressToken });
    const dones = await eventually(
      () => {
        const got = again.notifications.filter((n) => n.method === DONE);
        return got.length === tokens.length ? got : undefined;
      },
      10_000,
      'a done for each acked stream',
    );
    for (const [i, progressToken] of tokens.entries()) {
      const done = dones.find((n) => n.params.progressToken === progressToken);
      // The token keeps its type (string or integer) and the worker's status and message.
      expect(done?.params).toMatchObject({
        progressToken,
        status: i === 3 ? 'error' : 'ok',
        message: `finished ${i}`,
      });
    }
    await again.close();
    await second.stop();
  });

  it('a done acked and then delivered is not delivered twice to a watcher that stays', async () => {
    const daemon = await startDaemon();
    const watcher = await connectGateway(daemon.info);
    await watcher.request('progress/subscribe', { progressToken: 'once', minIntervalMs: 0 });
    const worker = await rawWorker(daemon.info.socket);
    worker.send('done', { v: 1, progressToken: 'once', status: 'ok', seq: 1 });
    await worker.reply((r) => r.type === 'ack');
    await watcher.waitFor(1);
    // A second stream after it, delivered too: by then the first would have repeated.
    worker.send('done', { v: 1, progressToken: 'after', status: 'ok', seq: 2 });
    await watcher.request('progress/subscribe', { progressToken: 'after', minIntervalMs: 0 });
    await eventually(
      () =>
        watcher.notifications.some((n) => n.params.progressToken === 'after') ? true : undefined,
      10_000,
    );
    expect(watcher.notifications.filter((n) => n.params.progressToken === 'once')).toHaveLength(1);
    worker.destroy();
    await watcher.close();
    await daemon.stop();
  });
});
