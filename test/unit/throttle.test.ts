/** The publishers' local throttle, on a fake clock: first at once, newest at each interval's end, flush before done. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Throttle } from '../../src/client/throttle.js';

describe('Throttle', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function recorder(intervalMs: number) {
    let value = 0;
    const sent: number[] = [];
    const throttle = new Throttle(intervalMs, () => sent.push(value));
    return {
      sent,
      throttle,
      set(v: number) {
        value = v;
        throttle.poke();
      },
    };
  }

  it('sends the first update at once and the newest at the end of the interval', () => {
    const { sent, set } = recorder(100);
    set(1);
    expect(sent).toEqual([1]);
    set(2);
    set(3);
    expect(sent).toEqual([1]);
    vi.advanceTimersByTime(99);
    expect(sent).toEqual([1]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([1, 3]);
  });

  it('a million updates in one interval cost one send at once and one at its end', () => {
    const { sent, set } = recorder(100);
    for (let i = 1; i <= 1_000_000; i++) set(i);
    vi.advanceTimersByTime(100);
    expect(sent).toEqual([1, 1_000_000]);
  });

  it('keeps sending the newest once per interval under a steady stream, and goes idle after', () => {
    const { sent, set } = recorder(100);
    for (let t = 0; t < 350; t += 10) {
      set(t);
      vi.advanceTimersByTime(10);
    }
    expect(sent).toEqual([0, 90, 190, 290]);
    vi.advanceTimersByTime(100);
    expect(sent).toEqual([0, 90, 190, 290, 340]);
    vi.advanceTimersByTime(1000);
    // Idle now: the next update leaves at once again.
    set(999);
    expect(sent.at(-1)).toBe(999);
  });

  it('spaced updates are never lost or delayed', () => {
    const { sent, set } = recorder(100);
    set(1);
    vi.advanceTimersByTime(150);
    set(2);
    vi.advanceTimersByTime(150);
    set(3);
    expect(sent).toEqual([1, 2, 3]);
  });

  it('flush sends a waiting value at once and closes the interval; with nothing waiting it sends nothing', () => {
    const { sent, set, throttle } = recorder(100);
    set(1);
    set(2);
    throttle.flush();
    expect(sent).toEqual([1, 2]);
    throttle.flush();
    expect(sent).toEqual([1, 2]);
    vi.advanceTimersByTime(500);
    expect(sent).toEqual([1, 2]);
  });

  it('cancel forgets the waiting value', () => {
    const { sent, set, throttle } = recorder(100);
    set(1);
    set(2);
    expect(throttle.waiting).toBe(true);
    throttle.cancel();
    vi.advanceTimersByTime(500);
    expect(sent).toEqual([1]);
  });

  it('an interval of 0 sends every update', () => {
    const { sent, set } = recorder(0);
    set(1);
    set(2);
    set(3);
    expect(sent).toEqual([1, 2, 3]);
  });
});
