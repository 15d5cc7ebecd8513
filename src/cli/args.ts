/** Flag parsing shared by the commands: strict, with errors a person can act on. */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { BridgeError } from '../shared/errors.js';

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

export function integerFlag(name: string, value: string | undefined): number | undefined {
  const parsed = numberFlag(name, value);
  if (parsed !== undefined && !Number.isInteger(parsed)) {
    throw new UsageError(`--${name}: expected an integer, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
