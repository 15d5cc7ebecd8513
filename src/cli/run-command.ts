import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { connectPublisher } from '../client/publisher.js';
import type { DoneStatus } from '../protocol/frames.js';
import { ENV_SOCKET, ENV_TOKEN, resolveSocketPath } from '../shared/locate.js';
import { parse, UsageError } from './args.js';
import type { Io } from './io.js';
import { OutputScanner, type ParsedProgress } from './progress-parser.js';

export const RUN_HELP = `Usage: mcp-progress run [--token T] [--parse] -- CMD [ARGS...]

Runs CMD with ${ENV_SOCKET} and ${ENV_TOKEN} set, so that a client inside it
(Python, Node, shell) publishes to the token. When CMD ends, run publishes
done: ok when it exited 0, error otherwise, cancelled when a cancel from the
MCP side stopped it (a cancel sends CMD SIGTERM, and SIGKILL 10 s later if it
is still running). run exits with CMD's exit code (128 + N when a signal N
killed it), forwards SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 to CMD, and SIGINT
and SIGQUIT too unless run's stdin is a terminal (the terminal already sent
them to CMD).

  --token T          the stream's token (default: $${ENV_TOKEN}; else a new
                     token is made and printed on stderr)
  --parse            also read CMD's stdout and stderr for progress and publish
                     it, so that an unmodified program reports progress: tqdm
                     bars (NN%|...| n/total, and "n it [..]"), n/total, NN%.
                     The output passes through unchanged.
  --socket PATH      daemon socket (default: $${ENV_SOCKET}, else the default
                     socket of the runtime dir)
  --runtime-dir DIR  find the default socket in DIR
  -h, --help         show this help

If no daemon is running, CMD runs all the same and run says so once.
If CMD ended the stream itself (its client sent done), run's done is skipped.

Examples:
  mcp-progress run -- python3 train.py --epochs 10
  mcp-progress run --token build-7 --parse -- ninja -C build
`;

/** Flags of run that take a value: the command starts at the first word that is neither a flag nor such a value. */
const VALUE_FLAGS = new Set(['--token', '--socket', '--runtime-dir']);

/** Signals run passes on to CMD. SIGINT and SIGQUIT only when they did not come from run's terminal. */
const FORWARDED: NodeJS.Signals[] = [
  'SIGTERM',
  'SIGHUP',
  'SIGUSR1',
  'SIGUSR2',
  'SIGINT',
  'SIGQUIT',
];
const TERMINAL_SIGNALS = new Set<NodeJS.Signals>(['SIGINT', 'SIGQUIT']);

/** How long a cancelled command gets between SIGTERM and SIGKILL. */
const CANCEL_GRACE_MS = 10_000;
/** How long output must pause before a half-written line is read for progress. */
const QUIET_MS = 50;

export function splitCommand(argv: string[]): { options: string[]; command: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') return { options: argv.slice(0, i), command: argv.slice(i + 1) };
    if (!arg.startsWith('-')) return { options: argv.slice(0, i), command: argv.slice(i) };
    if (VALUE_FLAGS.has(arg)) i++;
  }
  return { options: argv, command: [] };
}

