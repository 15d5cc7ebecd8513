import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { connectPublisher, type Publisher } from '../client/publisher.js';
import type { DoneStatus } from '../protocol/frames.js';
import { ENV_SOCKET, ENV_TOKEN, resolveSocketPath } from '../shared/locate.js';
import { parse, UsageError } from './args.js';
import type { Io } from './io.js';
import { stopTree } from './process-tree.js';
import { OutputScanner, type ParsedProgress, ProgressCombiner } from './progress-parser.js';

export const RUN_HELP = `Usage: mcp-progress run [--token T] [--parse] -- CMD [ARGS...]

Runs CMD with ${ENV_SOCKET} and ${ENV_TOKEN} set, so that a client inside it
(Python, Node, shell) publishes to the token. When CMD ends, run publishes
done: ok when it exited 0; cancelled when a cancel from the MCP side stopped
it, or SIGINT (Ctrl-C) killed it, as the Python client reports a
KeyboardInterrupt; error otherwise.

CMD runs in a session and process group of its own, and every signal run
sends goes to the whole group, so that the programs CMD started stop with it:
a cancel sends SIGTERM, and SIGKILL 10 s later if CMD is still running (and
at once to whatever CMD leaves behind in its group); SIGTERM, SIGHUP, SIGINT,
SIGQUIT, SIGUSR1 and SIGUSR2 sent to run are passed on. CMD reads and writes
run's terminal, but has no controlling terminal: Ctrl-C reaches run, which
passes it on, and a program that opens /dev/tty (a password prompt) cannot.
run says on stderr when a cancel stops CMD, and exits with CMD's exit code
(128 + N when a signal N killed it).

  --token T          the stream's token (default: $${ENV_TOKEN}; else a new
                     token is made and printed on stderr)
  --parse            also read CMD's stdout and stderr for progress and publish
                     it, so that an unmodified program reports progress: tqdm
                     bars (NN%|...| n/total, and "n it [..]"), n/total, NN%.
                     Nested bars count as the outer bar plus a fraction of the
                     inner one; a bar after a finished one counts on from it.
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

/** Signals run passes on to CMD's process group. */
const FORWARDED: NodeJS.Signals[] = [
  'SIGTERM',
  'SIGHUP',
  'SIGUSR1',
  'SIGUSR2',
  'SIGINT',
  'SIGQUIT',
];

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

export interface RunPlan {
  readonly file: string;
  readonly args: string[];
  readonly token: string;
  /** True when no token was given and run made this one (and says so). */
  readonly madeToken: boolean;
  readonly socketPath: string;
  readonly parseOutput: boolean;
}

/** What run's command line asks for: 'help', or the plan. Throws UsageError for a wrong one. */
export function planRun(
  argv: string[],
  env: Io['env'],
  newToken = () => `run-${randomBytes(6).toString('base64url')}`,
): RunPlan | 'help' {
  const split = splitCommand(argv);
  const { values } = parse('run', split.options, {
    token: { type: 'string' },
    parse: { type: 'boolean' },
    socket: { type: 'string' },
    'runtime-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return 'help';
  const [file, ...args] = split.command;
  if (file === undefined)
    throw new UsageError('no command: mcp-progress run [options] -- CMD [ARGS...]');
  if (values.token === '') throw new UsageError('--token: a token is a non-empty string');
  const given = values.token ?? env[ENV_TOKEN];
  const madeToken = given === undefined || given === '';
  const socketPath = resolveSocketPath(
    { socket: values.socket, runtimeDir: values['runtime-dir'] },
    env,
  );
  return {
    file,
    args,
    token: madeToken ? newToken() : given,
    madeToken,
    socketPath,
    parseOutput: values.parse === true,
  };
}

/** How CMD ended, as the child process reported it. */
export interface CommandEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly error?: Error | undefined;
}

/**
 * run's exit code and the done it publishes, from how CMD ended. One rule for
 * a stop on request, shared with the Python client: a cancel from the MCP side,
 * or SIGINT (Ctrl-C, a KeyboardInterrupt in Python), ends the stream cancelled.
 */
export function outcomeOf(
  file: string,
  ended: CommandEnd,
  cancelled: boolean,
): { exitCode: number; status: DoneStatus; message: string } {
  if (ended.error !== undefined) {
    const missing = (ended.error as NodeJS.ErrnoException).code === 'ENOENT';
    return {
      exitCode: missing ? 127 : 126,
      status: 'error',
      message: missing
        ? `command not found: ${file}`
        : `cannot run ${file}: ${ended.error.message}`,
    };
  }
  if (ended.signal !== null) {
    return {
      exitCode: 128 + (constants.signals[ended.signal] ?? 0),
      status: cancelled || ended.signal === 'SIGINT' ? 'cancelled' : 'error',
      message: `${file} was killed by ${ended.signal}`,
    };
  }
  const exitCode = ended.code ?? 1;
  return {
    exitCode,
    status: cancelled ? 'cancelled' : exitCode === 0 ? 'ok' : 'error',
    message: `${file} exited with code ${exitCode}`,
  };
}

/** Sends a signal to CMD's whole process group; a group that is gone already is no error. */
function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  if (process.platform === 'win32') {
    stopTree(child.pid);
    return;
  }
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: every process of the group has exited.
  }
}

/** True while some process of CMD's group is still running (CMD itself may have exited). */
function groupAlive(child: ChildProcess): boolean {
  // Windows: stopTree ended the whole tree at once.
  if (child.pid === undefined || process.platform === 'win32') return false;
  try {
    process.kill(-child.pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function runCommand(argv: string[], io: Io): Promise<number> {
  const plan = planRun(argv, io.env);
  if (plan === 'help') {
    io.out(RUN_HELP);
    return 0;
  }
  const { file, token } = plan;
  if (plan.madeToken)
    io.err(`mcp-progress run: token ${token} (watch it with: mcp-progress tail ${token})\n`);
  // Handlers go in first, before the connect and the spawn: until they exist, a signal would kill
  // run (or SIGUSR1 open the inspector), and CMD may run (and be signalled) before spawn() returns.
  const forwarding = new SignalForwarding();
  const publisher = await connectRunPublisher(plan, io);
  const child = startCommand(plan, io.env);
  forwarding.to(child);
  // The publisher claims the token when it connects, so a cancel reaches run with or without --parse.
  const cancel = stopOnCancel(publisher, child, file, io);
  if (plan.parseOutput) {
    const combiner = new ProgressCombiner();
    scanOutput(child, (reading, bar) => {
      const combined = combiner.push(reading, bar);
      if (combined !== undefined) publisher.update(combined);
    });
  }

  const ended = await new Promise<CommandEnd>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  forwarding.remove();
  cancel.settle();

  const outcome = outcomeOf(file, ended, cancel.cancelled);
  if (ended.error !== undefined) io.err(`mcp-progress run: ${outcome.message}\n`);
  else if (cancel.cancelled)
    io.err(`mcp-progress run: the cancel stopped ${file}: ${outcome.message}\n`);
  await publisher.done(outcome.status, outcome.status === 'ok' ? undefined : outcome.message);
  await publisher.close();
  return outcome.exitCode;
}

/**
 * Passes the signals run gets on to CMD's process group; those that come
 * before CMD exists are passed on once it does.
 */
class SignalForwarding {
  readonly #early: NodeJS.Signals[] = [];
  #child: ChildProcess | undefined;
  readonly #onSignal = (signal: NodeJS.Signals) => {
    if (this.#child === undefined) this.#early.push(signal);
    else signalGroup(this.#child, signal);
  };

  constructor() {
    for (const signal of FORWARDED) process.on(signal, this.#onSignal);
  }

  to(child: ChildProcess): void {
    this.#child = child;
    for (const signal of this.#early.splice(0)) signalGroup(child, signal);
  }

  remove(): void {
    for (const signal of FORWARDED) process.off(signal, this.#onSignal);
  }
}

function connectRunPublisher(plan: RunPlan, io: Io): Promise<Publisher> {
  const reported = new Set<string>();
  return connectPublisher({
    token: plan.token,
    socket: plan.socketPath,
    env: io.env,
    onError: (error) => {
      // The command's own client may end the stream first; that is not run's trouble.
      if (error.code === 'stream_closed' || reported.has(error.code)) return;
      reported.add(error.code);
      io.err(`mcp-progress run: ${error.message}\n`);
    },
  });
}

/**
 * Spawns CMD detached: in a session and process group of its own, so that a
 * signal to the group reaches what CMD started. CMD then has no controlling
 * terminal: it still reads and writes the terminal run was given, but Ctrl-C
 * reaches run alone, which passes it on.
 */
function startCommand(plan: RunPlan, env: Io['env']): ChildProcess {
  return spawn(plan.file, plan.args, {
    stdio: plan.parseOutput ? ['inherit', 'pipe', 'pipe'] : 'inherit',
    // Windows has no process groups (a detached child there gets a console of its own).
    detached: process.platform !== 'win32',
    env: { ...env, [ENV_SOCKET]: plan.socketPath, [ENV_TOKEN]: plan.token },
  });
}

/** On a cancel: SIGTERM to CMD's group, said on stderr, and SIGKILL after the grace. */
function stopOnCancel(
  publisher: Publisher,
  child: ChildProcess,
  file: string,
  io: Io,
): { readonly cancelled: boolean; settle(): void } {
  let cancelled = false;
  let killTimer: NodeJS.Timeout | undefined;
  publisher.onCancel((reason) => {
    if (cancelled) return;
    cancelled = true;
    const why = reason === undefined || reason === '' ? '' : ` (${reason})`;
    io.err(`mcp-progress run: cancelled from the MCP side${why}: stopping ${file} with SIGTERM\n`);
    signalGroup(child, 'SIGTERM');
    killTimer = setTimeout(() => {
      io.err(
        `mcp-progress run: ${file} still runs ${CANCEL_GRACE_MS / 1000} s after SIGTERM: SIGKILL\n`,
      );
      signalGroup(child, 'SIGKILL');
    }, CANCEL_GRACE_MS);
  });
  return {
    get cancelled() {
      return cancelled;
    },
    /** CMD ended: no SIGKILL for it; what it left behind in its group after a cancel gets one now. */
    settle() {
      clearTimeout(killTimer);
      if (cancelled && groupAlive(child)) signalGroup(child, 'SIGKILL');
    },
  };
}

/** Passes CMD's stdout and stderr through unchanged, and tells `found` the progress each shows. */
function scanOutput(child: ChildProcess, found: (reading: ParsedProgress, bar: boolean) => void) {
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
