import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router, type RouterOptions } from '../../src/daemon/router.js';
import type {
  DoneFrame,
  Notification,
  ProgressFrame,
  ProgressToken,
} from '../../src/protocol/index.js';

interface Delivered {
  to: number;
  n: Notification;
}

function setup(options: Partial<RouterOptions> = {}) {
  const out: Delivered[] = [];
  const router = new Router(
    { ...DEFAULT_ROUTER_OPTIONS, defaultMinIntervalMs: 0, ...options },
    (to, n) => out.push({ to, n }),
  );
  const take = () => out.splice(0, out.length);
  return { router, out, take };
}

/** The progress value of a delivery, or undefined for a done notice. */
const progressOf = (x: Delivered): number | undefined =>
  'progress' in x.n.params ? x.n.params.progress : undefined;

const p = (progressToken: ProgressToken, fields: Partial<ProgressFrame> = {}): ProgressFrame => ({
  v: 1,
  progressToken,
  ...fields,
});
const d = (progressToken: ProgressToken, fields: Partial<DoneFrame> = {}): DoneFrame => ({
  v: 1,
  progressToken,
  ...fields,
});

describe('router: forwarding', () => {
  it('forwards the worker fields verbatim, without v and seq', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'job' }, 0);
    const meta = { step: 'render', nested: { a: [1, 2] } };
    expect(
      router.publish(
        7,
        p('job', { progress: 0.5, total: 10, message: 'half', _meta: meta, seq: 3 }),
        1,
      ),
    ).toEqual({ ok: true });
    const [delivery] = take();
    expect(delivery).toEqual({
      to: 1,
      n: {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 'job', progress: 0.5, total: 10, message: 'half', _meta: meta },
      },
    });
    expect(delivery?.n.params).not.toHaveProperty('v');
    expect(delivery?.n.params).not.toHaveProperty('seq');
  });

  it('keeps "7" and 7 apart, token types intact', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: '7' }, 0);
    router.subscribe(2, { progressToken: 7 }, 0);
    router.publish(1, p('7', { progress: 1 }), 1);
    router.publish(1, p(7, { progress: 100 }), 1);
    const got = take();
    expect(got).toHaveLength(2);
    expect(got[0]).toMatchObject({ to: 1, n: { params: { progressToken: '7', progress: 1 } } });
    expect(got[1]).toMatchObject({ to: 2, n: { params: { progressToken: 7, progress: 100 } } });
    expect(router.list().map((s) => s.progressToken)).toEqual(['7', 7]);
  });

  it('delivers to every subscriber of the token and to no one else', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'a' }, 0);
    router.subscribe(2, { progressToken: 'a' }, 0);
    router.subscribe(3, { progressToken: 'b' }, 0);
    router.publish(1, p('a', { progress: 1 }), 1);
    expect(take().map((x) => x.to)).toEqual([1, 2]);
  });

  it('relabels with `as`, leaving other subscribers verbatim', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'route-xyz', as: 1 }, 0);
    router.subscribe(2, { progressToken: 'route-xyz' }, 0);
    router.publish(1, p('route-xyz', { progress: 2, message: 'm' }), 1);
    router.finish(1, d('route-xyz'), 2);
    const got = take();
    expect(got.map((x) => [x.to, x.n.method, x.n.params.progressToken])).toEqual([
      [1, 'notifications/progress', 1],
      [2, 'notifications/progress', 'route-xyz'],
      [1, 'notifications/progress/done', 1],
      [2, 'notifications/progress/done', 'route-xyz'],
    ]);
    expect(got[0]?.n.params).toEqual({ progressToken: 1, progress: 2, message: 'm' });
  });

  it('a frame with no subscribers is accepted and remembered', () => {
    const { router, out } = setup();
    expect(router.publish(1, p('x', { progress: 3, total: 9 }), 5).ok).toBe(true);
    expect(out).toHaveLength(0);
    expect(router.get('x')).toMatchObject({
      state: 'active',
      last: { progressToken: 'x', progress: 3, total: 9 },
      startedAt: 5,
      updatedAt: 5,
    });
  });
});