export async function runCommand(argv: string[], io: Io): Promise<number> {
  const split = splitCommand(argv);
  const { values } = parse('run', split.options, {
    token: { type: 'string' },
    parse: { type: 'boolean' },
    socket: { type: 'string' },
    'runtime-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    io.out(RUN_HELP);
    return 0;
  }
  const [file, ...args] = split.command;
  if (file === undefined)
    throw new UsageError('no command: mcp-progress run [options] -- CMD [ARGS...]');
  if (values.token === '') throw new UsageError('--token: a token is a non-empty string');
  let token = values.token ?? io.env[ENV_TOKEN];
  if (token === undefined || token === '') {
    token = `run-${randomBytes(6).toString('base64url')}`;
    io.err(`mcp-progress run: token ${token} (watch it with: mcp-progress tail ${token})\n`);
  }
  const socketPath = resolveSocketPath(
    { socket: values.socket, runtimeDir: values['runtime-dir'] },
    io.env,
  );
  // Handlers go in first, before the connect and the spawn: until they exist, a signal would kill
  // run (or SIGUSR1 open the inspector), and CMD may run (and be signalled) before spawn() returns.
  // What comes before CMD exists is passed on to it once it does.
  const interactive = process.stdin.isTTY === true;
  const early: NodeJS.Signals[] = [];
  let forward = (signal: NodeJS.Signals) => {
    if (!(interactive && TERMINAL_SIGNALS.has(signal))) early.push(signal);
  };
  const onSignal = (signal: NodeJS.Signals) => forward(signal);
  for (const signal of FORWARDED) process.on(signal, onSignal);

  const reported = new Set<string>();
  const publisher = await connectPublisher({
    token,
    socket: socketPath,
    env: io.env,
    onError: (error) => {
      // The command's own client may end the stream first; that is not run's trouble.
      if (error.code === 'stream_closed' || reported.has(error.code)) return;
      reported.add(error.code);
      io.err(`mcp-progress run: ${error.message}\n`);
    },
  });

  const parseOutput = values.parse === true;
  const child = spawn(file, args, {
    stdio: parseOutput ? ['inherit', 'pipe', 'pipe'] : 'inherit',
    env: { ...io.env, [ENV_SOCKET]: socketPath, [ENV_TOKEN]: token },
  });
  forward = (signal) => {
    if (interactive && TERMINAL_SIGNALS.has(signal)) return;
    child.kill(signal);
  };
  for (const signal of early.splice(0)) child.kill(signal);

  // The publisher claims the token when it connects, so a cancel reaches run with or without --parse.
  let cancelled = false;
  let killTimer: NodeJS.Timeout | undefined;
  publisher.onCancel(() => {
    cancelled = true;
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), CANCEL_GRACE_MS);
  });
  if (parseOutput) {
    let last: number | undefined;
    const found = (progress: ParsedProgress) => {
      if (last !== undefined && !(progress.progress > last)) return;
      last = progress.progress;
      publisher.update(progress);
    };
    for (const [stream, target] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const) {
      // Each stream has its own line, decoder and pause: a half line on one never joins the other's.
      const scanner = new OutputScanner(found);
      const decoder = new StringDecoder('utf8');
      let quietTimer: NodeJS.Timeout | undefined;
      // If our reader goes away (EPIPE), CMD's output is still drained, so that CMD never blocks on it.
      target.on('error', () => stream?.resume());
      stream?.pipe(target, { end: false });
      stream?.on('data', (chunk: Buffer) => {
        scanner.push(decoder.write(chunk));
        clearTimeout(quietTimer);
        if (scanner.hasPending) quietTimer = setTimeout(() => scanner.quiet(), QUIET_MS);
      });
      stream?.on('end', () => {
        clearTimeout(quietTimer);
        scanner.push(`${decoder.end()}\n`);
      });
    }
  }

  const ended = await new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    error?: Error;
  }>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  for (const signal of FORWARDED) process.off(signal, onSignal);
  clearTimeout(killTimer);

  let exitCode: number;
  let status: DoneStatus;
  let message: string;
  if (ended.error !== undefined) {
    const missing = (ended.error as NodeJS.ErrnoException).code === 'ENOENT';
    exitCode = missing ? 127 : 126;
    status = 'error';
    message = missing ? `command not found: ${file}` : `cannot run ${file}: ${ended.error.message}`;
    io.err(`mcp-progress run: ${message}\n`);
  } else if (ended.signal !== null) {
    exitCode = 128 + (constants.signals[ended.signal] ?? 0);
    status = cancelled ? 'cancelled' : 'error';
    message = `${file} was killed by ${ended.signal}`;
  } else {
    exitCode = ended.code ?? 1;
    status = cancelled ? 'cancelled' : exitCode === 0 ? 'ok' : 'error';
    message = `${file} exited with code ${exitCode}`;
  }
  await publisher.done(status, status === 'ok' ? undefined : message);
  await publisher.close();
  return exitCode;
}
