import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  jsonSchema,
  jsonSchemaText,
  PUBLISHED_SCHEMAS,
  type SchemaName,
} from '../protocol/json-schema.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { parseOptions, UsageError } from './args.js';
import type { Io } from './io.js';

const NAMES = Object.keys(PUBLISHED_SCHEMAS) as SchemaName[];

export const SCHEMA_OPTIONS = [
  { name: 'list', kind: 'boolean', help: 'list the schema names' },
  { name: 'write', kind: 'string', value: 'DIR', help: 'write each schema to DIR/<name>.json' },
  helpRow(),
] as const satisfies readonly OptionRow[];

export const SCHEMA_HELP = `Usage: mcp-progress schema [NAME] [--list] [--write DIR]

Prints the JSON Schemas (draft 2020-12) of protocol v1, generated from the
daemon's own validators: all of them as one JSON object keyed by name, or the
one NAME. These are the files in schemas/.

${optionsHelp(SCHEMA_OPTIONS, 17)}
Names: ${NAMES.join(', ')}
`;

export async function schemaCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions('schema', argv, SCHEMA_OPTIONS, true);
  if (values.help) {
    io.out(SCHEMA_HELP);
    return 0;
  }
  if (values.list) {
    io.out(`${NAMES.join('\n')}\n`);
    return 0;
  }
  if (values.write !== undefined) {
    await mkdir(values.write, { recursive: true });
    for (const name of NAMES)
      await writeFile(join(values.write, `${name}.json`), jsonSchemaText(name));
    io.err(`wrote ${NAMES.length} schemas to ${values.write}\n`);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError('give at most one schema name');
  const [name] = positionals;
  if (name !== undefined) {
    if (!(NAMES as string[]).includes(name)) {
      throw new UsageError(
        `no schema named ${JSON.stringify(name)}: the names are ${NAMES.join(', ')}`,
      );
    }
    io.out(jsonSchemaText(name as SchemaName));
    return 0;
  }
  io.out(`${JSON.stringify(Object.fromEntries(NAMES.map((n) => [n, jsonSchema(n)])), null, 2)}\n`);
  return 0;
}
