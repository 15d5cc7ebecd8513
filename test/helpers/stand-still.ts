/**
 * A daemon that stands still (SIGSTOP) and wakes as one whose event loop was blocked wakes: its
 * overdue timers first, then what its peers sent meanwhile. Linux only (/proc).
 */
import { readFileSync } from 'node:fs';
import type { CuttableLink } from './cuttable-link.js';
import { eventually, type RunningDaemon } from './daemon.js';

/**
 * Stops a daemon (SIGSTOP) while its event loop waits in epoll, idle: stopped inside a timer
 * callback instead, it could write to its peer on waking before its other overdue timers ran, and
 * wakeAfterTimers() would take that for their having run. Linux: the wait channel in /proc.
 */
export async function stopWhileIdle(daemon: RunningDaemon): Promise<void> {
  const waiting = `/proc/${daemon.child.pid}/wchan`;
  await eventually(
    () => {
      if (readFileSync(waiting, 'utf8') !== 'do_epoll_wait') return undefined;
      daemon.child.kill('SIGSTOP');
      return true;
    },
    10_000,
    'the daemon to wait in epoll, idle',
  );
}

/**
 * Wakes a daemon stopped by stopWhileIdle() (SIGCONT) as one whose event loop was blocked wakes:
 * its overdue timers run first, and only then does it read what its peer (NATS, a session) sent
 * meanwhile, which `link` (the path between them, held) gives it once the daemon has done anything
 * on it (written, or closed the connection): its timers ran by then. Woken from epoll with that
 * already in its socket, it would mostly read it first.
 */
export async function wakeAfterTimers(daemon: RunningDaemon, link: CuttableLink): Promise<void> {
  const before = link.fromDaemon();
  daemon.child.kill('SIGCONT');
  try {
    await eventually(
      () => (link.fromDaemon() > before ? true : undefined),
      20_000,
      'the daemon to act on the link after waking',
    );
  } finally {
    link.release();
  }
}
