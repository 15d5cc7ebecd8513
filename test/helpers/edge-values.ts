/**
 * Values that each break some rule of some protocol field, for the tests that hold a
 * hand-written check to its zod schema: every field of a known-good message set to each
 * of them, and removed, is a case both must answer alike.
 */
import { MAX_META_DEPTH, MAX_SAFE_NUMBER } from '../../src/protocol/limits.js';

let deep: unknown = 1;
for (let level = 0; level < MAX_META_DEPTH; level++) deep = { d: deep };

export const EDGE_VALUES: readonly unknown[] = [
  undefined,
  null,
  true,
  0,
  1,
  2,
  -1,
  1.5,
  2 ** 53,
  -(2 ** 53) + 1,
  MAX_SAFE_NUMBER,
  MAX_SAFE_NUMBER + 2,
  -MAX_SAFE_NUMBER - 2,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  '',
  'x',
  'x'.repeat(1024),
  'x'.repeat(1025),
  'é'.repeat(512),
  'é'.repeat(513),
  'y'.repeat(4096),
  'y'.repeat(4097),
  '\ud800',
  'a\udc00b',
  'ok',
  'OK',
  'error',
  'cancelled',
  'abandoned',
  [],
  [1],
  {},
  { a: 1 },
  { big: 2 ** 60 },
  { '\ud800': 1 },
  { s: 'a\udc00' },
  { list: [1, { x: null }] },
  { d: deep },
  deep,
];

/** Every object in `messages` with each of `fields` set to each edge value, and removed. */
export function mutations(messages: readonly unknown[], fields: readonly string[]): unknown[] {
  return messages
    .filter((message) => typeof message === 'object' && message !== null && !Array.isArray(message))
    .flatMap((base) =>
      fields.flatMap((field) => [
        ...EDGE_VALUES.map((value) => ({ ...(base as object), [field]: value })),
        Object.fromEntries(Object.entries(base as object).filter(([key]) => key !== field)),
      ]),
    );
}
