/** Option tables: each command's flags, parsing and --help come from one table. */
import { describe, expect, it } from 'vitest';
import { parseOptions } from '../../src/cli/args.js';
import { DAEMON_COMMAND_OPTIONS, DAEMON_HELP } from '../../src/cli/daemon-command.js';
import { MCP_HELP, MCP_OPTIONS } from '../../src/cli/mcp-command.js';
import {
  NATS_PERMISSIONS_HELP,
  NATS_PERMISSIONS_OPTIONS,
} from '../../src/cli/nats-permissions-command.js';
import { PUBLISH_HELP, PUBLISH_OPTIONS } from '../../src/cli/publish-command.js';
import { RUN_HELP, RUN_OPTIONS, splitCommand } from '../../src/cli/run-command.js';
import { SCHEMA_HELP, SCHEMA_OPTIONS } from '../../src/cli/schema-command.js';
import { STATUS_HELP, STATUS_OPTIONS } from '../../src/cli/status-command.js';
import { TAIL_HELP, TAIL_OPTIONS } from '../../src/cli/tail-command.js';
import { DEFAULT_SOCKET_REQUEST_TIMEOUT_MS } from '../../src/shared/defaults.js';
import { BridgeError } from '../../src/shared/errors.js';
import { type OptionRow, optionsHelp } from '../../src/shared/option-table.js';

/** Each command, its table, its --help and the column its flags' help starts at. */
const COMMANDS: Array<[string, readonly OptionRow[], string, number]> = [
  ['daemon', DAEMON_COMMAND_OPTIONS, DAEMON_HELP, 27],
  ['mcp', MCP_OPTIONS, MCP_HELP, 25],
  ['nats-permissions', NATS_PERMISSIONS_OPTIONS, NATS_PERMISSIONS_HELP, 27],
  ['publish', PUBLISH_OPTIONS, PUBLISH_HELP, 23],
  ['run', RUN_OPTIONS, RUN_HELP, 21],
  ['schema', SCHEMA_OPTIONS, SCHEMA_HELP, 17],
  ['status', STATUS_OPTIONS, STATUS_HELP, 23],
  ['tail', TAIL_OPTIONS, TAIL_HELP, 23],
];

/** The message of what `run` throws. */
function thrown(run: () => unknown): BridgeError {
  try {
    run();
  } catch (error) {
    if (error instanceof BridgeError) return error;
    throw error;
  }
  throw new Error('nothing was thrown');
}

describe.each(COMMANDS)('mcp-progress %s', (command, rows, help, column) => {
  it('--help lists every flag of the table once, with its default, within 80 columns', () => {
    const flags = optionsHelp(rows, column);
    expect(help).toContain(flags);
    for (const row of rows) {
      const flag = row.short === undefined ? `--${row.name}` : `-${row.short}, --${row.name}`;
      // An optional value is written right after its flag: --parse[=NAME].
      expect(help.match(new RegExp(`^  ${flag}( |\\[|$)`, 'gm')), row.name).toHaveLength(1);
      if (typeof row.default === 'number' && row.shownDefault === undefined)
        expect(help).toContain(`default ${row.default}`);
    }
    expect(help).not.toContain('{default}');
    for (const line of flags.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
  });

  it('takes every flag of the table, and -h', () => {
    expect(parseOptions(command, ['-h'], rows).values.help).toBe(true);
    for (const row of rows) {
      const value =
        row.kind === 'integer' || row.kind === 'number'
          ? String(row.min ?? 0)
          : (row.choices?.[0] ?? 'x');
      const argv =
        row.kind === 'boolean'
          ? [`--${row.name}`]
          : row.optionalValue === true
            ? [`--${row.name}=${value}`]
            : [`--${row.name}`, value];
      expect(() => parseOptions(command, argv, rows), row.name).not.toThrow();
      // Alone, an optional value is its empty value, and the next word is not taken as it.
      if (row.optionalValue === true) {
        const alone = parseOptions(command, [`--${row.name}`], rows).values;
        expect(alone[row.name as keyof typeof alone], row.name).toBe('');
      }
    }
  });
});

describe('parseOptions', () => {
  it('gives integers and numbers as numbers, and an omitted flag its default', () => {
    const { values } = parseOptions(
      'publish',
      ['--progress', '2.5', '--total', '1e3'],
      PUBLISH_OPTIONS,
    );
    expect(values.progress).toBe(2.5);
    expect(values.total).toBe(1000);
    expect(values['timeout-ms']).toBe(DEFAULT_SOCKET_REQUEST_TIMEOUT_MS);
    expect(values.token).toBeUndefined();
    expect(parseOptions('status', ['--timeout-ms', '7'], STATUS_OPTIONS).values['timeout-ms']).toBe(
      7,
    );
  });

  it('refuses an integer out of its range with invalid_option, naming the flag and the range', () => {
    const below = thrown(() => parseOptions('status', ['--timeout-ms', '0'], STATUS_OPTIONS));
    expect(below.code).toBe('invalid_option');
    expect(below.message).toBe('option --timeout-ms: expected an integer >= 1, got 0');
    const above = thrown(() => parseOptions('mcp', ['--port', '65536'], MCP_OPTIONS));
    expect(above.message).toBe('option --port: expected an integer from 0 to 65535, got 65536');
  });

  it('refuses a value outside its choices as a usage error listing them', () => {
    const error = thrown(() => parseOptions('publish', ['--status', 'fine'], PUBLISH_OPTIONS));
    expect(error.code).toBe('usage');
    expect(error.message).toBe('--status: expected ok, error or cancelled, got "fine"');
  });

  it('gives a list flag every value, in order', () => {
    const { values } = parseOptions(
      'tail',
      ['--token-json', '7', '--token-json', '"a"'],
      TAIL_OPTIONS,
      true,
    );
    expect(values['token-json']).toEqual(['7', '"a"']);
  });

  it("run's command starts after its table's flags and their values", () => {
    expect(splitCommand(['--token', 't', '--parse', 'ninja', '-C', 'b'])).toEqual({
      options: ['--token', 't', '--parse'],
      command: ['ninja', '-C', 'b'],
    });
  });
});

describe('optionsHelp', () => {
  it('puts each flag under its section, wraps at 80 columns and breaks lines at \\n', () => {
    const help = optionsHelp(
      [
        {
          name: 'a',
          kind: 'integer',
          default: 3,
          section: 'One',
          help: 'first (default {default})',
        },
        { name: 'bee', kind: 'string', value: 'B', section: 'Two', help: 'line\nnext line' },
        { name: 'c', kind: 'boolean', section: 'One', help: 'word '.repeat(30).trim() },
      ],
      12,
    );
    const lines = help.split('\n');
    expect(lines.slice(0, 2)).toEqual(['One:', '  --a N     first (default 3)']);
    expect(lines[2]).toMatch(/^ {2}--c {7}word/);
    expect(help).toContain('Two:\n  --bee B   line\n            next line\n');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
  });
});