describe('router: monotonic guard and ordinal', () => {
  it('rejects progress that does not increase, and does not forward it', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 't' }, 0);
    router.publish(1, p('t', { progress: 5 }), 1);
    take();
    for (const bad of [5, 4, -1]) {
      const outcome = router.publish(1, p('t', { progress: bad }), 2);
      expect(outcome).toMatchObject({ ok: false, code: 'non_monotonic' });
      if (!outcome.ok) expect(outcome.message).toContain(`progress ${bad} is not greater than`);
    }
    expect(take()).toHaveLength(0);
    expect(router.publish(1, p('t', { progress: 5.0001 }), 3).ok).toBe(true);
  });

  it('gives an omitted progress last + 1, starting from 1', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 't' }, 0);
    router.publish(1, p('t', { message: 'a' }), 1);
    router.publish(1, p('t', { message: 'b' }), 2);
    router.publish(1, p('t', { progress: 10.5 }), 3);
    router.publish(1, p('t', { message: 'c' }), 4);
    expect(take().map((x) => [progressOf(x), x.n.params.message])).toEqual([
      [1, 'a'],
      [2, 'b'],
      [10.5, undefined],
      [11.5, 'c'],
    ]);
  });

  it('accepts any finite first value, negative included', () => {
    const { router } = setup();
    expect(router.publish(1, p('t', { progress: -50 }), 0).ok).toBe(true);
    expect(router.publish(1, p('t', { progress: -49 }), 0).ok).toBe(true);
  });

  it('applies the guard per token, across connections', () => {
    const { router } = setup();
    router.publish(1, p('t', { progress: 5 }), 0);
    expect(router.publish(2, p('t', { progress: 5 }), 0).ok).toBe(false);
    expect(router.publish(2, p('u', { progress: 1 }), 0).ok).toBe(true);
  });
});

describe('router: done', () => {
  it('closes the stream: subscribers get the done notice, later frames are stream_closed', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'j' }, 0);
    router.publish(1, p('j', { progress: 1 }), 1);
    expect(router.finish(1, d('j', { status: 'error', message: 'boom' }), 2).ok).toBe(true);
    expect(take().map((x) => x.n)).toEqual([
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 'j', progress: 1 },
      },
      {
        jsonrpc: '2.0',
        method: 'notifications/progress/done',
        params: { progressToken: 'j', status: 'error', message: 'boom' },
      },
    ]);
    const late = router.publish(1, p('j', { progress: 2 }), 3);
    expect(late).toMatchObject({ ok: false, code: 'stream_closed' });
    expect(router.finish(1, d('j'), 3)).toMatchObject({ ok: false, code: 'stream_closed' });
    expect(take()).toHaveLength(0);
    expect(router.get('j')).toMatchObject({
      state: 'done',
      status: 'error',
      message: 'boom',
      subscribers: 0,
    });
  });

  it('defaults status to ok', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'j' }, 0);
    router.finish(1, d('j'), 1);
    expect(take()[0]?.n.params).toEqual({ progressToken: 'j', status: 'ok' });
  });

  it('accepts done for a token never seen: the stream exists, already done', () => {
    const { router, take } = setup();
    expect(router.finish(1, d('never', { status: 'cancelled' }), 10).ok).toBe(true);
    expect(router.get('never')).toMatchObject({ state: 'done', status: 'cancelled' });
    router.subscribe(4, { progressToken: 'never' }, 11);
    expect(take()).toEqual([
      {
        to: 4,
        n: {
          jsonrpc: '2.0',
          method: 'notifications/progress/done',
          params: { progressToken: 'never', status: 'cancelled' },
        },
      },
    ]);
  });

  it('ends the subscription: nothing follows done, even after the token is reused', () => {
    const { router, take } = setup({ retentionMs: 100 });
    router.subscribe(1, { progressToken: 'j' }, 0);
    router.finish(1, d('j'), 1);
    take();
    expect(router.stats().subscriptions).toBe(0);
    router.tick(101);
    expect(router.get('j')).toBeUndefined();
    expect(router.publish(1, p('j', { progress: 1 }), 102).ok).toBe(true);
    expect(take()).toHaveLength(0);
  });
});

describe('router: late join', () => {
  it('a subscriber joining a stream under way gets the last notification at once', () => {
    const { router, take } = setup();
    router.publish(1, p('j', { progress: 1 }), 0);
    router.publish(1, p('j', { progress: 2, total: 4 }), 1);
    router.subscribe(9, { progressToken: 'j', as: 'mine' }, 2);
    expect(take()).toEqual([
      {
        to: 9,
        n: {
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: 'mine', progress: 2, total: 4 },
        },
      },
    ]);
  });

  it('joining a done stream gets the last value, then the done notice', () => {
    const { router, take } = setup();
    router.publish(1, p('j', { progress: 3 }), 0);
    router.finish(1, d('j', { message: 'fin' }), 1);
    router.subscribe(9, { progressToken: 'j', minIntervalMs: 1000 }, 2);
    expect(take().map((x) => [x.n.method, x.n.params])).toEqual([
      ['notifications/progress', { progressToken: 'j', progress: 3 }],
      ['notifications/progress/done', { progressToken: 'j', status: 'ok', message: 'fin' }],
    ]);
    expect(router.stats().subscriptions).toBe(0);
  });

  it('subscribing before the stream exists waits for it', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'later' }, 0);
    expect(router.get('later')).toMatchObject({ state: 'waiting', subscribers: 1 });
    expect(take()).toHaveLength(0);
    router.publish(3, p('later', { progress: 1 }), 5);
    expect(take()).toHaveLength(1);
    expect(router.get('later')).toMatchObject({ state: 'active', startedAt: 5 });
  });

  it('a repeated subscribe changes options without repeating a value', () => {
    const { router, take } = setup();
    router.publish(1, p('j', { progress: 1 }), 0);
    router.subscribe(1, { progressToken: 'j' }, 0);
    router.subscribe(1, { progressToken: 'j', as: 'x' }, 0);
    expect(take()).toHaveLength(1);
    router.publish(1, p('j', { progress: 2 }), 1);
    expect(take()[0]?.n.params.progressToken).toBe('x');
    expect(router.stats().subscriptions).toBe(1);
  });
});

