/**
 * Property test: whatever the interleaving of frames, subscriptions and clock
 * steps, what each subscriber sees strictly increases, nothing follows done,
 * and once the intervals have run out each subscriber's last value is the
 * stream's newest. The router is checked against a small model of its rules.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import type { Notification, ProgressToken } from '../../src/protocol/index.js';

const TOKENS: ProgressToken[] = ['a', 'b', 7, '7'];

type Op =
  | { kind: 'publish'; conn: number; token: number; progress: number | undefined }
  | { kind: 'finish'; conn: number; token: number }
  | { kind: 'subscribe'; sub: number; token: number; interval: number; as: boolean }
  | { kind: 'unsubscribe'; sub: number; token: number }
  | { kind: 'dropSubscriber'; sub: number }
  | { kind: 'dropConnection'; conn: number }
  | { kind: 'subscribeAll'; interval: number }
  | { kind: 'unsubscribeAll' }
  | { kind: 'advance'; ms: number };

/** The subscriber that follows every stream (subscribeAll), and never subscribes by token. */
const ALL = 4;

/** Connection and subscriber numbers are 1 to 3; tokens index TOKENS. */
const oneOfThree = fc.integer({ min: 1, max: 3 });
const anyToken = fc.integer({ min: 0, max: TOKENS.length - 1 });

type OpOf<K extends Op['kind']> = Extract<Op, { kind: K }>;

/** An operation of one kind, drawn with that weight, its other fields drawn from theirs. */
function weighted<K extends Op['kind']>(
  weight: number,
  kind: K,
  fields: { [P in Exclude<keyof OpOf<K>, 'kind'>]: fc.Arbitrary<OpOf<K>[P]> },
): { weight: number; arbitrary: fc.Arbitrary<Op> } {
  // The fields are checked against Op above; fc.record cannot see that kind plus them is an OpOf<K>.
  return {
    weight,
    arbitrary: fc.record({ kind: fc.constant(kind), ...fields }) as unknown as fc.Arbitrary<Op>,
  };
}

const op: fc.Arbitrary<Op> = fc.oneof(
  weighted(6, 'publish', {
    conn: oneOfThree,
    token: anyToken,
    progress: fc.option(fc.integer({ min: -5, max: 400 }), { nil: undefined, freq: 2 }),
  }),
  weighted(1, 'finish', { conn: oneOfThree, token: anyToken }),
  weighted(3, 'subscribe', {
    sub: oneOfThree,
    token: anyToken,
    interval: fc.constantFrom(0, 10, 100),
    as: fc.boolean(),
  }),
  weighted(1, 'unsubscribe', { sub: oneOfThree, token: anyToken }),
  weighted(1, 'dropSubscriber', { sub: oneOfThree }),
  weighted(1, 'dropConnection', { conn: oneOfThree }),
  weighted(1, 'subscribeAll', { interval: fc.constantFrom(0, 10, 100) }),
  weighted(1, 'unsubscribeAll', {}),
  weighted(3, 'advance', { ms: fc.integer({ min: 0, max: 80 }) }),
);

interface ModelStream {
  last: number | undefined;
  done: boolean;
  /** The step at which it ended. */
  doneAt?: number;
}

interface Watch {
  token: ProgressToken;
  label: ProgressToken;
  seen: number[];
  ended: boolean;
}

