/**
 * The paging rule of progress/list and task/list (src/daemon/list-page.ts), on every small case:
 * each item once across the pages, in order; a page within its count and its bytes, unless it is
 * one item alone; and no page ends sooner than a bound makes it.
 */
import { describe, expect, it } from 'vitest';
import { fillPage } from '../../src/daemon/list-page.js';

/** An item that takes `size` bytes on a page: its JSON (a string: its quotes) and its comma. */
function item(size: number): string {
  return 'x'.repeat(size - 3);
}

const sizeOf = (text: string) => text.length + 3;

interface Candidate {
  readonly position: number;
  readonly text: string;
}

/** Candidates of these sizes, at positions with gaps (a table forgets some). */
function candidates(sizes: readonly number[]): Candidate[] {
  return sizes.map((size, i) => ({ position: 3 * i + 1, text: item(size) }));
}

/** Every page from the first, following `next`; fails if paging never ends. */
function pages(all: readonly Candidate[], limit: number, maxBytes: number): string[][] {
  const out: string[][] = [];
  let after: number | undefined;
  do {
    const page = fillPage(
      all,
      (candidate) => candidate.position,
      { after, limit, maxBytes },
      (candidate) => candidate.text,
    );
    out.push(page.items);
    after = page.next;
    if (out.length > all.length + 1) throw new Error('paging did not end');
  } while (after !== undefined);
  return out;
}

/** Every list of `length` items of `sizes`. */
function* tables(sizes: readonly number[], length: number): Generator<number[]> {
  if (length === 0) {
    yield [];
    return;
  }
  for (const rest of tables(sizes, length - 1)) for (const size of sizes) yield [...rest, size];
}

const total = (page: readonly string[]) => page.reduce((sum, text) => sum + sizeOf(text), 0);

describe('fillPage', () => {
  it('holds on every table of up to 4 items, every limit and every budget up to 30 bytes', () => {
    // Plain checks gathered, not one expect each: there are over 100,000 cases.
    const broken: string[] = [];
    let cases = 0;
    for (let length = 0; length <= 4; length++) {
      for (const sizes of tables([3, 4, 5, 8, 31], length)) {
        const all = candidates(sizes);
        const texts = all.map((candidate) => candidate.text);
        for (let limit = 1; limit <= 5; limit++) {
          for (let maxBytes = 0; maxBytes <= 30; maxBytes++) {
            cases++;
            const which = `sizes ${sizes}, limit ${limit}, maxBytes ${maxBytes}`;
            const got = pages(all, limit, maxBytes);
            if (JSON.stringify(got.flat()) !== JSON.stringify(texts)) {
              broken.push(`${which}: not every item once, in order`);
            }
            if (all.length === 0 && got.length !== 1) broken.push(`${which}: not one empty page`);
            let index = 0;
            for (const page of got) {
              if (all.length > 0 && page.length === 0) broken.push(`${which}: an empty page`);
              if (page.length > limit) broken.push(`${which}: over the limit`);
              if (page.length > 1 && total(page) > maxBytes) broken.push(`${which}: over budget`);
              index += page.length;
              // Ends no sooner than a bound makes it: the next item would pass one.
              const following = all[index];
              if (
                following !== undefined &&
                page.length < limit &&
                total(page) + sizeOf(following.text) <= maxBytes
              ) {
                broken.push(`${which}: a page ended early`);
              }
            }
          }
        }
      }
    }
    expect(broken).toEqual([]);
    expect(cases).toBeGreaterThan(100_000);
  });

  it('takes an item that ends exactly at the budget, and stops one byte over it', () => {
    const all = candidates([5, 5, 5]);
    expect(pages(all, 10, 10).map((page) => page.length)).toEqual([2, 1]);
    expect(pages(all, 10, 9).map((page) => page.length)).toEqual([1, 1, 1]);
    expect(pages(all, 10, 15).map((page) => page.length)).toEqual([3]);
    expect(pages(all, 10, 14).map((page) => page.length)).toEqual([2, 1]);
  });

  it('gives an item larger than the budget a page of its own, wherever it is', () => {
    expect(pages(candidates([100, 3, 3]), 10, 10).map((page) => page.length)).toEqual([1, 2]);
    expect(pages(candidates([3, 100, 3]), 10, 10).map((page) => page.length)).toEqual([1, 1, 1]);
    expect(pages(candidates([100]), 10, 0).map((page) => page.length)).toEqual([1]);
  });

  it('answers an empty table, or nothing after the last position, with one empty last page', () => {
    const present = (candidate: Candidate) => candidate.text;
    const at = (candidate: Candidate) => candidate.position;
    expect(fillPage([], at, { after: undefined, limit: 5, maxBytes: 100 }, present)).toEqual({
      items: [],
      next: undefined,
    });
    expect(
      fillPage(candidates([3, 3]), at, { after: 4, limit: 5, maxBytes: 100 }, present),
    ).toEqual({ items: [], next: undefined });
  });

  it('continues after `after`, and names the last item taken as `next`', () => {
    const all = candidates([3, 3, 3, 3]);
    const page = fillPage(
      all,
      (candidate) => candidate.position,
      { after: 1, limit: 2, maxBytes: 100 },
      (candidate) => candidate.position,
    );
    expect(page).toEqual({ items: [4, 7], next: 7 });
  });
});
