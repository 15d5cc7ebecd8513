/**
 * When the daemon gives memory back (shared/collection.ts): after a whole idle period with no
 * activity, and only when the heap grew since the last time. Fake timers drive the real class;
 * the heap is a number the test sets.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  choosesOwnReduction,
  IDLE_COLLECTION_FLAGS,
  IdleCollection,
  idleCollection,
} from '../../src/shared/collection.js';

const IDLE_MS = 8000;
const GROWTH = 4;

let heap: number;
let collections: Array<{ at: number; before: number; after: number }>;
let idle: IdleCollection;

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
  heap = 20;
  collections = [];
  idle = new IdleCollection({
    idleMs: IDLE_MS,
    minGrowthBytes: GROWTH,
    heapBytes: () => heap,
    // What a collection gives back: the heap shrinks to 12.
    collect: () => {
      heap = 12;
    },
    collected: (before, after) => collections.push({ at: Date.now(), before, after }),
  });
});
afterEach(() => {
  idle.stop();
  vi.useRealTimers();
});

/** Activity every `everyMs` until `untilMs` (fake time). */
function busy(untilMs: number, everyMs: number): void {
  while (Date.now() + everyMs <= untilMs) {
    vi.advanceTimersByTime(everyMs);
    idle.activity();
  }
}

describe('IdleCollection', () => {
  it('collects once start-up has been followed by a whole idle period, and then not again', () => {
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(collections).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(collections).toEqual([{ at: IDLE_MS, before: 20, after: 12 }]);
    vi.advanceTimersByTime(10 * IDLE_MS);
    expect(collections).toHaveLength(1);
  });

  it('never collects while activity goes on, and collects one idle period after it stops', () => {
    busy(60_000, 1);
    expect(collections).toEqual([]);
    // The last activity was at 60 s: the period it re-armed ends 8-16 s later.
    vi.advanceTimersByTime(2 * IDLE_MS);
    expect(collections).toHaveLength(1);
    const at = collections[0]?.at ?? 0;
    expect(at).toBeGreaterThanOrEqual(60_000 + IDLE_MS);
    expect(at).toBeLessThanOrEqual(60_000 + 2 * IDLE_MS);
  });

  it('collects after later work only when the heap grew by the threshold since the last time', () => {
    vi.advanceTimersByTime(IDLE_MS);
    expect(collections).toHaveLength(1);
    // A slow job: activity every 10 s (longer than the idle period), the heap grows by 3.
    heap = 15;
    busy(Date.now() + 60_000, 10_000);
    vi.advanceTimersByTime(2 * IDLE_MS);
    expect(collections).toHaveLength(1);
    // A busy spell that grew the heap by 4: one more, once it is quiet.
    heap = 16;
    busy(Date.now() + 5000, 1);
    expect(collections).toHaveLength(1);
    vi.advanceTimersByTime(2 * IDLE_MS);
    expect(collections).toHaveLength(2);
    expect(collections[1]).toMatchObject({ before: 16, after: 12 });
  });

  it('does nothing once stopped', () => {
    idle.stop();
    idle.activity();
    vi.advanceTimersByTime(10 * IDLE_MS);
    expect(collections).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('idleCollection', () => {
  it("is there only in a process started with the flags, and knows the user's own", () => {
    // This test process has neither V8's reducer off nor gc: V8's reducer does the work, and
    // the flags named on a command line are not enough without a gc to call.
    expect(globalThis.gc).toBeUndefined();
    expect(idleCollection({ idleMs: IDLE_MS, minGrowthBytes: GROWTH })).toBeUndefined();
    expect(
      idleCollection({ idleMs: IDLE_MS, minGrowthBytes: GROWTH }, [...IDLE_COLLECTION_FLAGS]),
    ).toBeUndefined();
    expect(choosesOwnReduction(['--gc-memory-reducer-start-delay-ms=1000'], '')).toBe(true);
    expect(choosesOwnReduction([], '--expose_gc')).toBe(true);
    expect(choosesOwnReduction([], '--no-memory-reducer')).toBe(true);
    expect(choosesOwnReduction(['--max-semi-space-size=4'], '--single-threaded-gc')).toBe(false);
  });
});
