/** schemas/*.json are generated from the zod schemas; this fails when the committed files drift. */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RPC_METHODS } from '../../src/daemon/rpc.js';
import { RULES_BEYOND_SCHEMA, RULES_KEYWORD } from '../../src/protocol/frames.js';
import {
  jsonSchemaText,
  PUBLISHED_SCHEMAS,
  RESULT_SCHEMA_NAMES,
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

/** The node at `path` (property names, "anyOf:0" for an alternative) in a published schema. */
function nodeAt(name: SchemaName, path: string[]): Record<string, unknown> {
  let node = JSON.parse(readFileSync(join(DIR, `${name}.json`), 'utf8')) as Record<string, unknown>;
  for (const step of path) {
    const [key, index] = step.split(':');
    node = (
      index === undefined
        ? (node.properties as Record<string, unknown>)[key as string]
        : (node[key as string] as unknown[])[Number(index)]
    ) as Record<string, unknown>;
  }
  return node;
}

describe('byte limits JSON Schema cannot state', () => {
  // Each string whose limit is in UTF-8 bytes: where it is, and a valid value around it.
  const cases: Array<[SchemaName, string[], (text: string) => unknown]> = [
    ['progress-frame.v1', ['message'], (m) => ({ v: 1, progressToken: 't', message: m })],
    ['done-frame.v1', ['message'], (m) => ({ v: 1, progressToken: 't', message: m })],
    ['progress-frame.v1', ['progressToken', 'anyOf:0'], (t) => ({ v: 1, progressToken: t })],
    ['subscribe-params.v1', ['progressToken', 'anyOf:0'], (t) => ({ progressToken: t })],
    ['cancel-params.v1', ['reason'], (r) => ({ progressToken: 't', reason: r })],
    ['envelope.v1', ['type'], (t) => ({ type: t })],
    [
      'get-result.v1',
      ['stream', 'host'],
      (h) => ({
        stream: {
          progressToken: 't',
          state: 'active',
          subscribers: 0,
          startedAt: 0,
          updatedAt: 0,
          host: h,
        },
      }),
    ],
  ];
  for (const [name, path, make] of cases) {
    it(`${name} ${path.join('.')}: the description and x-maxUtf8Bytes state the byte rule the validator applies`, () => {
      const node = nodeAt(name, path);
      const limit = node['x-maxUtf8Bytes'];
      expect(typeof limit).toBe('number');
      expect(node.description).toContain(`at most ${limit} UTF-8 bytes`);
      // maxLength is a true upper bound: a string of `limit` bytes has at most `limit` code points.
      expect(node.maxLength).toBe(limit);
      const schema = PUBLISHED_SCHEMAS[name];
      const bytes = limit as number;
      // 'é' is 2 bytes: within maxLength either way, so only the byte rule tells them apart.
      expect(schema.safeParse(make('é'.repeat(bytes / 2))).success).toBe(true);
      expect(schema.safeParse(make('é'.repeat(bytes / 2 + 1))).success).toBe(false);
      expect(schema.safeParse(make('a'.repeat(bytes))).success).toBe(true);
      expect(schema.safeParse(make('a'.repeat(bytes + 1))).success).toBe(false);
    });
  }

  it('every string with x-maxUtf8Bytes in a published schema is one of the cases above', () => {
    const found: string[] = [];
    const walk = (value: unknown, where: string) => {
      if (value === null || typeof value !== 'object') return;
      if (Object.hasOwn(value, 'x-maxUtf8Bytes')) found.push(where);
      for (const [key, child] of Object.entries(value)) walk(child, `${where}/${key}`);
    };
    for (const name of Object.keys(PUBLISHED_SCHEMAS) as SchemaName[])
      walk(JSON.parse(readFileSync(join(DIR, `${name}.json`), 'utf8')), name);
    expect(found.length).toBeGreaterThan(cases.length);
    // Every string field with a byte limit says so in its description.
    for (const where of found) expect(where).toMatch(/\/(message|reason|type|host|name|anyOf\/0)$/);
  });
});

describe('rules beyond JSON Schema', () => {
  const used = new Map<string, string[]>();
  for (const name of Object.keys(PUBLISHED_SCHEMAS) as SchemaName[]) {
    const walk = (value: unknown, where: string) => {
      if (value === null || typeof value !== 'object') return;
      const names = (value as Record<string, unknown>)[RULES_KEYWORD];
      if (Array.isArray(names))
        for (const rule of names) used.set(rule, [...(used.get(rule) ?? []), where]);
      for (const [key, child] of Object.entries(value)) walk(child, `${where}/${key}`);
    };
    walk(JSON.parse(readFileSync(join(DIR, `${name}.json`), 'utf8')), name);
  }

  it('every x-rules name in a published schema is one of the rules, and every rule is used', () => {
    expect([...used.keys()].sort()).toEqual(Object.keys(RULES_BEYOND_SCHEMA).sort());
  });

  it('PROTOCOL.md lists each rule, in one table', () => {
    const protocol = readFileSync(join(DIR, '../docs/PROTOCOL.md'), 'utf8');
    for (const rule of Object.keys(RULES_BEYOND_SCHEMA))
      expect(protocol).toMatch(new RegExp(`^\\| \`${rule}\` +\\|`, 'm'));
  });

  it('the nodes that need them name them: byte limits, the progress rule, _meta', () => {
    expect(used.get('utf8-bytes')).toEqual(
      expect.arrayContaining(['progress-frame.v1/properties/message']),
    );
    expect(used.get('progress-increases')).toEqual(
      expect.arrayContaining(['progress-frame.v1/properties/progress']),
    );
    expect(used.get('meta-bounds')).toEqual(
      expect.arrayContaining(['progress-frame.v1/properties/_meta']),
    );
  });

  it('every gateway method has a published result schema', () => {
    expect(Object.keys(RESULT_SCHEMA_NAMES).sort()).toEqual([...RPC_METHODS].sort());
  });
});
