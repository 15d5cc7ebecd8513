import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WritePacer } from '../../src/daemon/write-pacer.js';

const LINGER = 4;

/**
 * Writes at given times (ms of a fake clock), each followed by the end of its turn; returns, for
 * each write, when it was flushed. Writes at the same time are one turn.
 */
async function flushTimes(times: number[], lingerMs = LINGER): Promise<number[]> {
  const flushedAt: number[] = new Array(times.length).fill(Number.NaN);
  let pending: number[] = [];
  const pacer = new WritePacer(
    lingerMs,
    () => {
      for (const index of pending) flushedAt[index] = Date.now();
      pending = [];
    },
    () => Date.now(),
  );
  const start = Date.now();
  for (let index = 0; index < times.length; index++) {
    const at = start + (times[index] as number);
    if (at > Date.now()) await vi.advanceTimersByTimeAsync(at - Date.now());
    pending.push(index);
    pacer.wrote();
    // The end of the turn: nextTick callbacks run (fake timers leave nextTick real).
    if (times[index + 1] !== times[index])
      await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await vi.advanceTimersByTimeAsync(3 * lingerMs);
  return flushedAt.map((at) => at - start);
}

describe('WritePacer', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a lone write goes out at the end of its turn', async () => {
    expect(await flushTimes([0])).toEqual([0]);
  });

  it('writes of one turn go out together at its end', async () => {
    expect(await flushTimes([0, 0, 0])).toEqual([0, 0, 0]);
  });

  it('writes a millisecond apart: held until one comes lingerMs after the last flush, which takes them along', async () => {
    expect(await flushTimes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])).toEqual([
      0, 4, 4, 4, 4, 8, 8, 8, 8, 16,
    ]);
  });

  it('the last of a run is flushed 2 x lingerMs after the last flush at the latest', async () => {
    expect(await flushTimes([0, 1])).toEqual([0, 2 * LINGER]);
    expect(await flushTimes([0, 5, 6])).toEqual([0, 5, 2 * LINGER + 5]);
  });

  it('writes lingerMs or more apart are never held', async () => {
    expect(await flushTimes([0, 4, 8, 20, 24])).toEqual([0, 4, 8, 20, 24]);
  });

  it('lingerMs 0: every turn flushes at its end', async () => {
    expect(await flushTimes([0, 1, 1, 2, 3], 0)).toEqual([0, 1, 1, 2, 3]);
  });

  it('flushSoon sends what is held at the end of the turn (a reply must not wait)', async () => {
    let flushes = 0;
    const pacer = new WritePacer(
      LINGER,
      () => flushes++,
      () => Date.now(),
    );
    pacer.wrote();
    await new Promise<void>((resolve) => setImmediate(resolve));
    await vi.advanceTimersByTimeAsync(1);
    pacer.wrote();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(flushes).toBe(1);
    pacer.flushSoon();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(flushes).toBe(2);
    // The held write's timer was cleared with it: no flush of nothing later.
    await vi.advanceTimersByTimeAsync(3 * LINGER);
    expect(flushes).toBe(2);
  });

  it('any times: every write is flushed, in order, at most 2 x lingerMs after it; one lingerMs after the last flush is not held', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 1, maxLength: 40 }),
        async (gaps) => {
          const times: number[] = [];
          let at = 0;
          for (const gap of gaps) {
            at += gap;
            times.push(at);
          }
          const flushed = await flushTimes(times);
          for (let index = 0; index < times.length; index++) {
            const time = times[index] as number;
            const when = flushed[index] as number;
            expect(when).toBeGreaterThanOrEqual(time);
            expect(when - time).toBeLessThanOrEqual(2 * LINGER);
            if (index > 0) expect(when).toBeGreaterThanOrEqual(flushed[index - 1] as number);
            // The last flush of an earlier write decides whether this one is held.
            let lastFlush = Number.NEGATIVE_INFINITY;
            for (const earlier of flushed.slice(0, index))
              if (earlier <= time) lastFlush = Math.max(lastFlush, earlier);
            if (time - lastFlush >= LINGER) expect(when).toBe(time);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
