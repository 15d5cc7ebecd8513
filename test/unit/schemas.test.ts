/** schemas/*.json are generated from the zod schemas; this fails when the committed files drift. */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  jsonSchemaText,
  PUBLISHED_SCHEMAS,
  type SchemaName,
} from '../../src/protocol/json-schema.js';

const DIR = resolve(import.meta.dirname, '../../schemas');

describe('committed JSON Schemas', () => {
  it('are exactly the published set', () => {
    const files = readdirSync(DIR)
      .filter((f) => f.endsWith('.json'))
      .sort();
    expect(files).toEqual(
      Object.keys(PUBLISHED_SCHEMAS)
        .map((n) => `${n}.json`)
        .sort(),
    );
  });

  for (const name of Object.keys(PUBLISHED_SCHEMAS) as SchemaName[]) {
    it(`${name}.json matches the zod schema (run "npm run schemas" after changing one)`, () => {
      expect(readFileSync(join(DIR, `${name}.json`), 'utf8')).toBe(jsonSchemaText(name));
    });
  }

  it('describe draft 2020-12 objects that refuse unknown fields', () => {
    const frame = JSON.parse(readFileSync(join(DIR, 'progress-frame.v1.json'), 'utf8'));
    expect(frame).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      required: ['v', 'progressToken'],
      additionalProperties: false,
    });
  });
});
