/**
 * An honest worker and an honest subscriber that run beside hostile traffic.
 * Every value the worker publishes must be acked and must reach the
 * subscriber, in order, with nothing missing: a 100% delivery record.
 */
import { expect } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { eventually } from './daemon.js';
import { connectGateway, type GatewayClient } from './gateway.js';
import { type RawWorker, rawWorker } from './worker.js';

export interface HonestPair {
  /** Publishes the next value and waits for its ack. */
  step(): Promise<void>;
  /** Publishes continuously in the background until stop(). */
  run(intervalMs?: number): void;
  /** Stops, then checks the whole delivery record. Returns how many values went through. */
  finish(): Promise<number>;
}

export async function honestPair(
  info: DaemonInfo,
  token = `honest-${process.pid}-${Date.now()}`,
): Promise<HonestPair> {
  const subscriber: GatewayClient = await connectGateway(info);
  await subscriber.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
  const worker: RawWorker = await rawWorker(info.socket);
  let sent = 0;
  let running: Promise<void> | undefined;
  let stopped = false;
  const step = async () => {
    sent++;
    const seq = sent;
    worker.send('progress', { v: 1, progressToken: token, progress: seq, seq });
    const reply = await worker.reply((r) => (r.data as { seq?: number }).seq === seq);
    expect(reply.type, `honest frame ${seq}`).toBe('ack');
  };
  return {
    step,
    run(intervalMs = 5) {
      running = (async () => {
        while (!stopped) {
          await step();
          await new Promise((r) => setTimeout(r, intervalMs));
        }
      })();
    },
    async finish() {
      stopped = true;
      await running;
      await eventually(
        () => (subscriber.notifications.length >= sent ? true : undefined),
        10_000,
        'honest deliveries',
      );
      expect(subscriber.notifications.map((n) => n.params.progress)).toEqual(
        Array.from({ length: sent }, (_, i) => i + 1),
      );
      expect(worker.isClosed()).toBe(false);
      worker.destroy();
      await subscriber.close();
      return sent;
    },
  };
}
