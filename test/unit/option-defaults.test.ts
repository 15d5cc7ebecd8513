/**
 * The rule of the option tables: a default lives in src/shared/defaults.ts (a wire limit in
 * src/protocol/limits.ts), under a name, and a table names it; it never writes the value itself.
 * Read from the tables' source, since a value (10_000) and a constant of that value cannot be told
 * apart once loaded. (TypeScript 7 has no JavaScript API to parse with: the rows are read by their
 * properties, `default:`, `shownDefault:` and `help:`, as biome formats them.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Every file that holds option rows: the daemon's table, each command's, and the shared rows. */
const TABLE_FILES = [
  'daemon/options.ts',
  'shared/option-table.ts',
  ...readdirSync(join(SRC, 'cli'))
    .filter((name) => name.endsWith('-command.ts') || name === 'common-options.ts')
    .map((name) => `cli/${name}`),
];

/** The names a file imports from shared/defaults.ts or protocol/limits.ts. */
function defaultImports(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, list = '', from = ''] of text.matchAll(
    /^import\s*\{([^}]*)\}\s*from\s*'([^']+)'/gm,
  ))
    if (/\/(shared\/defaults|protocol\/limits)\.js$/.test(from))
      for (const name of list.split(',').map((entry) => entry.trim()))
        if (name !== '' && !name.startsWith('type ')) names.add(name);
  return names;
}

/** A string or template literal at `start`: the text it writes itself, and its ${...} parts. */
interface Literal {
  readonly texts: string[];
  readonly substitutions: string[];
  readonly end: number;
}

function readLiteral(text: string, start: number): Literal {
  const quote = text[start] as string;
  const texts: string[] = [];
  const substitutions: string[] = [];
  let chunk = '';
  let i = start + 1;
  while (text[i] !== quote) {
    if (i >= text.length) throw new Error(`unterminated literal at ${start}`);
    if (text[i] === '\\') {
      chunk += text.slice(i, i + 2);
      i += 2;
    } else if (quote === '`' && text.startsWith('${', i)) {
      let depth = 1;
      let j = i + 2;
      for (; depth > 0; j++) depth += text[j] === '{' ? 1 : text[j] === '}' ? -1 : 0;
      texts.push(chunk);
      chunk = '';
      substitutions.push(text.slice(i + 2, j - 1).trim());
      i = j;
    } else chunk += text[i++];
  }
  texts.push(chunk);
  return { texts, substitutions, end: i + 1 };
}

const tables = TABLE_FILES.map((file) => {
  const text = readFileSync(join(SRC, file), 'utf8');
  const at = (index: number) => `${file}:${text.slice(0, index).split('\n').length}`;
  const imports = defaultImports(text);
  // A row's property, on a line of its own or after `{` or `,` (not "(default:" inside a help).
  const property = (name: string) =>
    [...text.matchAll(new RegExp(`(?:^|[{,])[ \\t]*${name}:[ \\t]+`, 'gm'))].map(
      (match) => match.index + match[0].length,
    );
  const defaults = property('default').map((index) => ({
    where: at(index),
    value: /^[^,\n}]+/.exec(text.slice(index))?.[0].trim() ?? '',
  }));
  const shownDefaults = property('shownDefault').map((index) => ({
    where: at(index),
    value: /^[^\n]+?(?=,?$)/m.exec(text.slice(index))?.[0] ?? '',
  }));
  const helps = property('help')
    .filter((index) => '\'"`'.includes(text[index] as string))
    .map((index) => ({ where: at(index), literal: readLiteral(text, index) }));
  return { imports, defaults, shownDefaults, helps };
});

/** What breaks the rule, one line each; none when it holds. */
function offences(): string[] {
  return tables.flatMap(({ imports, defaults, shownDefaults, helps }) => [
    ...defaults
      .filter(({ value }) => !imports.has(value))
      .map(
        ({ where, value }) =>
          `${where}: default is \`${value}\`, not a constant imported from shared/defaults.ts or protocol/limits.ts`,
      ),
    // The number in --help (8388608 = 8 MiB) is computed from the constant, never written again.
    ...shownDefaults
      .filter(({ value }) => /\d/.test(value.replace(/[A-Za-z_$][\w$]*/g, '')))
      .map(({ where, value }) => `${where}: shownDefault \`${value}\` writes a number`),
    ...helps.flatMap(({ where, literal }) => [
      // "(default " is followed by {default} or by ${CONSTANT}; "(default: ..." says where a
      // value comes from ($MCP_PROGRESS_SOCKET, user@host), which is no value of ours.
      ...literal.texts
        .filter((chunk) => /\(default (?!\{default\})(?!$)/.test(chunk))
        .map(
          (chunk) =>
            `${where}: help writes its default ("${/\(default [^;)]*/.exec(chunk)?.[0]}"): write {default} or \${CONSTANT}`,
        ),
      ...literal.substitutions
        .filter((sub, i) => /\(default $/.test(literal.texts[i] ?? '') && !imports.has(sub))
        .map(
          (sub) =>
            `${where}: help shows the default \${${sub}}, not a constant imported from shared/defaults.ts or protocol/limits.ts`,
        ),
    ]),
  ]);
}

describe('option tables', () => {
  it('are found: the rows of every table, their defaults and their help', () => {
    expect(TABLE_FILES).toEqual(
      expect.arrayContaining([
        'cli/mcp-command.ts',
        'cli/tail-command.ts',
        'cli/common-options.ts',
      ]),
    );
    expect(tables.flatMap((table) => table.defaults).length).toBeGreaterThan(25);
    expect(tables.flatMap((table) => table.shownDefaults).length).toBeGreaterThanOrEqual(3);
    // The daemon's options, each command's flags, helpRow and the socket rows.
    expect(tables.flatMap((table) => table.helps).length).toBeGreaterThan(60);
  });

  it('name each default by a constant of defaults.ts or limits.ts, never write its value', () => {
    expect(offences()).toEqual([]);
  });
});
