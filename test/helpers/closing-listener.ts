/**
 * A Unix socket that accepts every connection and closes it at once, saying nothing: what a
 * client's reconnects are checked against (each must wait its backoff step, not loop).
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { expect, onTestFinished } from 'vitest';

export interface ClosingListener {
  readonly path: string;
  /** Connections accepted so far. */
  accepted(): number;
}

/** Listens in `dir` until the test ends. */
export async function startClosingListener(dir: string): Promise<ClosingListener> {
  const path = join(dir, 'closing.sock');
  let accepted = 0;
  const closer = createServer((socket) => {
    accepted++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => closer.listen(path, resolve));
  onTestFinished(() => {
    closer.close();
  });
  return { path, accepted: () => accepted };
}

/**
 * A client that ran `ms` against the listener came back after each loss only after its wait: at
 * least 25 ms each time (50 ms, at most half taken off), so one connection at the start and at
 * most one per 25 ms after it. (Coming back at once, clients made thousands a second.)
 */
export function expectBackedOff(listener: ClosingListener, ms: number): void {
  expect(listener.accepted()).toBeGreaterThanOrEqual(2);
  expect(listener.accepted()).toBeLessThanOrEqual(2 + ms / 25);
}
