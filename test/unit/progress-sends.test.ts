/** ProgressSends: in order, bounded while the transport is behind, the final value never dropped. */
import { describe, expect, it } from 'vitest';
import {
  HANDED_ON,
  type McpProgressNotification,
  ProgressSends,
} from '../../src/mcp/progress-sends.js';

/** A transport that holds every send until released, as a host that stopped reading does. */
function heldTransport() {
  const sent: number[] = [];
  let release: () => void = () => {};
  let released = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    sent,
    release: () => release(),
    hold: () => {
      released = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
    send: async (notification: McpProgressNotification) => {
      await released;
      sent.push(notification.params.progress);
    },
  };
}

describe('ProgressSends', () => {
  it('sends every value in order while the transport keeps up', async () => {
    const transport = heldTransport();
    transport.release();
    const sends = new ProgressSends(transport.send, { maxWaiting: 4 });
    for (let i = 1; i <= 100; i++) {
      sends.push({ progressToken: 't', progress: i });
      await Promise.resolve();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await sends.drain({ confirm: false });
    expect(transport.sent).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(sends.coalesced).toBe(0);
  });

  it('a send the transport took at once (HANDED_ON) lets the next go now, with no turn between them', async () => {
    const sent: number[] = [];
    // Takes every value at once, but holds one back on a promise while `slow` is set.
    let slow: Promise<void> | undefined;
    const sends = new ProgressSends((notification) => {
      sent.push(notification.params.progress);
      return slow ?? HANDED_ON;
    });
    sends.push({ progressToken: 't', progress: 1 });
    sends.push({ progressToken: 't', progress: 2 });
    // Both went out before push returned: nothing waited for a promise reaction.
    expect(sent).toEqual([1, 2]);
    let release: () => void = () => {};
    slow = new Promise<void>((resolve) => {
      release = resolve;
    });
    sends.push({ progressToken: 't', progress: 3 });
    slow = undefined;
    sends.push({ progressToken: 't', progress: 4 });
    sends.push({ progressToken: 't', progress: 5 });
    // 3 is in flight on a promise: 4 and 5 wait for it, then follow at once, in order.
    expect(sent).toEqual([1, 2, 3]);
    const drained = sends.drain({ confirm: false });
    release();
    await drained;
    expect(sent).toEqual([1, 2, 3, 4, 5]);
    expect(sends.coalesced).toBe(0);
  });

  it('holds at most maxWaiting values while the transport is stuck, newest last, and sends them in order', async () => {
    const transport = heldTransport();
    const sends = new ProgressSends(transport.send, { maxWaiting: 8 });
    for (let i = 1; i <= 10_000; i++) sends.push({ progressToken: 't', progress: i });
    const drained = sends.drain({ confirm: false });
    transport.release();
    await drained;
    expect(transport.sent.length).toBeLessThanOrEqual(9);
    expect(transport.sent.at(-1)).toBe(10_000);
    for (let i = 1; i < transport.sent.length; i++)
      expect(transport.sent[i]).toBeGreaterThan(transport.sent[i - 1] ?? 0);
    expect(sends.coalesced).toBe(10_000 - transport.sent.length);
  });

  it('a value pushed after the queue emptied still goes out before drain settles', async () => {
    const transport = heldTransport();
    transport.release();
    const sends = new ProgressSends(transport.send);
    sends.push({ progressToken: 't', progress: 1 });
    await sends.drain({ confirm: false });
    sends.push({ progressToken: 't', progress: 2 });
    await sends.drain({ confirm: false });
    expect(transport.sent).toEqual([1, 2]);
  });

  it('stops at the first failed send and reports it once', async () => {
    const failures: unknown[] = [];
    let calls = 0;
    const sends = new ProgressSends(
      async () => {
        calls++;
        throw new Error('client gone');
      },
      { onFailure: (error) => failures.push(error) },
    );
    for (let i = 1; i <= 5; i++) sends.push({ progressToken: 't', progress: i });
    await sends.drain({ confirm: false });
    expect(calls).toBe(1);
    expect(failures).toHaveLength(1);
    expect(sends.failed).toBe(true);
  });
});