describe('router: unsubscribe and subscriber removal', () => {
  it('unsubscribe stops delivery and drops what was held', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'j', minIntervalMs: 100 }, 0);
    router.publish(1, p('j', { progress: 1 }), 0);
    router.publish(1, p('j', { progress: 2 }), 10);
    expect(take()).toHaveLength(1);
    expect(router.unsubscribe(1, 'j')).toBe(true);
    expect(router.unsubscribe(1, 'j')).toBe(false);
    router.tick(1000);
    router.publish(1, p('j', { progress: 3 }), 1000);
    expect(take()).toHaveLength(0);
  });

  it('a waiting stream disappears with its last subscriber', () => {
    const { router } = setup();
    router.subscribe(1, { progressToken: 'w' }, 0);
    router.subscribe(2, { progressToken: 'w' }, 0);
    router.removeSubscriber(1);
    expect(router.get('w')).toMatchObject({ state: 'waiting', subscribers: 1 });
    router.removeSubscriber(2);
    expect(router.get('w')).toBeUndefined();
    expect(router.stats()).toMatchObject({ subscriptions: 0, subscribers: 0 });
  });

  it('removing a subscriber drops a pending done notice too', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'j', minIntervalMs: 100 }, 0);
    router.publish(1, p('j', { progress: 1 }), 0);
    router.publish(1, p('j', { progress: 2 }), 1);
    router.finish(1, d('j'), 2);
    take();
    router.removeSubscriber(1);
    router.tick(500);
    expect(take()).toHaveLength(0);
  });
});

