import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { connectPublisher, type Publisher } from '../client/publisher.js';
import type { DoneStatus } from '../protocol/frames.js';
import {
  RUN_BACKGROUND_OUTPUT_MS,
  RUN_CANCEL_GRACE_MS,
  RUN_OUTPUT_QUIET_MS,
} from '../shared/defaults.js';
import { ENV_SOCKET, ENV_TOKEN, resolveSocketPath } from '../shared/locate.js';
import { helpRow, type OptionRow, optionsHelp, wrapWords } from '../shared/option-table.js';
import { parseOptions, UsageError } from './args.js';
import type { Io } from './io.js';
import { type DrainedPipe, drainAfterExit, RUN_DRAIN_TIMING } from './output-drain.js';
import { stopTree } from './process-tree.js';
import { OutputProgress, type OutputSource } from './progress-parser.js';
import {
  detectProfile,
  GENERIC_PROFILE,
  PROFILE_NAMES,
  PROFILES,
  type ProgressProfile,
  profileNamed,
  suggestProfile,
  toolArguments,
} from './progress-profiles.js';

export const RUN_OPTIONS = [
  {
    name: 'token',
    kind: 'string',
    value: 'T',
    help: `the stream's token (default: $${ENV_TOKEN}; else a new token is made and printed on stderr)`,
  },
  {
    name: 'parse',
    // --parse alone (""), or --parse=NAME.
    kind: 'string',
    value: 'NAME',
    optionalValue: true,
    help: 'also read CMD\'s stdout and stderr for progress and publish it, so that an unmodified program reports progress. The output passes through unchanged. NAME is a profile (below); --parse alone chooses one by CMD\'s name, else the generic reader. Behind sh -c "TOOL ARGS", a named profile reads the words after TOOL as its arguments. When CMD writes output and none of it is progress, run says so once on stderr, naming a profile to try.',
  },
  {
    name: 'socket',
    kind: 'string',
    value: 'PATH',
    help: `daemon socket (default: $${ENV_SOCKET}, else the default socket of the runtime dir)`,
  },
  { name: 'runtime-dir', kind: 'string', value: 'DIR', help: 'find the default socket in DIR' },
  helpRow(),
] as const satisfies readonly OptionRow[];

export const RUN_HELP = `Usage: mcp-progress run [--token T] [--parse[=NAME]] -- CMD [ARGS...]

Runs CMD with ${ENV_SOCKET} and ${ENV_TOKEN} set, so that a client inside it
(Python, Node, shell) publishes to the token. When CMD ends, run publishes
done: ok when it exited 0; cancelled when a cancel from the MCP side stopped
it, or SIGINT (Ctrl-C) killed it, as the Python client reports a
KeyboardInterrupt; error otherwise.

CMD runs in a session and process group of its own, and every signal run
sends goes to the whole group, so that the programs CMD started stop with it:
a cancel sends SIGTERM, and SIGKILL ${RUN_CANCEL_GRACE_MS / 1000} s later if CMD is still running (and
at once to whatever CMD leaves behind in its group); SIGTERM, SIGHUP, SIGINT,
SIGQUIT, SIGUSR1 and SIGUSR2 sent to run are passed on. CMD reads and writes
run's terminal, but has no controlling terminal: Ctrl-C reaches run, which
passes it on, and a program that opens /dev/tty (a password prompt) cannot.
run says on stderr when a cancel stops CMD, and exits with CMD's exit code
(128 + N when a signal N killed it).

${optionsHelp(RUN_OPTIONS, 21)}
Profiles (--parse=NAME; chosen by the command names in brackets):
${profileHelp()}

The generic reader ignores a ratio inside a word or after = or : (SAR=1/1,
time_base=1/30, spatial:99.4%), dates (12/05/2024), a percentage beside
another one or with more than two decimals (statistics), numbers after a
word such as CPU, memory, overhead, loss, accuracy, ratio, fps or time base,
library log lines ([libx264 @ 0x...]), and a line of text already at its
total (1/1, 100%) unless that total was seen below it. Nested bars count as
the outer bar plus a fraction of the inner one; a count without a total
drawn below another count (tqdm's nested bars, position=1) adds nothing: the
outer count is the value. A bar after a finished one, or a count without a
total after another, counts on from it in the same unit, and weighs as much
as it in another.

If no daemon is running, CMD runs all the same and run says so once.
If CMD ended the stream itself (its client sent done), run's done is skipped.
run ends when CMD exits, not when what CMD left running in the background
does. With --parse, it first passes on every byte CMD wrote, however slowly
its own output is read. A program CMD left running shares CMD's stdout and
stderr: what it writes is passed on (and read for progress) until it closes
them, until they stay quiet ${RUN_OUTPUT_QUIET_MS / 1000} s, or for ${RUN_BACKGROUND_OUTPUT_MS / 1000} s at most once CMD's output
is through. Then run closes them and ends: the program's later output is
lost (and a write may kill it with SIGPIPE): redirect it (server > log 2>&1 &).

Examples:
  mcp-progress run -- python3 train.py --epochs 10
  mcp-progress run --token build-7 --parse -- ninja -C build
  mcp-progress run --parse -- ffmpeg -i in.mov -c:v libx264 out.mp4
  mcp-progress run --parse=ninja -- ./build.sh
`;