function run(ops: Op[]): number {
  const watches = new Map<string, Watch>();
  const key = (sub: number, token: ProgressToken) => `${sub}|${typeof token}|${token}`;
  let delivered = 0;
  const router = new Router(
    // Long grace, TTL and retention: the property is about ordering, not expiry.
    { ...DEFAULT_ROUTER_OPTIONS, abandonGraceMs: 1e9, streamTtlMs: 1e9, retentionMs: 1e9 },
    (sub: number, n: Notification) => {
      delivered++;
      const token = findToken(sub, n);
      if (sub === ALL) {
        expect(allSince, 'nothing reaches a session after unsubscribeAll').toBeDefined();
        // Its subscriptions are the router's own: one starts with each stream it delivers.
        if (!watches.has(key(sub, token)))
          watches.set(key(sub, token), { token, label: token, seen: [], ended: false });
      }
      const watch = watches.get(key(sub, token));
      if (watch === undefined)
        throw new Error(`delivery to ${sub} for ${String(token)} without a subscription`);
      expect(watch.ended, 'nothing follows done').toBe(false);
      expect(n.params.progressToken).toBe(watch.label);
      if (n.method === 'notifications/progress/done') {
        watch.ended = true;
        return;
      }
      const previous = watch.seen.at(-1);
      if (previous !== undefined) expect(n.params.progress).toBeGreaterThan(previous);
      watch.seen.push(n.params.progress);
    },
  );
  // Each subscriber's label maps back to the token it watches.
  const labels = new Map<string, ProgressToken>();
  const findToken = (sub: number, n: Notification): ProgressToken =>
    labels.get(`${sub}|${typeof n.params.progressToken}|${n.params.progressToken}`) ??
    n.params.progressToken;

  const model = new Map<ProgressToken, ModelStream>();
  let now = 0;
  /** The step since which ALL follows every stream, while it does. */
  let allSince: number | undefined;
  for (const [index, step] of ops.entries()) {
    switch (step.kind) {
      case 'publish': {
        const token = TOKENS[step.token] as ProgressToken;
        const m = model.get(token) ?? { last: undefined, done: false };
        const progress = step.progress ?? (m.last ?? 0) + 1;
        const expected = m.done
          ? 'stream_closed'
          : m.last !== undefined && progress <= m.last
            ? 'non_monotonic'
            : 'ok';
        const frame =
          step.progress === undefined
            ? { v: 1 as const, progressToken: token }
            : { v: 1 as const, progressToken: token, progress: step.progress };
        const outcome = router.publish(step.conn, frame, now);
        expect(outcome.ok ? 'ok' : outcome.code).toBe(expected);
        if (outcome.ok) model.set(token, { last: progress, done: false });
        break;
      }
      case 'finish': {
        const token = TOKENS[step.token] as ProgressToken;
        const m = model.get(token) ?? { last: undefined, done: false };
        const outcome = router.finish(step.conn, { v: 1, progressToken: token }, now);
        expect(outcome.ok).toBe(!m.done);
        model.set(token, { last: m.last, done: true, doneAt: m.doneAt ?? index });
        break;
      }
      case 'subscribe': {
        const token = TOKENS[step.token] as ProgressToken;
        const k = key(step.sub, token);
        const existing = watches.get(k);
        if (existing !== undefined && !existing.ended) break; // a repeat would only change options
        // Give each subscriber a label of its own so that deliveries map back unambiguously.
        const label: ProgressToken = step.as
          ? `as:${step.sub}:${String(token)}:${typeof token}`
          : token;
        labels.set(`${step.sub}|${typeof label}|${label}`, token);
        watches.set(k, { token, label, seen: [], ended: false });
        const outcome = router.subscribe(
          step.sub,
          { progressToken: token, as: label, minIntervalMs: step.interval },
          now,
        );
        expect(outcome.ok).toBe(true);
        break;
      }
      case 'unsubscribe': {
        const token = TOKENS[step.token] as ProgressToken;
        router.unsubscribe(step.sub, token);
        watches.delete(key(step.sub, token));
        break;
      }
      case 'dropSubscriber':
        router.removeSubscriber(step.sub);
        for (const k of [...watches.keys()]) if (k.startsWith(`${step.sub}|`)) watches.delete(k);
        break;
      case 'dropConnection':
        router.removeConnection(step.conn, now);
        break;
      case 'subscribeAll':
        allSince ??= index;
        expect(router.subscribeAll(ALL, step.interval, now)).toEqual({ ok: true });
        break;
      case 'unsubscribeAll':
        router.unsubscribeAll(ALL);
        allSince = undefined;
        // Ended ones stay: a done stream is never sent again.
        for (const [k, watch] of watches)
          if (k.startsWith(`${ALL}|`) && !watch.ended) watches.delete(k);
        break;
      case 'advance':
        now += step.ms;
        router.tick(now);
        break;
    }
  }
  // Let every interval run out: each live watch must end with the newest value.
  now += 1000;
  router.tick(now);
  for (const watch of watches.values()) {
    const m = model.get(watch.token);
    if (m?.last !== undefined && watch.seen.length > 0) expect(watch.seen.at(-1)).toBe(m.last);
    if (m?.last !== undefined && !watch.ended) expect(watch.seen.at(-1)).toBe(m.last);
    if (m?.done) expect(watch.ended).toBe(true);
  }
  // ALL follows every stream that was not done when it subscribed, from its newest value then.
  if (allSince !== undefined) {
    for (const [token, m] of model) {
      if (m.doneAt !== undefined && m.doneAt < allSince) continue;
      const watch = watches.get(key(ALL, token));
      expect(watch, `ALL follows ${String(token)}`).toBeDefined();
      if (m.last !== undefined) expect(watch?.seen.at(-1)).toBe(m.last);
      expect(watch?.ended).toBe(m.done);
    }
  }
  return delivered;
}

describe('router properties', () => {
  it('each subscriber sees strictly increasing progress, nothing after done, and ends with the newest value', () => {
    let observed = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 150 }), (ops) => {
        observed += run(ops);
      }),
      { numRuns: 1000 },
    );
    // The generator must reach the interesting cases, or the property proves nothing.
    expect(observed).toBeGreaterThan(2000);
  });
});