describe('router: subscribeAll', () => {
  it('delivers every stream from its first value, those under way from their last', () => {
    const { router, take } = setup();
    router.publish(1, p('running', { progress: 3 }), 0);
    router.finish(1, d('ended'), 0);
    take();
    expect(router.subscribeAll(9, 0, 1)).toEqual({ ok: true });
    // The stream under way: its last value now; the done one is not sent (it is in page()).
    expect(take()).toEqual([
      { to: 9, n: expect.objectContaining({ params: { progressToken: 'running', progress: 3 } }) },
    ]);
    router.publish(2, p('new', { progress: 1, total: 2 }), 2);
    router.publish(2, p('new', { progress: 2, total: 2 }), 3);
    router.finish(2, d('new'), 4);
    router.finish(3, d('done-at-once', { status: 'error' }), 5);
    expect(take().map((x) => [x.to, x.n.method, x.n.params])).toEqual([
      [9, 'notifications/progress', { progressToken: 'new', progress: 1, total: 2 }],
      [9, 'notifications/progress', { progressToken: 'new', progress: 2, total: 2 }],
      [9, 'notifications/progress/done', { progressToken: 'new', status: 'ok' }],
      [9, 'notifications/progress/done', { progressToken: 'done-at-once', status: 'error' }],
    ]);
    // Subscriptions end with their stream; subscribeAll goes on.
    expect(router.stats()).toMatchObject({ subscriptions: 1, subscribers: 1 });
  });

  it('a waiting stream is followed once a worker starts it, and a reused token anew', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'w' }, 0);
    router.subscribeAll(9, 0, 0);
    expect(take()).toEqual([]);
    router.publish(1, p('w', { progress: 1 }), 1);
    expect(take().map((x) => x.to)).toEqual([1, 9]);
    router.finish(1, d('w'), 2);
    take();
    router.tick(2 + DEFAULT_ROUTER_OPTIONS.retentionMs);
    router.publish(1, p('w', { progress: 1 }), 3 + DEFAULT_ROUTER_OPTIONS.retentionMs);
    expect(take().map((x) => [x.to, progressOf(x)])).toEqual([[9, 1]]);
  });

  it('coalesces each stream by its interval; a repeat changes it and sends nothing again', () => {
    const { router, take } = setup();
    router.subscribeAll(9, 100, 0);
    router.publish(1, p('a', { progress: 1 }), 0);
    router.publish(1, p('a', { progress: 2 }), 10);
    expect(take().map(progressOf)).toEqual([1]);
    expect(router.subscribeAll(9, 0, 20)).toEqual({ ok: true });
    router.publish(1, p('a', { progress: 3 }), 30);
    router.publish(1, p('b', { progress: 1 }), 30);
    router.publish(1, p('b', { progress: 2 }), 31);
    // b, new, is not coalesced; a's 3 replaces its held 2, due when a's interval ends.
    expect(take().map((x) => [x.n.params.progressToken, progressOf(x)])).toEqual([
      ['b', 1],
      ['b', 2],
    ]);
    router.tick(100);
    expect(take().map((x) => [x.n.params.progressToken, progressOf(x)])).toEqual([['a', 3]]);
  });

  it('a subscription by token is delivered once, under its own label, and outlives unsubscribeAll', () => {
    const { router, take } = setup();
    router.subscribe(9, { progressToken: 'mine', as: 'label' }, 0);
    router.subscribeAll(9, 0, 0);
    router.publish(1, p('mine', { progress: 1 }), 1);
    router.publish(1, p('other', { progress: 1 }), 1);
    // A stream followed by subscribeAll and then subscribed to by token: one delivery, kept.
    router.subscribe(9, { progressToken: 'other' }, 2);
    expect(take().map((x) => x.n.params.progressToken)).toEqual(['label', 'other']);
    router.unsubscribeAll(9);
    router.publish(1, p('mine', { progress: 2 }), 3);
    router.publish(1, p('other', { progress: 2 }), 3);
    router.publish(1, p('third', { progress: 1 }), 3);
    expect(take().map((x) => x.n.params.progressToken)).toEqual(['label', 'other']);
    expect(router.stats().subscriptions).toBe(2);
  });

  it('unsubscribeAll ends what it made and drops what was held', () => {
    const { router, take } = setup();
    router.subscribeAll(9, 100, 0);
    router.publish(1, p('a', { progress: 1 }), 0);
    router.publish(1, p('a', { progress: 2 }), 10);
    take();
    router.unsubscribeAll(9);
    router.tick(1000);
    router.publish(1, p('a', { progress: 3 }), 1000);
    router.publish(1, p('b', { progress: 1 }), 1000);
    expect(take()).toEqual([]);
    expect(router.stats()).toMatchObject({ subscriptions: 0, subscribers: 0 });
  });

  it('ends with its session', () => {
    const { router, take } = setup();
    router.subscribeAll(9, 0, 0);
    router.publish(1, p('a', { progress: 1 }), 0);
    router.removeSubscriber(9);
    router.publish(1, p('a', { progress: 2 }), 1);
    router.publish(1, p('b', { progress: 1 }), 1);
    expect(take().map(progressOf)).toEqual([1]);
    expect(router.stats()).toMatchObject({ subscriptions: 0, subscribers: 0 });
    // Its place is free again.
    const capped = setup({ maxSubscribeAllSessions: 1 });
    capped.router.subscribeAll(1, 0, 0);
    capped.router.removeSubscriber(1);
    expect(capped.router.subscribeAll(2, 0, 0)).toEqual({ ok: true });
  });

  it('caps the sessions that subscribe to all, and keeps them out of the per-session cap', () => {
    const { router, take } = setup({
      maxSubscribeAllSessions: 2,
      maxSubscriptionsPerSubscriber: 1,
    });
    expect(router.subscribeAll(1, 0, 0)).toEqual({ ok: true });
    expect(router.subscribeAll(2, 0, 0)).toEqual({ ok: true });
    expect(router.subscribeAll(1, 0, 0)).toEqual({ ok: true });
    const refused = router.subscribeAll(3, 0, 0);
    expect(refused).toMatchObject({ ok: false, code: 'too_many_subscriptions' });
    expect(refused.ok ? '' : refused.message).toContain('--max-subscribe-all');
    for (let i = 0; i < 5; i++) router.publish(1, p(`s${i}`, { progress: 1 }), 1);
    expect(take().filter((x) => x.to === 1)).toHaveLength(5);
    router.finish(1, d('s0'), 2);
    // Four followed streams (s0's ended with it), and still room for one subscription by token.
    expect(router.subscribe(1, { progressToken: 'named' }, 2)).toEqual({ ok: true });
    expect(router.subscribe(1, { progressToken: 'second' }, 2)).toMatchObject({
      code: 'too_many_subscriptions',
    });
  });
});

