/**
 * When the daemon gives memory back (shared/collection.ts): after a whole idle period with no
 * activity, and only when the heap grew since the last time. And when `mcp` holds V8's memory
 * reducer off: from the first update until a quiet period after the last. Fake timers drive the
 * real classes; the heap is a number the test sets, the V8 flags a list the hold writes to.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  choosesOwnReduction,
  choosesOwnYoungGeneration,
  holdReducerWhileProgressFlows,
  IDLE_COLLECTION_FLAGS,
  IdleCollection,
  idleCollection,
  REDUCER_HOLD_FLAGS,
  ReducerHold,
} from '../../src/shared/collection.js';
import { onEachProgress, progressFlows } from '../../src/shared/tiering.js';

const IDLE_MS = 8000;
const GROWTH = 4;

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Calls `activity` every `everyMs` of fake time until `untilMs`. */
function everyUntil(untilMs: number, everyMs: number, activity: () => void): void {
  while (Date.now() + everyMs <= untilMs) {
    vi.advanceTimersByTime(everyMs);
    activity();
  }
}

describe('IdleCollection', () => {
  let heap: number;
  let collections: Array<{ at: number; before: number; after: number }>;
  let idle: IdleCollection;

  beforeEach(() => {
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
  afterEach(() => idle.stop());

  const busy = (untilMs: number, everyMs: number) =>
    everyUntil(untilMs, everyMs, () => idle.activity());

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
    // The daemon's young-generation cap gives way to the user's own size, from either place.
    expect(choosesOwnYoungGeneration(['--max-semi-space-size=8'], '')).toBe(true);
    expect(choosesOwnYoungGeneration([], '--min-semi-space-size=2')).toBe(true);
    expect(choosesOwnYoungGeneration(['--expose-gc'], '--single-threaded-gc')).toBe(false);
  });
});

describe('ReducerHold', () => {
  const QUIET_MS = 8000;
  let flags: Array<{ at: number; flag: string }>;
  let hold: ReducerHold;
  const { hold: HOLD, release: RELEASE } = REDUCER_HOLD_FLAGS;

  beforeEach(() => {
    flags = [];
    hold = new ReducerHold({
      quietMs: QUIET_MS,
      setFlag: (flag) => flags.push({ at: Date.now(), flag }),
    });
  });
  afterEach(() => hold.stop());

  const flowing = (untilMs: number, everyMs: number) =>
    everyUntil(untilMs, everyMs, () => hold.activity());

  it('sets nothing before progress flows: start-up is not a flow', () => {
    vi.advanceTimersByTime(10 * QUIET_MS);
    expect(flags).toEqual([]);
    expect(hold.held).toBe(false);
  });

  it('holds at the first update, once, and lets go a whole quiet period after the last', () => {
    flowing(60_000, 1);
    expect(flags).toEqual([{ at: 1, flag: HOLD }]);
    expect(hold.held).toBe(true);
    vi.advanceTimersByTime(2 * QUIET_MS);
    expect(flags).toHaveLength(2);
    expect(flags[1]?.flag).toBe(RELEASE);
    expect(flags[1]?.at).toBeGreaterThanOrEqual(60_000 + QUIET_MS);
    expect(flags[1]?.at).toBeLessThanOrEqual(60_000 + 2 * QUIET_MS);
    expect(hold.held).toBe(false);
  });

  it('keeps holding through gaps shorter than the quiet period, and holds again after a release', () => {
    flowing(40_000, QUIET_MS / 2);
    expect(flags.map(({ flag }) => flag)).toEqual([HOLD]);
    vi.advanceTimersByTime(2 * QUIET_MS);
    flowing(Date.now() + 1000, 10);
    expect(flags.map(({ flag }) => flag)).toEqual([HOLD, RELEASE, HOLD]);
  });

  it('lets go at once when stopped, and holds no more', () => {
    hold.activity();
    hold.stop();
    hold.activity();
    vi.advanceTimersByTime(10 * QUIET_MS);
    expect(flags.map(({ flag }) => flag)).toEqual([HOLD, RELEASE]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('holdReducerWhileProgressFlows', () => {
  let unlisten = (): void => {};
  afterEach(() => unlisten());

  it("is there unless the process runs without V8's reducer or the user chose flags for it", () => {
    const options = { quietMs: 8000 };
    const made = holdReducerWhileProgressFlows(options, [], '');
    expect(made).toBeInstanceOf(ReducerHold);
    made?.stop();
    // The daemon (started without it), and a user's own flags, by either spelling, stand.
    expect(holdReducerWhileProgressFlows(options, ['--no-memory-reducer'], '')).toBeUndefined();
    expect(holdReducerWhileProgressFlows(options, [], '--no-incremental_marking')).toBeUndefined();
    expect(holdReducerWhileProgressFlows(options, ['--incremental-marking'], '')).toBeUndefined();
    const alsoMade = holdReducerWhileProgressFlows(options, ['--single-threaded-gc'], '');
    expect(alsoMade).toBeInstanceOf(ReducerHold);
    alsoMade?.stop();
  });

  it('hears each update until stopped, and stopping takes away only its own listener', () => {
    const changes: boolean[] = [];
    const made = holdReducerWhileProgressFlows(
      { quietMs: 8000, changed: (held) => changes.push(held) },
      [],
      '',
    );
    // A zero window: the tier-up that the first update starts ends at the next timer turn.
    progressFlows(0);
    vi.advanceTimersByTime(1);
    expect(changes).toEqual([true]);
    const later: number[] = [];
    unlisten = onEachProgress(() => later.push(Date.now()));
    made?.stop();
    progressFlows(0);
    expect(changes).toEqual([true, false]);
    expect(later).toHaveLength(1);
  });
});
