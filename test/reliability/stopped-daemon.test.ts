/**
 * A daemon that is stopped (SIGSTOP) while a worker sends done: the Node
 * client cannot know whether done will be delivered, so it reports done as
 * not acknowledged and pending, never as lost; the daemon, once resumed,
 * reads it and ends the stream for its watchers.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { connectPublisher } from '../../src/client/index.js';
import type { BridgeError } from '../../src/shared/errors.js';
import { cleanupAll, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';

afterAll(() => cleanupAll());

describe('done to a stopped daemon', () => {
  it('is reported pending (daemon_timeout), and is delivered once the daemon resumes', async () => {
    const daemon = await startDaemon();
    const watcher = await connectGateway(daemon.info);
    const errors: BridgeError[] = [];
    const token = `stopped-${process.pid}`;
    try {
      await watcher.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
      const publisher = await connectPublisher({
        token,
        socket: daemon.info.socket,
        intervalMs: 0,
        doneTimeoutMs: 300,
        onError: (error) => errors.push(error),
      });
      publisher.update({ progress: 1 });
      await watcher.waitFor(1);
      daemon.child.kill('SIGSTOP');
      const outcome = await publisher.done('ok');
      expect(outcome).toMatchObject({ delivered: false, pending: true });
      expect(outcome.error?.code).toBe('daemon_timeout');
      expect(outcome.error?.message).toContain('it was written');
      daemon.child.kill('SIGCONT');
      const [, done] = await watcher.waitFor(2);
      expect(done).toEqual({
        method: 'notifications/progress/done',
        params: { progressToken: token, status: 'ok' },
      });
      expect(errors.map((e) => e.code)).toEqual(['daemon_timeout']);
    } finally {
      daemon.child.kill('SIGCONT');
      await watcher.close();
      await daemon.stop();
    }
  });
});
