/** Flag parsing shared by the commands: strict, with errors a person can act on. */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { BridgeError } from '../shared/errors.js';
import { checkInteger, type OptionRow } from '../shared/option-table.js';

export type Options = NonNullable<ParseArgsConfig['options']>;

/** A mistake in how a command was called; the CLI exits 2 and shows the help hint. */
export class UsageError extends BridgeError {
  constructor(message: string) {
    super('usage', message);
    this.name = 'UsageError';
  }
}

export function parse<O extends Options>(
  command: string,
  argv: string[],
  options: O,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals, allowNegative: false });
  } catch (error) {
    const message = (error as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    throw new UsageError(`${message} (see "mcp-progress ${command} --help")`);
  }
}

/**
 * A number written in decimal: 12, -5, 0.25, 1e3. Number() alone would also take
 * 0x10, 0b11111, 0o17 and " 7", which a person meant as something else or mistyped.
 */
const DECIMAL = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

export function numberFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!DECIMAL.test(value) || !Number.isFinite(parsed)) {
    throw new UsageError(
      `--${name}: expected a finite number, got ${JSON.stringify(value)} (write it in decimal: 12, -5, 0.25, 1e3)`,
    );
  }
  return parsed;
}

/** An integer flag; the hint's examples are taken from its range (a port is never -5 or 0.25). */
export function integerFlag(
  name: string,
  value: string | undefined,
  min = Number.MIN_SAFE_INTEGER,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!DECIMAL.test(value) || !Number.isInteger(parsed)) {
    const examples = [min, Math.min(max, Math.max(min, 0) + 100)].filter(
      (example, i, all) => Number.isSafeInteger(example) && all.indexOf(example) === i,
    );
    const range =
      max === Number.MAX_SAFE_INTEGER
        ? min === Number.MIN_SAFE_INTEGER
          ? ''
          : ` >= ${min}`
        : ` from ${min} to ${max}`;
    throw new UsageError(
      `--${name}: expected an integer${range}, got ${JSON.stringify(value)} (write it in decimal digits, such as ${examples.join(' or ')})`,
    );
  }
  return parsed;
}

/**
 * parseArgs takes "-1" after a flag for another flag: a negative number right after a flag that
 * takes a number is joined to it (--total=-1), so that the range check names what was wrong.
 */
function joinNegativeNumbers(argv: readonly string[], numeric: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const next = argv[i + 1];
    if (numeric.has(arg) && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** What one row of an option table gives the command: typed, its default when omitted. */
type RowValue<R extends OptionRow> = R extends { kind: 'boolean' }
  ? boolean | undefined
  : R extends { kind: 'list' }
    ? string[] | undefined
    :
        | (R extends { kind: 'integer' | 'number' } ? number : string)
        | (R extends { default: number | string } ? never : undefined);

export type OptionValues<T extends readonly OptionRow[]> = {
  readonly [R in T[number] as R['name']]: RowValue<R>;
};

/**
 * A command line read through the command's option table: each flag as its row says (integers
 * and numbers checked, strings against their choices), an omitted one as its default.
 */
export function parseOptions<const T extends readonly OptionRow[]>(
  command: string,
  argv: string[],
  rows: T,
  allowPositionals = false,
): { values: OptionValues<T>; positionals: string[] } {
  const config: Options = {};
  for (const row of rows) {
    config[row.name] = {
      type: row.kind === 'boolean' ? 'boolean' : 'string',
      ...(row.kind === 'list' ? { multiple: true } : {}),
      ...(row.short === undefined ? {} : { short: row.short }),
    };
  }
  const numeric = new Set(
    rows.filter((row) => row.kind === 'integer' || row.kind === 'number').map((r) => `--${r.name}`),
  );
  // A flag whose value is optional, given alone, is its empty value (never the next word's).
  const optional = new Set(
    rows.filter((row) => row.optionalValue === true).map((r) => `--${r.name}`),
  );
  const given = joinNegativeNumbers(argv, numeric).map((arg) =>
    optional.has(arg) ? `${arg}=` : arg,
  );
  const { values, positionals } = parse(command, given, config, allowPositionals);
  const typed: Record<string, unknown> = {};
  for (const row of rows) {
    const given = values[row.name];
    typed[row.name] = given === undefined ? row.default : rowValue(row, given);
  }
  return { values: typed as OptionValues<T>, positionals };
}

function rowValue(row: OptionRow, given: string | boolean | (string | boolean)[]): unknown {
  if (typeof given !== 'string') return given;
  switch (row.kind) {
    case 'integer': {
      const value = integerFlag(row.name, given, row.min, row.max) as number;
      checkInteger(row.name, value, row.min ?? Number.MIN_SAFE_INTEGER, row.max);
      return value;
    }
    case 'number': {
      const value = numberFlag(row.name, given) as number;
      if (row.min !== undefined && value < row.min)
        throw new UsageError(`--${row.name}: expected a number >= ${row.min}, got ${given}`);
      return value;
    }
    default:
      if (row.choices !== undefined && !row.choices.includes(given)) {
        const last = row.choices.at(-1);
        const listed = `${row.choices.slice(0, -1).join(', ')} or ${last}`;
        throw new UsageError(`--${row.name}: expected ${listed}, got ${JSON.stringify(given)}`);
      }
      return given;
  }
}
