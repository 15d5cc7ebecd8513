/**
 * The defaults a user reads: what each command's real --help prints is the constant of
 * src/shared/defaults.ts (or src/protocol/limits.ts), and where README.md and docs/ quote a flag's
 * default, they quote what --help prints. A constant changed without the docs fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DONE_STATUS, FRAME_TIMEOUT_MS } from '../../src/protocol/limits.js';
import {
  DEFAULT_ABANDON_GRACE_MS,
  DEFAULT_DAEMON_LOG_LEVEL,
  DEFAULT_GATEWAY_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_MAX_CLAIMS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_JOURNAL_BYTES,
  DEFAULT_MAX_PENDING_CONNECTIONS,
  DEFAULT_MAX_SESSION_BUFFER_BYTES,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_CONNECTION,
  DEFAULT_MAX_SUBSCRIBE_ALL,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_MCP_LOG_LEVEL,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_NATS_PREFIX,
  DEFAULT_PING_INTERVAL_MS,
  DEFAULT_PONG_TIMEOUT_MS,
  DEFAULT_PORT,
  DEFAULT_RETENTION_MS,
  DEFAULT_SOCKET_REQUEST_TIMEOUT_MS,
  DEFAULT_STREAM_TTL_MS,
  DEFAULT_TAIL_LINES_INTERVAL_MS,
  PAGE_COOKIE_TTL_MS,
  PAGE_SESSION_MAX_MS,
} from '../../src/shared/defaults.js';
import { ROOT, runCli } from '../helpers/daemon.js';

/** Each command's flags that print a default, and the constant each prints. */
const EXPECTED: Record<string, Record<string, number | string>> = {
  daemon: {
    host: DEFAULT_HOST,
    port: DEFAULT_PORT,
    'max-connections': DEFAULT_MAX_CONNECTIONS,
    'max-sessions': DEFAULT_MAX_SESSIONS,
    'max-streams': DEFAULT_MAX_STREAMS,
    'max-streams-per-connection': DEFAULT_MAX_STREAMS_PER_CONNECTION,
    'max-claims': DEFAULT_MAX_CLAIMS,
    'max-subscriptions': DEFAULT_MAX_SUBSCRIPTIONS,
    'max-subscribe-all': DEFAULT_MAX_SUBSCRIBE_ALL,
    'max-session-buffer-bytes': DEFAULT_MAX_SESSION_BUFFER_BYTES,
    'max-journal-bytes': DEFAULT_MAX_JOURNAL_BYTES,
    'max-pending-connections': DEFAULT_MAX_PENDING_CONNECTIONS,
    'min-interval-ms': DEFAULT_MIN_INTERVAL_MS,
    'retention-ms': DEFAULT_RETENTION_MS,
    'ttl-ms': DEFAULT_STREAM_TTL_MS,
    'abandon-grace-ms': DEFAULT_ABANDON_GRACE_MS,
    'frame-timeout-ms': FRAME_TIMEOUT_MS,
    'handshake-timeout-ms': DEFAULT_GATEWAY_HANDSHAKE_TIMEOUT_MS,
    'ping-interval-ms': DEFAULT_PING_INTERVAL_MS,
    'pong-timeout-ms': DEFAULT_PONG_TIMEOUT_MS,
    'page-cookie-ms': PAGE_COOKIE_TTL_MS,
    'page-session-ms': PAGE_SESSION_MAX_MS,
    'nats-prefix': DEFAULT_NATS_PREFIX,
    'log-level': DEFAULT_DAEMON_LOG_LEVEL,
  },
  mcp: {
    port: DEFAULT_PORT,
    'min-interval-ms': DEFAULT_MIN_INTERVAL_MS,
    'log-level': DEFAULT_MCP_LOG_LEVEL,
  },
  tail: { 'min-interval-ms': DEFAULT_MIN_INTERVAL_MS },
  publish: { status: DEFAULT_DONE_STATUS, 'timeout-ms': DEFAULT_SOCKET_REQUEST_TIMEOUT_MS },
  status: { 'timeout-ms': DEFAULT_SOCKET_REQUEST_TIMEOUT_MS },
  'nats-permissions': { 'nats-prefix': DEFAULT_NATS_PREFIX },
};

/** The words of a duration or size as --help and the docs write them, in ms or bytes. */
const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  min: 60_000,
  h: 3_600_000,
  day: 86_400_000,
  days: 86_400_000,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
};