describe('router: coalescing', () => {
  it('sends the first update at once and at most one per interval, always the newest', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 100 }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    for (let i = 2; i <= 50; i++) router.publish(1, p('f', { progress: i }), i);
    expect(take().map((x) => progressOf(x))).toEqual([1]);
    expect(router.nextDeadline()).toBe(100);
    router.tick(99);
    expect(take()).toHaveLength(0);
    router.tick(100);
    expect(take().map((x) => progressOf(x))).toEqual([50]);
    expect(router.stats().coalesced).toBe(48);
  });

  it('trailing flush: the newest value is delivered when the interval ends, never dropped', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 100 }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    router.publish(1, p('f', { progress: 2 }), 50);
    router.tick(150);
    router.publish(1, p('f', { progress: 3 }), 160);
    router.tick(250);
    expect(take().map((x) => progressOf(x))).toEqual([1, 2, 3]);
  });

  it('updates spaced wider than the interval all arrive at once', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 100 }, 0);
    for (let i = 1; i <= 5; i++) {
      router.publish(1, p('f', { progress: i }), i * 150);
      expect(take().map((x) => progressOf(x))).toEqual([i]);
    }
  });

  it('the done notice comes after the final value, at the end of the interval', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 100 }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    router.publish(1, p('f', { progress: 2 }), 10);
    router.finish(1, d('f'), 20);
    expect(take().map((x) => x.n.method)).toEqual(['notifications/progress']);
    router.tick(100);
    expect(take().map((x) => [x.n.method, x.n.params])).toEqual([
      ['notifications/progress', { progressToken: 'f', progress: 2 }],
      ['notifications/progress/done', { progressToken: 'f', status: 'ok' }],
    ]);
  });

  it('minIntervalMs 0 turns coalescing off', () => {
    const { router, take } = setup({ defaultMinIntervalMs: 100 });
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 0 }, 0);
    for (let i = 1; i <= 10; i++) router.publish(1, p('f', { progress: i }), 0);
    expect(take()).toHaveLength(10);
  });

  it('coalesces per subscription: each subscriber has its own interval', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 100 }, 0);
    router.subscribe(2, { progressToken: 'f', minIntervalMs: 0 }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    router.publish(1, p('f', { progress: 2 }), 1);
    expect(take().map((x) => [x.to, progressOf(x)])).toEqual([
      [1, 1],
      [2, 1],
      [2, 2],
    ]);
  });

  it('uses the default interval of the options when the subscriber sets none', () => {
    const { router, take } = setup({ defaultMinIntervalMs: 100 });
    router.subscribe(1, { progressToken: 'f' }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    router.publish(1, p('f', { progress: 2 }), 1);
    expect(take()).toHaveLength(1);
  });

  it('flushAll sends everything held, for a graceful stop', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'f', minIntervalMs: 1000 }, 0);
    router.publish(1, p('f', { progress: 1 }), 0);
    router.publish(1, p('f', { progress: 2 }), 1);
    router.finish(1, d('f'), 2);
    take();
    router.flushAll(3);
    expect(take().map((x) => x.n.method)).toEqual([
      'notifications/progress',
      'notifications/progress/done',
    ]);
  });
});

describe('router: eviction and abandonment', () => {
  it('evicts a done stream after the retention window; the token may then start anew', () => {
    const { router } = setup({ retentionMs: 60_000 });
    router.publish(1, p('j', { progress: 9 }), 0);
    router.finish(1, d('j'), 1000);
    expect(router.nextDeadline()).toBe(61_000);
    router.tick(60_999);
    expect(router.get('j')?.state).toBe('done');
    router.tick(61_000);
    expect(router.get('j')).toBeUndefined();
    expect(router.publish(1, p('j', { progress: 1 }), 61_001).ok).toBe(true);
  });

  it('an active stream idle longer than the TTL ends as abandoned', () => {
    const { router, take } = setup({ streamTtlMs: 1000, retentionMs: 500 });
    router.subscribe(1, { progressToken: 'idle' }, 0);
    router.publish(1, p('idle', { progress: 1 }), 0);
    router.publish(1, p('busy', { progress: 1 }), 0);
    router.publish(1, p('busy', { progress: 2 }), 900);
    take();
    router.tick(1000);
    expect(take().map((x) => [x.to, x.n.params])).toEqual([
      [
        1,
        {
          progressToken: 'idle',
          status: 'abandoned',
          message: 'no update for 1 s (the stream TTL)',
        },
      ],
    ]);
    expect(router.get('busy')?.state).toBe('active');
    expect(router.nextDeadline()).toBe(1500);
    router.tick(1500);
    expect(router.get('idle')).toBeUndefined();
    router.tick(1900);
    expect(router.get('busy')?.state).toBe('done');
  });

  it('a stream whose publishers all disconnect ends as abandoned after the grace period', () => {
    const { router, take } = setup({ abandonGraceMs: 30_000 });
    router.subscribe(1, { progressToken: 'w' }, 0);
    router.publish(5, p('w', { progress: 1 }), 0);
    take();
    router.removeConnection(5, 10);
    expect(router.nextDeadline()).toBe(30_010);
    router.tick(30_009);
    expect(take()).toHaveLength(0);
    router.tick(30_010);
    expect(take()[0]?.n).toMatchObject({
      method: 'notifications/progress/done',
      params: { progressToken: 'w', status: 'abandoned' },
    });
  });

  it('a publisher that comes back within the grace period keeps the stream alive', () => {
    const { router, take } = setup({ abandonGraceMs: 30_000 });
    router.subscribe(1, { progressToken: 'w' }, 0);
    router.publish(5, p('w', { progress: 1 }), 0);
    router.removeConnection(5, 10);
    router.publish(6, p('w', { progress: 2 }), 20_000);
    router.tick(40_000);
    expect(take().map((x) => x.n.method)).toEqual([
      'notifications/progress',
      'notifications/progress',
    ]);
    expect(router.get('w')?.state).toBe('active');
  });

  it('a stream with another live publisher is not orphaned', () => {
    const { router } = setup({ abandonGraceMs: 10 });
    router.publish(5, p('w', { progress: 1 }), 0);
    router.publish(6, p('w', { progress: 2 }), 0);
    router.removeConnection(5, 0);
    router.tick(1000);
    expect(router.get('w')?.state).toBe('active');
  });
});

