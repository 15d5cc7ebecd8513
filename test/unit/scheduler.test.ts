/** Coalescing timing through the daemon's scheduler, with fake timers driving the real router. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { TickScheduler } from '../../src/daemon/scheduler.js';
import type { Notification } from '../../src/protocol/index.js';

let delivered: Array<{ at: number; n: Notification }>;
let router: Router;
let scheduler: TickScheduler;
const now = () => Date.now();

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
  delivered = [];
  router = new Router(
    { ...DEFAULT_ROUTER_OPTIONS, retentionMs: 1000, abandonGraceMs: 500 },
    (_s, n) => delivered.push({ at: now(), n }),
  );
  scheduler = new TickScheduler(router, now);
});
afterEach(() => {
  scheduler.stop();
  vi.useRealTimers();
});

const publish = (progress: number) => {
  router.publish(1, { v: 1, progressToken: 't', progress }, now());
  scheduler.schedule();
};
const progressAt = () =>
  delivered.map((d) => [d.at, 'progress' in d.n.params ? d.n.params.progress : d.n.params.status]);

describe('TickScheduler', () => {
  it('arms deadlines beyond the longest timer without firing early', () => {
    const far = new Router({ ...DEFAULT_ROUTER_OPTIONS, streamTtlMs: 3e9 }, () => {});
    const ticks = vi.spyOn(far, 'tick');
    const farScheduler = new TickScheduler(far, now);
    far.publish(1, { v: 1, progressToken: 'long', progress: 1 }, now());
    farScheduler.schedule();
    vi.advanceTimersByTime(1000);
    expect(ticks).not.toHaveBeenCalled();
    vi.advanceTimersByTime(2 ** 31);
    expect(ticks).toHaveBeenCalledTimes(1);
    expect(far.get('long')?.state).toBe('active');
    vi.advanceTimersByTime(3e9 - 1000 - 2 ** 31 + 1);
    expect(far.get('long')?.state).toBe('done');
    farScheduler.stop();
  });

  it('reports a failing tick and keeps ticking', () => {
    const errors: string[] = [];
    const failing = new TickScheduler(router, now, (error) => errors.push(error.message));
    const tick = vi.spyOn(router, 'tick').mockImplementationOnce(() => {
      throw new Error('boom');
    });
    router.subscribe(9, { progressToken: 't', minIntervalMs: 100 }, now());
    router.publish(1, { v: 1, progressToken: 't', progress: 1 }, now());
    router.publish(1, { v: 1, progressToken: 't', progress: 2 }, now());
    failing.schedule();
    vi.advanceTimersByTime(100);
    expect(errors).toEqual(['boom']);
    vi.advanceTimersByTime(1000);
    expect(tick.mock.calls.length).toBe(2);
    expect(progressAt().at(-1)).toEqual([1100, 2]);
    failing.stop();
  });

  it('flushes the newest held value exactly when the interval ends', () => {
    router.subscribe(9, { progressToken: 't', minIntervalMs: 100 }, now());
    publish(1);
    vi.advanceTimersByTime(30);
    publish(2);
    vi.advanceTimersByTime(30);
    publish(3);
    vi.advanceTimersByTime(39);
    expect(progressAt()).toEqual([[0, 1]]);
    vi.advanceTimersByTime(1);
    expect(progressAt()).toEqual([
      [0, 1],
      [100, 3],
    ]);
  });

  it('paces a steady flood to one notification per interval', () => {
    router.subscribe(9, { progressToken: 't', minIntervalMs: 100 }, now());
    for (let i = 1; i <= 1000; i++) {
      publish(i);
      vi.advanceTimersByTime(1);
    }
    vi.advanceTimersByTime(200);
    const times = delivered.map((d) => d.at);
    expect(times).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
    expect(progressAt().at(-1)).toEqual([1000, 1000]);
  });

  it('re-arms for an earlier deadline and ends an abandoned stream on time', () => {
    router.subscribe(9, { progressToken: 't', minIntervalMs: 0 }, now());
    publish(1);
    router.removeConnection(1, now());
    scheduler.schedule();
    vi.advanceTimersByTime(499);
    expect(delivered).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(progressAt()).toEqual([
      [0, 1],
      [500, 'abandoned'],
    ]);
    vi.advanceTimersByTime(1000);
    expect(router.get('t')).toBeUndefined();
  });

  it('does nothing after stop', () => {
    router.subscribe(9, { progressToken: 't', minIntervalMs: 100 }, now());
    publish(1);
    publish(2);
    scheduler.stop();
    vi.advanceTimersByTime(1000);
    expect(delivered).toHaveLength(1);
  });
});