/** "30000", "8 MiB", "30 s", "`mcp-progress`", "**60 s**": the value, a number when it is one. */
function amountOf(text: string): number | string {
  const plain = text.replace(/[*`]/g, '').trim();
  const measured = /^(\d+(?:\.\d+)?) ?([A-Za-z]+)$/.exec(plain);
  if (measured !== null && UNITS[measured[2] as string] !== undefined)
    return Number(measured[1]) * (UNITS[measured[2] as string] as number);
  return /^\d+$/.test(plain) ? Number(plain) : plain;
}

/** Each flag of a --help and its help text, its wrapped lines joined. */
function flagsOf(help: string): Map<string, string> {
  const flags = new Map<string, string>();
  let current: string | undefined;
  for (const line of help.split('\n')) {
    const flag = /^ {2}(?:-\w, )?--([a-z-]+)(.*)$/.exec(line);
    if (flag !== null) {
      current = flag[1] as string;
      flags.set(current, (flag[2] as string).trim());
    } else if (current !== undefined && /^ {3,}\S/.test(line))
      flags.set(current, `${flags.get(current)} ${line.trim()}`.trim());
    else current = undefined;
  }
  return flags;
}

/** "(default 7717; ...)", "(default: 127.0.0.1)", "(default 8388608 = 8 MiB; ...)": the value, and what follows " = ". */
function printedDefault(text: string): { value: string; shown?: string } | undefined {
  const found = /\(default:? ([^;,)]+)/.exec(text)?.[1];
  if (found === undefined) return undefined;
  const [value, shown] = found.split(' = ');
  return { value: value as string, ...(shown === undefined ? {} : { shown }) };
}

const helps = new Map<string, string>();

beforeAll(async () => {
  const top = await runCli(['--help']);
  expect(top.code).toBe(0);
  const commands = top.stdout
    .slice(top.stdout.indexOf('Commands:'))
    .split('\n')
    .slice(1)
    .map((line) => /^ {2}([a-z-]+) {2,}/.exec(line)?.[1])
    .filter((name) => name !== undefined);
  expect(commands.length).toBeGreaterThan(8);
  for (const command of commands) {
    const help = await runCli([command, '--help']);
    expect(help.code, command).toBe(0);
    helps.set(command, help.stdout);
  }
}, 60_000);

describe('--help of every command', () => {
  it('prints each default as its constant', () => {
    expect([...helps.keys()]).toEqual(expect.arrayContaining(Object.keys(EXPECTED)));
    const printed: Record<string, Record<string, number | string>> = {};
    for (const [command, help] of helps) {
      for (const [flag, text] of flagsOf(help)) {
        const found = printedDefault(text);
        // A default that is a rule ($MCP_PROGRESS_SOCKET, else ...; user@host) is no constant.
        if (found === undefined || /^[$<]|user@host|as the daemon's/.test(found.value)) continue;
        const value = amountOf(found.value);
        // "8388608 = 8 MiB" says the same number twice.
        if (found.shown !== undefined)
          expect(amountOf(found.shown), `${command} --${flag}`).toBe(value);
        printed[command] = { ...printed[command], [flag]: value };
      }
    }
    expect(printed).toEqual(EXPECTED);
    // tail's second default, for plain lines.
    expect(flagsOf(helps.get('tail') ?? '').get('min-interval-ms')).toContain(
      `for plain lines ${DEFAULT_TAIL_LINES_INTERVAL_MS})`,
    );
  });
});

describe('README.md and docs/', () => {
  const files = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `docs/${name}`),
  ];
  /** A flag in backquotes, then within a few words "(default X": what the docs say it is. */
  const quoted = files.flatMap((file) => {
    const text = readFileSync(join(ROOT, file), 'utf8').replace(/\s+/g, ' ');
    return [
      ...text.matchAll(/`--([a-z-]+)`[^`(]{0,40}\(default:? ((?:\*\*|`)?[^;,)*`]+(?:\*\*|`)?)/g),
    ].map((match) => ({ file, flag: match[1] as string, text: match[2] as string }));
  });

  it('quote the default --help prints wherever they give a flag one', () => {
    // The flags the docs give defaults to are the daemon's (mcp's --log-level has another).
    const daemonFlags = flagsOf(helps.get('daemon') ?? '');
    const quotes = quoted.filter(({ flag }) => daemonFlags.has(flag));
    expect(quotes.length).toBeGreaterThan(15);
    for (const { file, flag, text } of quotes) {
      const printed = printedDefault(daemonFlags.get(flag) ?? '');
      expect(printed, `${file}: --${flag} has no default in daemon --help`).toBeDefined();
      expect(amountOf(text), `${file}: --${flag} (default ${text})`).toBe(
        amountOf(printed?.value ?? ''),
      );
    }
  });
});
