/**
 * A session's writes are paced (src/daemon/write-pacer.ts, NOTIFICATION_LINGER_MS): values that
 * follow a write closely are held and go out together, each once and in order. A real daemon, a
 * real Python worker writing triples of frames 1 ms apart, and a real WebSocket session that counts
 * the notifications each read of its socket brought.
 */
import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, collectOutput, eventually, ROOT, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

const TRIPLES = 20;

describe('the pacing of a session', () => {
  afterAll(() => cleanupAll());

  it('values that follow a write within the linger reach the client in one read, each once, in order', async () => {
    const daemon = await startDaemon();
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'paced', minIntervalMs: 0 });
    // How many progress notifications each read of the session's socket brought.
    const perRead: number[] = [];
    const socket = (gateway.ws as unknown as { _socket: Socket })._socket;
    socket.prependListener('data', (chunk: Buffer) => {
      perRead.push(chunk.toString('latin1').split('"notifications/progress"').length - 1);
    });
    const worker = spawn(
      PYTHON,
      [
        ...PYTHON_ARGS,
        join(ROOT, 'test/fixtures/paced_triples.py'),
        daemon.info.socket,
        'paced',
        String(TRIPLES),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const output = collectOutput(worker);
    await eventually(
      () => (output.stdout().includes('SENT') ? true : undefined),
      30_000,
      () => `the worker to send its frames (stderr: ${output.stderr()})`,
    );
    const values = () =>
      gateway.notifications
        .filter((n) => n.method === 'notifications/progress')
        .map((n) => n.params.progress);
    await eventually(
      () => (values().length >= 3 * TRIPLES ? true : undefined),
      10_000,
      () => `${3 * TRIPLES} values (got ${values().length})`,
    );
    expect(values()).toEqual(Array.from({ length: 3 * TRIPLES }, (_, index) => index + 1));
    // The first of a triple, after 60 ms of quiet, goes out at once; the two written 1 and 2 ms
    // after it are held, and go out in one write. Unpaced, each is a write and a read of its own.
    const together = perRead.filter((count) => count >= 2).length;
    expect(together, `notifications per read: ${perRead.join(' ')}`).toBeGreaterThanOrEqual(
      TRIPLES / 2,
    );
    await gateway.close();
  });
});
