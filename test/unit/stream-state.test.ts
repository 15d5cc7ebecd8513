/** The worker client's stream without a socket: update checks, the newest value, the cancel. */
import { describe, expect, it } from 'vitest';
import { Cancellation } from '../../src/client/cancellation.js';
import { StreamUpdates } from '../../src/client/stream-state.js';
import type { BridgeError } from '../../src/shared/errors.js';

describe('StreamUpdates', () => {
  it('counts one up without progress, carries the total forward, and keeps the newest unsent', () => {
    const updates = new StreamUpdates('t');
    expect(updates.record({ total: 10 })).toBeUndefined();
    expect(updates.record({ message: 'two' })).toBeUndefined();
    expect(updates.unsent).toEqual({
      v: 1,
      progressToken: 't',
      progress: 2,
      total: 10,
      message: 'two',
    });
    updates.sent();
    expect(updates.unsent).toBeUndefined();
    expect(updates.newest?.progress).toBe(2);
    updates.connectionChanged();
    expect(updates.unsent?.progress).toBe(2);
  });

  it('ignores an update that breaks a rule, saying which, and keeps the last good one', () => {
    const updates = new StreamUpdates(7);
    updates.record({ progress: 5 });
    expect(updates.record({ progress: 5 })).toMatchObject({
      code: 'non_monotonic',
      message: expect.stringContaining('progress 5 is not greater than the last progress 5'),
    });
    expect(updates.record({ progress: Number.NaN })?.code).toBe('invalid_field');
    expect(updates.record({ progress: 6, total: -1 })?.message).toContain('total must be');
    expect(updates.record(null as never)?.message).toContain('got null');
    expect(updates.newest?.progress).toBe(5);
  });

  it('drops the newest when asked, and on a refusal only if it went out', () => {
    const updates = new StreamUpdates('t');
    updates.record({});
    updates.dropIfSent();
    expect(updates.newest?.progress).toBe(1);
    updates.sent();
    updates.dropIfSent();
    expect(updates.newest).toBeUndefined();
    // The count goes on from the last recorded value.
    updates.record({});
    expect(updates.newest?.progress).toBe(2);
  });
});

describe('Cancellation', () => {
  it('aborts the signal and calls each callback once with the reason; a late one is called too', async () => {
    const reported: BridgeError[] = [];
    const cancellation = new Cancellation((error) => reported.push(error));
    const reasons: Array<string | undefined> = [];
    cancellation.onCancel((reason) => reasons.push(reason));
    const removed = cancellation.onCancel(() => reasons.push('removed'));
    removed();
    cancellation.onCancel(() => {
      throw new Error('boom');
    });
    cancellation.cancel('user asked');
    cancellation.cancel('again');
    expect(cancellation.cancelled).toBe(true);
    expect(cancellation.signal.aborted).toBe(true);
    expect((cancellation.signal.reason as BridgeError).code).toBe('cancelled');
    expect(reasons).toEqual(['user asked']);
    expect(reported.map((error) => error.code)).toEqual(['cancel_callback_failed']);
    const late = new Promise((resolve) => cancellation.onCancel(resolve));
    expect(await late).toBe('user asked');
  });
});