describe('router: caps', () => {
  it('a full table evicts the oldest done stream first', () => {
    const { router } = setup({ maxStreams: 2 });
    router.finish(1, d('a'), 0);
    router.publish(1, p('b', { progress: 1 }), 0);
    expect(router.publish(1, p('c', { progress: 1 }), 0).ok).toBe(true);
    expect(router.get('a')).toBeUndefined();
    const refused = router.publish(1, p('d', { progress: 1 }), 0);
    expect(refused).toMatchObject({ ok: false, code: 'too_many_streams' });
    if (!refused.ok) expect(refused.message).toContain('--max-streams');
    // Existing streams keep working at the cap.
    expect(router.publish(2, p('b', { progress: 2 }), 0).ok).toBe(true);
  });

  it('caps the streams that subscribers wait on apart from the live ones', () => {
    const { router } = setup({ maxStreams: 2 });
    expect(router.subscribe(1, { progressToken: 'w1' }, 0).ok).toBe(true);
    expect(router.subscribe(2, { progressToken: 'w2' }, 0).ok).toBe(true);
    const refused = router.subscribe(1, { progressToken: 'w3' }, 0);
    expect(refused).toMatchObject({ ok: false, code: 'too_many_streams' });
    if (!refused.ok) expect(refused.message).toContain('--max-streams');
    // A stream that exists, waiting or live, can still be joined; the live cap is separate.
    expect(router.subscribe(3, { progressToken: 'w1' }, 0).ok).toBe(true);
    expect(router.publish(1, p('live', { progress: 1 }), 0).ok).toBe(true);
    expect(router.subscribe(1, { progressToken: 'live' }, 0).ok).toBe(true);
    // Once a waiting stream starts, it no longer counts as waiting.
    expect(router.publish(1, p('w1', { progress: 1 }), 0).ok).toBe(true);
    expect(router.subscribe(1, { progressToken: 'w3' }, 0).ok).toBe(true);
  });

  it('caps the active streams of one connection without hurting another', () => {
    const { router } = setup({ maxStreamsPerConnection: 2 });
    expect(router.publish(1, p('a'), 0).ok).toBe(true);
    expect(router.publish(1, p('b'), 0).ok).toBe(true);
    const refused = router.publish(1, p('c'), 0);
    expect(refused).toMatchObject({ ok: false, code: 'too_many_streams' });
    if (!refused.ok) expect(refused.message).toContain('per-connection');
    expect(router.publish(2, p('c'), 0).ok).toBe(true);
    router.finish(1, d('a'), 0);
    expect(router.publish(1, p('d'), 0).ok).toBe(true);
  });

  it('caps the subscriptions of one session', () => {
    const { router } = setup({ maxSubscriptionsPerSubscriber: 2 });
    expect(router.subscribe(1, { progressToken: 'a' }, 0).ok).toBe(true);
    expect(router.subscribe(1, { progressToken: 'b' }, 0).ok).toBe(true);
    expect(router.subscribe(1, { progressToken: 'c' }, 0)).toMatchObject({
      ok: false,
      code: 'too_many_subscriptions',
    });
    expect(router.subscribe(2, { progressToken: 'c' }, 0).ok).toBe(true);
  });
});

