/**
 * When an idle Node process's memory has settled. V8's memory reducer gives back what start-up
 * grew (the young generation, mostly) some seconds after start-up's last collection: about 9 s
 * after initialize on a quiet machine, 25 s with both cores busy. A reading at one fixed time
 * caught it on either side: `mcp` embedding the daemon read 71 MiB in one run and 80 in the next.
 * So the settled figure is read from a first time on, once a second, until the reducer has run in
 * every process read (each one's private memory a mebibyte or more under its figure soon after
 * start, the same in two readings running), or until a last time, whichever comes first.
 */
import { sleep } from './proc.ts';

/** What a reading needs here: a process's private memory (RssAnon). */
interface Reading {
  readonly privateBytes: number;
}

/** Private memory a process must have given back since its reading soon after start. */
export const SETTLE_DROP_BYTES = 1024 * 1024;
/** Two readings this close are the same: RssAnon moves by a page or two at idle. */
export const SETTLE_SAME_BYTES = 256 * 1024;
export const SETTLE_EVERY_MS = 1000;

/**
 * Whether every process has settled: `soon` is each process's reading soon after start, and
 * `previous` and `latest` the last two readings (in the same order).
 */
export function hasSettled(
  soon: readonly Reading[],
  previous: readonly Reading[] | undefined,
  latest: readonly Reading[],
): boolean {
  if (previous === undefined) return false;
  return latest.every((now, i) => {
    const before = previous[i];
    const start = soon[i];
    if (before === undefined || start === undefined) return false;
    return (
      now.privateBytes <= start.privateBytes - SETTLE_DROP_BYTES &&
      Math.abs(now.privateBytes - before.privateBytes) <= SETTLE_SAME_BYTES
    );
  });
}

/** When the settled figure may be read, in ms after the process was ready: from, and at the latest. */
export interface SettleWindow {
  readonly fromMs: number;
  readonly untilMs: number;
}

/**
 * Reads `read()` at `fromMs` after `startedAt` (a performance.now() time), then once a second
 * until `hasSettled` or `untilMs`: the last reading, and when it was taken (ms after `startedAt`).
 */
export async function readSettled<T extends Reading>(
  read: () => T[],
  soon: readonly Reading[],
  startedAt: number,
  { fromMs, untilMs }: SettleWindow,
): Promise<{ afterMs: number; memory: T[] }> {
  // A timer may fire a fraction of a millisecond early: wait until `fromMs` has passed.
  const from = startedAt + fromMs;
  for (let left = from - performance.now(); left > 0; left = from - performance.now()) {
    await sleep(Math.ceil(left));
  }
  let previous: T[] | undefined;
  for (;;) {
    const memory = read();
    const afterMs = Math.round(performance.now() - startedAt);
    if (hasSettled(soon, previous, memory) || afterMs + SETTLE_EVERY_MS > untilMs) {
      return { afterMs, memory };
    }
    previous = memory;
    await sleep(SETTLE_EVERY_MS);
  }
}
