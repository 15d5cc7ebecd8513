import { fitMessage } from '../client/publisher.js';
import type { DoneStatus, ProgressToken } from '../protocol/frames.js';
import { DEFAULT_DONE_STATUS, MAX_MESSAGE_BYTES, PROTOCOL_VERSION } from '../protocol/limits.js';
import { ENV_TOKEN, locateSocketPath } from '../shared/locate.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { socketRequest } from '../shared/socket-request.js';
import { parseOptions, UsageError } from './args.js';
import { socketRequestRows } from './common-options.js';
import type { Io } from './io.js';

/**
 * The done statuses, checked here without the zod schema: loading zod would cost each publish in
 * a shell loop about a tenth of a second. The type keeps the list equal to the protocol's.
 */
const DONE_STATUSES = ['ok', 'error', 'cancelled'] as const satisfies readonly DoneStatus[];
const allStatusesListed: Exclude<DoneStatus, (typeof DONE_STATUSES)[number]> extends never
  ? true
  : false = true;
void allStatusesListed;

/** Every flag of publish: its parsing, checks and --help are read from here. */
export const PUBLISH_OPTIONS = [
  {
    name: 'token',
    kind: 'string',
    value: 'T',
    section: 'Token (one of)',
    help: 'a string token (always a string, even "7")',
  },
  {
    name: 'token-json',
    kind: 'string',
    value: 'JSON',
    section: 'Token (one of)',
    help: `a JSON string or safe integer: --token-json 7 sends the\ninteger 7 (default: $${ENV_TOKEN}, as a string)`,
  },
  {
    name: 'progress',
    kind: 'number',
    section: 'Fields',
    help: 'progress value; must exceed the last (omitted: last + 1);\nwrite a negative value as --progress=-5',
  },
  // The protocol's rule (a total is >= 0), checked before the daemon is asked.
  { name: 'total', kind: 'number', min: 0, section: 'Fields', help: 'total, if known (>= 0)' },
  {
    name: 'message',
    kind: 'string',
    value: 'S',
    section: 'Fields',
    help: `human-readable message (over ${MAX_MESSAGE_BYTES} UTF-8 bytes: cut to fit, ending "...", as the clients do)`,
  },
  {
    name: 'meta',
    kind: 'string',
    value: 'JSON',
    section: 'Fields',
    help: 'a JSON object forwarded as _meta',
  },
  {
    name: 'done',
    kind: 'boolean',
    section: 'Fields',
    help: 'end the stream instead (with --status and --message)',
  },
  {
    name: 'status',
    kind: 'string',
    value: 'S',
    choices: DONE_STATUSES,
    section: 'Fields',
    help: `ok, error or cancelled (default ${DEFAULT_DONE_STATUS}; only with --done)`,
  },
  ...socketRequestRows('Where'),
  helpRow('Where'),
] as const satisfies readonly OptionRow[];

export const PUBLISH_HELP = `Usage: mcp-progress publish [--token T | --token-json JSON] [fields] [--done [--status S]]

Sends one progress (or done) frame to the daemon and waits for its answer:
exit 0 when it is accepted, 1 with the daemon's message when it is rejected
or the daemon cannot be reached, 2 when the command line is wrong.

${optionsHelp(PUBLISH_OPTIONS, 23)}
Examples:
  mcp-progress publish --token render-1 --progress 40 --total 100 --message "frame 40"
  mcp-progress publish --token-json 7 --progress 1
  mcp-progress publish --token render-1 --done --status ok
`;

export async function publishCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseOptions('publish', argv, PUBLISH_OPTIONS);
  if (values.help) {
    io.out(PUBLISH_HELP);
    return 0;
  }
  const token = tokenFrom(values.token, values['token-json'], io.env[ENV_TOKEN]);
  const seq = 1;
  let type: 'progress' | 'done';
  const data: Record<string, unknown> = { v: PROTOCOL_VERSION, progressToken: token };
  if (values.done) {
    type = 'done';
    for (const flag of ['progress', 'total', 'meta'] as const) {
      if (values[flag] !== undefined)
        throw new UsageError(
          `--${flag} does not go with --done: a done frame has status and message only`,
        );
    }
    if (values.status !== undefined) data.status = values.status;
  } else {
    type = 'progress';
    if (values.status !== undefined) throw new UsageError('--status goes with --done');
    if (values.progress !== undefined) data.progress = values.progress;
    if (values.total !== undefined) data.total = values.total;
    if (values.meta !== undefined) data._meta = metaFlag(values.meta);
  }
  if (values.message !== undefined) data.message = fitMessage(values.message);
  data.seq = seq;
  const socketPath = await locateSocketPath(
    { socket: values.socket, runtimeDir: values['runtime-dir'] },
    io.env,
  );
  const reply = await socketRequest({
    socketPath,
    type,
    data,
    isReply: (envelope) =>
      (envelope.type === 'ack' || envelope.type === 'rejected') &&
      typeof envelope.data === 'object' &&
      envelope.data !== null &&
      ((envelope.data as { seq?: unknown }).seq === seq || envelope.type === 'rejected'),
    timeoutMs: values['timeout-ms'],
  });
  if (reply.type === 'ack') return 0;
  const rejection = reply.data as { code?: string; message?: string };
  io.err(`mcp-progress publish: rejected (${rejection.code}): ${rejection.message}\n`);
  return 1;
}

function tokenFrom(
  text: string | undefined,
  json: string | undefined,
  fromEnv: string | undefined,
): ProgressToken {
  if (text !== undefined && json !== undefined)
    throw new UsageError('give --token or --token-json, not both');
  if (text === '') throw new UsageError('--token: a token is a non-empty string');
  if (text !== undefined) return text;
  if (json !== undefined) {
    const value = jsonFlag('token-json', json);
    // 1.5 would be refused by the daemon, and 1e999 parses to Infinity, which JSON sends as null.
    if (typeof value !== 'string' && !Number.isSafeInteger(value)) {
      throw new UsageError(
        `--token-json: a token is a JSON string or integer (a safe integer, at most 2^53 - 1 either side of 0), got ${json}`,
      );
    }
    if (value === '') throw new UsageError('--token-json: a token is a non-empty string');
    return value as ProgressToken;
  }
  if (fromEnv) return fromEnv;
  throw new UsageError(`no token: pass --token T (or --token-json JSON), or set ${ENV_TOKEN}`);
}

function jsonFlag(name: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`--${name}: expected JSON, got ${JSON.stringify(text)}`);
  }
}

function metaFlag(text: string): Record<string, unknown> {
  const value = jsonFlag('meta', text);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError(`--meta: expected a JSON object such as {"step":"encode"}, got ${text}`);
  return value as Record<string, unknown>;
}