describe('router: claims', () => {
  it('a claimed token names its claimants before any progress, and after', () => {
    const { router } = setup();
    expect(router.claim(4, 'job').ok).toBe(true);
    expect(router.claim(4, 'job').ok).toBe(true);
    expect(router.cancelTargets('job')).toEqual([4]);
    router.publish(5, p('job'), 0);
    expect(router.cancelTargets('job').sort()).toEqual([4, 5]);
    expect(router.get('job')?.state).toBe('active');
  });

  it('a claim creates no stream and ends with its connection', () => {
    const { router } = setup();
    router.claim(4, 'job');
    expect(router.list()).toEqual([]);
    router.removeConnection(4, 0);
    expect(router.cancelTargets('job')).toEqual([]);
  });

  it('a done stream has no one left to cancel', () => {
    const { router } = setup();
    router.claim(4, 'job');
    router.finish(5, d('job'), 0);
    expect(router.cancelTargets('job')).toEqual([]);
  });

  it('a live claimant keeps a stream whose publishers left from being abandoned', () => {
    const { router, take } = setup({ abandonGraceMs: 100 });
    router.subscribe(9, { progressToken: 'loop' }, 0);
    router.claim(4, 'loop');
    // One short connection per frame, as `mcp-progress publish` in a shell loop under `run`.
    router.publish(5, p('loop'), 0);
    router.removeConnection(5, 1);
    router.tick(1000);
    router.publish(6, p('loop'), 1000);
    router.removeConnection(6, 1001);
    router.tick(5000);
    expect(router.get('loop')?.state).toBe('active');
    // The claimant goes: now the grace period runs.
    router.removeConnection(4, 5000);
    expect(router.nextDeadline()).toBe(5100);
    router.tick(5100);
    expect(take().at(-1)?.n.params).toMatchObject({ status: 'abandoned' });
  });

  it('a claimant that leaves before publishing abandons the stream its subscribers wait on', () => {
    const { router, take } = setup({ abandonGraceMs: 100, retentionMs: 1000 });
    router.subscribe(9, { progressToken: 'early', as: 1 }, 0);
    router.claim(4, 'early');
    router.removeConnection(4, 10);
    expect(router.nextDeadline()).toBe(110);
    router.tick(109);
    expect(take()).toEqual([]);
    router.tick(110);
    expect(take().map((x) => [x.to, x.n.method, x.n.params])).toEqual([
      [
        9,
        'notifications/progress/done',
        expect.objectContaining({ progressToken: 1, status: 'abandoned' }),
      ],
    ]);
    expect(router.stats().streams).toEqual({ waiting: 0, active: 0, done: 1 });
    router.tick(1110);
    expect(router.stats().streams).toEqual({ waiting: 0, active: 0, done: 0 });
  });

  it('a waiting stream left by its claimant and then by its subscribers is forgotten', () => {
    const { router, take } = setup({ abandonGraceMs: 100 });
    router.subscribe(9, { progressToken: 'gone' }, 0);
    router.claim(4, 'gone');
    router.removeConnection(4, 0);
    router.unsubscribe(9, 'gone');
    expect(router.nextDeadline()).toBe(Number.POSITIVE_INFINITY);
    router.tick(1000);
    expect(take()).toEqual([]);
    expect(router.list()).toEqual([]);
  });

  it('a worker that publishes after its claim ended keeps the stream', () => {
    const { router } = setup({ abandonGraceMs: 100 });
    router.subscribe(9, { progressToken: 'late' }, 0);
    router.claim(4, 'late');
    router.removeConnection(4, 0);
    router.publish(5, p('late'), 50);
    router.tick(1000);
    expect(router.get('late')?.state).toBe('active');
  });

  it('a claim that comes back within the grace period keeps the stream', () => {
    const { router } = setup({ abandonGraceMs: 100 });
    router.publish(5, p('job'), 0);
    router.removeConnection(5, 0);
    router.claim(7, 'job');
    router.tick(1000);
    expect(router.get('job')?.state).toBe('active');
  });

  it('caps the tokens claimed in all, and counts claims', () => {
    const { router } = setup({ maxStreams: 2 });
    expect(router.claim(1, 'a').ok).toBe(true);
    expect(router.claim(2, 'b').ok).toBe(true);
    const refused = router.claim(3, 'c');
    expect(refused).toMatchObject({ ok: false, code: 'too_many_streams' });
    if (!refused.ok) expect(refused.message).toContain('--max-streams');
    // A token already claimed can be claimed by another connection too.
    expect(router.claim(3, 'a').ok).toBe(true);
    expect(router.stats().claims).toBe(3);
    router.removeConnection(2, 0);
    expect(router.stats().claims).toBe(2);
    expect(router.claim(3, 'c').ok).toBe(true);
  });

  it('caps the claims of one connection', () => {
    const { router } = setup({ maxStreamsPerConnection: 2 });
    expect(router.claim(1, 'a').ok).toBe(true);
    expect(router.claim(1, 'b').ok).toBe(true);
    expect(router.claim(1, 'c')).toMatchObject({ ok: false, code: 'too_many_streams' });
    expect(router.claim(2, 'c').ok).toBe(true);
  });
});