/** The profiles for run's help: name, the commands that choose it, what it reads; wrapped at 79 columns. */
function profileHelp(): string {
  return [...PROFILES, GENERIC_PROFILE]
    .map((profile) => {
      const commands = profile.commands.length === 0 ? '' : ` [${profile.commands.join(', ')}]`;
      const [first, ...rest] = wrapWords(`${profile.name}${commands}: ${profile.reads}`, 75, 77);
      return [`  ${first}`, ...rest.map((line) => `    ${line}`)].join('\n');
    })
    .join('\n');
}

/** Flags of run that take a value: the command starts at the first word that is neither a flag nor such a value. */
const VALUE_FLAGS: ReadonlySet<string> = new Set(
  RUN_OPTIONS.filter(
    // --parse takes its value only as --parse=NAME, never as the next word.
    (row) => row.kind !== 'boolean' && !('optionalValue' in row && row.optionalValue),
  ).map((row) => `--${row.name}`),
);

/** Signals run passes on to CMD's process group. */
const FORWARDED: NodeJS.Signals[] = [
  'SIGTERM',
  'SIGHUP',
  'SIGUSR1',
  'SIGUSR2',
  'SIGINT',
  'SIGQUIT',
];

/** How long output must pause before a half-written line is read for progress. */
const QUIET_MS = 50;
/** How long CMD may write output in which --parse finds nothing before run says so (once). */
const NOTHING_FOUND_NOTICE_MS = 10_000;

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
  /** `--parse=NAME`: the profile to read the output with; undefined: chosen by CMD's name. */
  readonly parseProfile: string | undefined;
}

