/**
 * The rules of `_meta` that JSON Schema cannot state, as plain functions: the
 * zod schema (frames.ts) and the hand-written frame checks (frame-guards.ts)
 * both call them, so each rule is written once.
 */
import { isWellFormedText, MAX_META_DEPTH, MAX_SAFE_NUMBER } from './limits.js';

/**
 * What makes `value` unfit for `_meta`, or undefined: nesting deeper than
 * MAX_META_DEPTH (the value itself is level 1), a number outside ±MAX_SAFE_NUMBER,
 * or a string or key with a lone surrogate. Iterative, so any depth is safe to check.
 */
export function metaProblem(value: unknown): string | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const item = next.value;
    if (typeof item === 'number') {
      if (!(Math.abs(item) <= MAX_SAFE_NUMBER))
        return `a number outside ±${MAX_SAFE_NUMBER} (${item}): send it as a string`;
      continue;
    }
    if (typeof item === 'string') {
      if (!isWellFormedText(item)) return 'a string with a lone surrogate';
      continue;
    }
    if (item === null || typeof item !== 'object') continue;
    if (next.depth > MAX_META_DEPTH)
      return `objects or arrays nested deeper than ${MAX_META_DEPTH}`;
    if (!Array.isArray(item)) {
      for (const key of Object.keys(item))
        if (!isWellFormedText(key)) return 'a key with a lone surrogate';
    }
    for (const child of Object.values(item)) pending.push({ value: child, depth: next.depth + 1 });
  }
  return undefined;
}

/** Whether objects and arrays in `value` nest at most `limit` levels; iterative, so any depth is safe to check. */
export function nestedWithin(value: unknown, limit: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (next.value === null || typeof next.value !== 'object') continue;
    if (next.depth > limit) return false;
    for (const child of Object.values(next.value))
      pending.push({ value: child, depth: next.depth + 1 });
  }
  return true;
}
