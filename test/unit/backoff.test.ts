/** backoffDelayMs: the one backoff of reconnects and busy connects, doubling, capped, jittered. */
import { describe, expect, it } from 'vitest';
import {
  BUSY_CONNECT_BACKOFF,
  backoffDelayMs,
  RECONNECT_BACKOFF,
} from '../../src/shared/defaults.js';

describe('backoffDelayMs', () => {
  it.each([
    ['reconnect', RECONNECT_BACKOFF],
    ['busy connect', BUSY_CONNECT_BACKOFF],
  ])(
    '%s: each step doubles up to the cap, and a wait lies between half the step and the step',
    (_, backoff) => {
      let step = backoff.firstMs;
      for (let attempt = 0; attempt < 40; attempt++) {
        expect(backoffDelayMs(backoff, attempt, () => 0)).toBe(step / 2);
        expect(backoffDelayMs(backoff, attempt, () => 1)).toBe(step);
        const drawn = backoffDelayMs(backoff, attempt);
        expect(drawn).toBeGreaterThanOrEqual(step / 2);
        expect(drawn).toBeLessThanOrEqual(step);
        step = Math.min(backoff.maxMs, step * 2);
      }
      expect(step).toBe(backoff.maxMs);
    },
  );

  it('is jittered: clients dropped together do not all wait the same time', () => {
    const waits = new Set(Array.from({ length: 50 }, () => backoffDelayMs(RECONNECT_BACKOFF, 3)));
    expect(waits.size).toBeGreaterThan(1);
  });

  it('a negative attempt waits as the first', () => {
    expect(backoffDelayMs(RECONNECT_BACKOFF, -1, () => 1)).toBe(RECONNECT_BACKOFF.firstMs);
  });
});
