/**
 * Option tables: every command (and the daemon's library options) describes its flags once, as
 * rows of a table, and its parsing, checks and --help are read from the rows. Here: the row, the
 * one range check of an integer option, and the --help formatter. The parser is the CLI's
 * (src/cli/args.ts); the daemon's table is src/daemon/options.ts.
 */
import { BridgeError } from './errors.js';

export interface OptionRow {
  /** The flag without its dashes, also the name an error gives. */
  readonly name: string;
  /** integer and number arrive as text and are checked; list: repeatable. */
  readonly kind: 'string' | 'boolean' | 'list' | 'integer' | 'number';
  /** The placeholder in --help for a string or list (DIR, PATH); numbers show N. */
  readonly value?: string;
  /**
   * A string whose value is optional: `--parse` alone (read as "") or `--parse=NAME`, never the
   * next word; --help shows `--parse[=NAME]`.
   */
  readonly optionalValue?: boolean;
  /** A one-letter alias (-h). */
  readonly short?: string;
  /** The heading this flag is listed under in --help; none: listed without one. */
  readonly section?: string;
  /** For --help: words to wrap, `{default}` replaced by the default; "\n" starts a new line. */
  readonly help: string;
  /** What an omitted flag is (the value given to the command). */
  readonly default?: number | string;
  /** How the default reads in --help when the plain value would not say it (8 MiB). */
  readonly shownDefault?: string;
  /** Bounds of an integer. */
  readonly min?: number;
  readonly max?: number;
  /** The only values a string may take. */
  readonly choices?: readonly string[];
}

/** `-h, --help`, the last row of every command's table. */
export function helpRow(section?: string): OptionRow {
  return {
    name: 'help',
    kind: 'boolean',
    short: 'h',
    help: 'show this help',
    ...(section === undefined ? {} : { section }),
  };
}

/** An option that is not what it must be: invalid_option, naming the flag and what it takes. */
export function invalidOption(name: string, expected: string, got: unknown): never {
  throw new BridgeError(
    'invalid_option',
    `option --${name}: expected ${expected}, got ${JSON.stringify(got)}`,
  );
}

/** The one range check of an integer option, for the command line and the library alike. */
export function checkInteger(
  name: string,
  value: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    invalidOption(
      name,
      max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer from ${min} to ${max}`,
      value,
    );
  }
}

const HELP_WIDTH = 80;

/**
 * The flag lines of --help from `rows`, in their order, grouped under their sections: each flag
 * and its placeholder, then its help from `column` on, wrapped at 80 columns.
 */
export function optionsHelp(rows: readonly OptionRow[], column: number): string {
  const sections = new Map<string | undefined, string[]>();
  for (const row of rows) {
    const lines = sections.get(row.section) ?? [];
    sections.set(row.section, lines);
    const value =
      row.kind === 'integer' || row.kind === 'number'
        ? ' N'
        : row.kind === 'boolean'
          ? ''
          : row.optionalValue === true
            ? `[=${row.value ?? 'VALUE'}]`
            : ` ${row.value ?? 'VALUE'}`;
    const shown = row.shownDefault ?? (row.default === undefined ? '' : String(row.default));
    const flag = `  ${row.short === undefined ? '' : `-${row.short}, `}--${row.name}${value}`;
    const wrapped = row.help
      .replaceAll('{default}', shown)
      .split('\n')
      .flatMap((paragraph) => wrapWords(paragraph, HELP_WIDTH - column));
    const pad = ' '.repeat(column);
    if (flag.length < column - 1) lines.push(`${flag.padEnd(column)}${wrapped[0]}`);
    else lines.push(flag, `${pad}${wrapped[0]}`);
    for (const more of wrapped.slice(1)) lines.push(`${pad}${more}`);
  }
  return [...sections]
    .map(
      ([section, lines]) => `${section === undefined ? '' : `${section}:\n`}${lines.join('\n')}\n`,
    )
    .join('\n');
}

/** Words of `text` in lines of at most `width` columns (the first line: `firstWidth`); a longer word stands alone. */
export function wrapWords(text: string, width: number, firstWidth = width): string[] {
  const wrapped: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const room = wrapped.length === 0 ? firstWidth : width;
    if (line !== '' && line.length + 1 + word.length > room) {
      wrapped.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  wrapped.push(line);
  return wrapped;
}