describe('router: cancel targets', () => {
  it('names the live connections that published an active stream', () => {
    const { router } = setup();
    router.publish(1, p('j'), 0);
    router.publish(2, p('j'), 0);
    router.publish(3, p('other'), 0);
    expect(router.cancelTargets('j').sort()).toEqual([1, 2]);
    router.removeConnection(2, 0);
    expect(router.cancelTargets('j')).toEqual([1]);
    router.finish(1, d('j'), 0);
    expect(router.cancelTargets('j')).toEqual([]);
    expect(router.cancelTargets('unknown')).toEqual([]);
  });
});

describe('router: dones replayed from the journal', () => {
  const restored = {
    progressToken: 'render',
    status: 'ok' as const,
    message: 'rendered',
    last: { progress: 2, total: 2, message: 'frame 2' },
    startedAt: 500,
    at: 1000,
  };

  it('a late subscriber gets the journaled last value, then the done', () => {
    const { router, take } = setup();
    router.restore(restored);
    expect(router.subscribe(1, { progressToken: 'render' }, 5000)).toEqual({ ok: true });
    router.tick(5000);
    expect(take().map((x) => x.n)).toEqual([
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: 'render', progress: 2, total: 2, message: 'frame 2' },
      },
      {
        jsonrpc: '2.0',
        method: 'notifications/progress/done',
        params: { progressToken: 'render', status: 'ok', message: 'rendered' },
      },
    ]);
    expect(router.get('render')).toMatchObject({
      state: 'done',
      last: { progress: 2, total: 2 },
      startedAt: 500,
      updatedAt: 1000,
    });
    // The stream is done: a frame for it is refused, as before the restart.
    expect(router.publish(2, p('render', { progress: 3 }), 5000)).toMatchObject({
      ok: false,
      code: 'stream_closed',
    });
  });

  it('its retention counts from the done, not from the restart', () => {
    const { router } = setup({ retentionMs: 60_000 });
    router.restore(restored);
    expect(router.nextDeadline()).toBe(1000 + 60_000);
    router.tick(1000 + 59_999);
    expect(router.get('render')).toBeDefined();
    router.tick(1000 + 60_000);
    expect(router.get('render')).toBeUndefined();
  });

  it('a later line for the same token replaces the earlier one', () => {
    const { router } = setup();
    router.restore(restored);
    router.restore({ ...restored, status: 'error', last: undefined, startedAt: 2000, at: 3000 });
    expect(router.get('render')).toMatchObject({ status: 'error', startedAt: 2000 });
    expect(router.get('render')?.last).toBeUndefined();
    expect(router.stats().streams.done).toBe(1);
  });
});

describe('router: the journal commit of a done', () => {
  it('a done the commit refuses is not applied: the stream stays active with its last value', () => {
    const { router, take } = setup();
    router.subscribe(1, { progressToken: 'job' }, 0);
    router.publish(7, p('job', { progress: 1, total: 2 }), 10);
    take();
    const seen: unknown[] = [];
    const refusal = { ok: false as const, code: 'journal_failed' as const, message: 'disk full' };
    expect(
      router.finish(7, d('job'), 20, (ending) => {
        seen.push(ending);
        return refusal;
      }),
    ).toBe(refusal);
    expect(seen).toEqual([
      { last: { progressToken: 'job', progress: 1, total: 2 }, startedAt: 10 },
    ]);
    expect(router.get('job')).toMatchObject({ state: 'active', last: { progress: 1 } });
    expect(take()).toEqual([]);
    // The worker sends it again once the journal takes it.
    expect(router.finish(7, d('job'), 30, () => undefined)).toEqual({ ok: true });
    expect(router.get('job')).toMatchObject({ state: 'done', updatedAt: 30 });
  });

  it('a refused done of a token never seen leaves no stream behind', () => {
    const { router } = setup();
    const refusal = { ok: false as const, code: 'journal_failed' as const, message: 'EROFS' };
    expect(router.finish(7, d('new'), 20, () => refusal)).toBe(refusal);
    expect(router.get('new')).toBeUndefined();
    expect(router.stats().streams).toEqual({ waiting: 0, active: 0, done: 0 });
  });
});