/** What run's command line asks for: 'help', or the plan. Throws UsageError for a wrong one. */
export function planRun(
  argv: string[],
  env: Io['env'],
  newToken = () => `run-${randomBytes(6).toString('base64url')}`,
): RunPlan | 'help' {
  const split = splitCommand(argv);
  // --parse alone ("") chooses the profile by CMD's name; --parse=NAME names it.
  const { values } = parseOptions('run', split.options, RUN_OPTIONS);
  if (values.help) return 'help';
  const [file, ...args] = split.command;
  if (file === undefined)
    throw new UsageError('no command: mcp-progress run [options] -- CMD [ARGS...]');
  if (values.token === '') throw new UsageError('--token: a token is a non-empty string');
  const profile = values.parse === '' ? undefined : values.parse;
  if (profile !== undefined && profileNamed(profile) === undefined)
    throw new UsageError(
      `--parse=${profile}: no such profile (profiles: ${PROFILE_NAMES.join(', ')}; --parse alone chooses by the command's name)`,
    );
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
    parseOutput: values.parse !== undefined,
    parseProfile: profile,
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
  const parsing = plan.parseOutput ? parsingOf(plan) : undefined;
  const child = startCommand(plan, io.env, parsing);
  forwarding.to(child);
  // The publisher claims the token when it connects, so a cancel reaches run with or without --parse.
  const cancel = stopOnCancel(publisher, child, file, io);
  const reading =
    parsing === undefined
      ? undefined
      : readOutput(child, parsing, (value) => publisher.update(value), io, file);

  const ended = await new Promise<CommandEnd>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    // 'exit', not 'close': 'close' waits until every copy of CMD's stdout and stderr is closed,
    // and a program CMD left running in the background (a server) holds them open as it runs.
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  forwarding.remove();
  cancel.settle();
  await reading?.drained();
  reading?.ended();

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
      // No daemon from start to end: the line that said so at the start says it all.
      const neverReached =
        reported.has('daemon_not_running') && !reported.has('daemon_disconnected');
      if (error.code === 'daemon_unreachable' && neverReached) return;
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
function startCommand(plan: RunPlan, env: Io['env'], parsing: Parsing | undefined): ChildProcess {
  return spawn(plan.file, parsing?.args ?? plan.args, {
    stdio:
      parsing === undefined
        ? 'inherit'
        : ['inherit', 'pipe', 'pipe', ...(parsing.piped ? (['pipe'] as const) : [])],
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
        `mcp-progress run: ${file} still runs ${RUN_CANCEL_GRACE_MS / 1000} s after SIGTERM: SIGKILL\n`,
      );
      signalGroup(child, 'SIGKILL');
    }, RUN_CANCEL_GRACE_MS);
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

/** How run reads CMD's output: the profile, and the arguments CMD runs with (a progress pipe added). */
export interface Parsing {
  readonly profile: ProgressProfile;
  /** Named with --parse=NAME, or chosen by CMD's name; false: the generic reader, as nothing chose. */
  readonly chosen: boolean;
  readonly args: string[];
  /** What the reader takes for the tool's arguments (those after its name in `sh -c "..."`). */
  readonly toolArgs: readonly string[];
  /** CMD writes a progress stream on fd 3 (ffmpeg -progress pipe:3, apt-get's APT::Status-Fd=3). */
  readonly piped: boolean;
}

export function parsingOf(plan: Pick<RunPlan, 'file' | 'args' | 'parseProfile'>): Parsing {
  const named = plan.parseProfile === undefined ? undefined : profileNamed(plan.parseProfile);
  const detected = detectProfile(plan.file, plan.args);
  const profile = named ?? detected ?? GENERIC_PROFILE;
  // The pipe's arguments are the tool's own: only when CMD is the tool itself, not `sh -c "ffmpeg ..."`
  // or `sudo apt-get` (sudo closes fd 3 anyway).
  const piped = detected === profile ? profile.withProgressPipe?.(plan.args) : undefined;
  return {
    profile,
    chosen: profile !== GENERIC_PROFILE || named !== undefined,
    args: piped ?? plan.args,
    toolArgs: piped ?? toolArguments(profile, plan.file, plan.args),
    piped: piped !== undefined,
  };
}

/** The one line run says when CMD's output showed no progress (yet). */
export function nothingFoundNotice(
  plan: Pick<RunPlan, 'file' | 'args'>,
  profile: ProgressProfile,
  chosen: boolean,
  yet: boolean,
): string {
  const found = `no progress found in ${plan.file}'s output${yet ? ' yet' : ''}`;
  if (chosen)
    return `mcp-progress run --parse=${profile.name}: ${found} (this profile reads ${profile.reads}); try --parse=generic\n`;
  const suggestion = suggestProfile(plan.file, plan.args);
  const hint =
    suggestion === undefined
      ? `name a profile with --parse=NAME (${PROFILE_NAMES.join(', ')})`
      : `try --parse=${suggestion.name}`;
  return `mcp-progress run --parse: ${found}; ${hint}\n`;
}

/**
 * Passes CMD's stdout and stderr through unchanged and reads them, and the
 * progress pipe (which is run's alone), with the profile; says once on
 * stderr when CMD writes output but nothing in it is progress. Once CMD has
 * exited, `drained` reads on until the pipes end, or stops reading those
 * still open by the rule of drainAfterExit (what CMD left running holds them).
 */
function readOutput(
  child: ChildProcess,
  parsing: Parsing,
  publish: (value: { progress: number; total?: number; message?: string }) => void,
  io: Io,
  file: string,
): { drained(): Promise<void>; ended(): void } {
  const plan = { file, args: parsing.args };
  const output = new OutputProgress(
    parsing.profile.reader(parsing.toolArgs, parsing.piped),
    publish,
  );
  let told = false;
  const tell = (yet: boolean) => {
    if (told || output.published > 0 || output.lines === 0) return;
    told = true;
    io.err(nothingFoundNotice(plan, parsing.profile, parsing.chosen, yet));
  };
  const noticeTimer = setTimeout(() => tell(true), NOTHING_FOUND_NOTICE_MS);
  noticeTimer.unref();
  const streams: Array<[Readable | null | undefined, OutputSource, Writable | undefined]> = [
    [child.stdout, 'stdout', process.stdout],
    [child.stderr, 'stderr', process.stderr],
    [child.stdio[3] as Readable | null | undefined, 'progress', undefined],
  ];
  const pipes: DrainedPipe[] = [];
  let open = 0;
  let allEnded = () => {};
  for (const [stream, source, target] of streams) {
    if (stream === null || stream === undefined) continue;
    const input = output.stream(source);
    let quietTimer: NodeJS.Timeout | undefined;
    let ended = false;
    let bytesRead = 0;
    let targetFailed = false;
    open++;
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(quietTimer);
      input.end();
      if (--open === 0) allEnded();
    };
    pipes.push({
      get ended() {
        return ended;
      },
      get bytesRead() {
        return bytesRead;
      },
      backedUp: () =>
        stream.readableLength > 0 ||
        stream.readableFlowing === false ||
        (!targetFailed && target?.writableNeedDrain === true),
      cut() {
        if (ended) return;
        end();
        stream.destroy();
      },
    });
    if (target !== undefined) {
      // If our reader goes away (EPIPE), CMD's output is still drained, so that CMD never blocks on it.
      target.on('error', () => {
        targetFailed = true;
        stream.resume();
      });
      stream.pipe(target, { end: false });
    }
    stream.on('data', (chunk: Buffer) => {
      bytesRead += chunk.length;
      input.write(chunk);
      clearTimeout(quietTimer);
      if (input.hasPending) quietTimer = setTimeout(() => input.quiet(), QUIET_MS);
    });
    stream.on('end', end);
    // A pipe that fails ends without 'end'.
    stream.on('close', end);
  }
  return {
    drained: () =>
      drainAfterExit(pipes, RUN_DRAIN_TIMING, (ended) => {
        allEnded = ended;
      }),
    ended() {
      clearTimeout(noticeTimer);
      tell(false);
    },
  };
}
