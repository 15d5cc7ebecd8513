/**
 * The one paging rule of progress/list and task/list (docs/PROTOCOL.md 4.2.1, 4.2.3). Pure and
 * without zod, so that the daemon's start loads none.
 */
import { utf8ByteLength } from '../protocol/limits.js';

/** Which page to fill: the candidates after position `after`, at most `limit`, `maxBytes` of JSON. */
export interface PageBounds {
  /** The position of the last item of the page before (undefined: from the first). */
  readonly after: number | undefined;
  readonly limit: number;
  /** The bytes the items may take past the first, each item's JSON and its comma. */
  readonly maxBytes: number;
}

export interface FilledPage<I> {
  readonly items: I[];
  /**
   * When candidates were left out, the position of the page's last item: the next page starts
   * after it, at the first one left out. Undefined on the last page.
   */
  readonly next: number | undefined;
}

/**
 * One page of `candidates` (in ascending position): those after `bounds.after`, each as `present`
 * makes it, up to the first that would pass `limit` items or `maxBytes` of JSON. The first is
 * always taken, however large it is, so that a client following `next` always moves on; and as a
 * page ends just before the first candidate left out, no item is skipped or listed twice.
 */
export function fillPage<C, I>(
  candidates: Iterable<C>,
  positionOf: (candidate: C) => number,
  bounds: PageBounds,
  present: (candidate: C) => I,
): FilledPage<I> {
  const items: I[] = [];
  let bytes = 0;
  let last: number | undefined;
  for (const candidate of candidates) {
    const position = positionOf(candidate);
    if (bounds.after !== undefined && position <= bounds.after) continue;
    if (last !== undefined && items.length >= bounds.limit) return { items, next: last };
    const item = present(candidate);
    // Measured as sent, with its comma.
    const size = utf8ByteLength(JSON.stringify(item)) + 1;
    if (last !== undefined && bytes + size > bounds.maxBytes) return { items, next: last };
    items.push(item);
    bytes += size;
    last = position;
  }
  return { items, next: undefined };
}
