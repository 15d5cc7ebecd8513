/** The project's README.md, as the tests that run its snippets and setup steps read it. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from './daemon.js';

export const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The first fenced block of `language` after `marker` in the README. */
export function readmeBlockAfter(marker: string, language: string): string {
  const from = README.indexOf(marker);
  expect(from, marker).toBeGreaterThan(-1);
  const open = README.indexOf(`\`\`\`${language}\n`, from);
  const close = README.indexOf('\n```', open + 1);
  return README.slice(open + language.length + 4, close + 1);
}
