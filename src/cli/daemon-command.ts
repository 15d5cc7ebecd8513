import { Daemon } from '../daemon/daemon.js';
import { DAEMON_FLAGS, type OptionSpec, optionsInput } from '../daemon/options.js';
import { EXIT_AFTER_STOP_MS } from '../shared/defaults.js';
import type { LogLevel } from '../shared/log.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { type OptionValues, parseOptions } from './args.js';
import type { Io } from './io.js';

/** The daemon's flags, from its option table, and -h. */
export const DAEMON_COMMAND_OPTIONS: readonly OptionRow[] = [...DAEMON_FLAGS, helpRow('Other')];

export const DAEMON_HELP = `Usage: mcp-progress daemon [options]

Runs the per-user bridge daemon in the foreground. Workers publish progress on
its socket; MCP gateways subscribe over its WebSocket endpoint. When ready it
writes <runtime-dir>/daemon.json (mode 0600) with its pid, socket, URL and
secret. SIGINT (Ctrl+C), SIGTERM or SIGHUP (its terminal closed) stop it
gracefully, removing daemon.json and the socket; on Windows, Ctrl+C, Ctrl+Break
(SIGBREAK) or its console window closing do (there, a SIGTERM or SIGINT sent by
another process ends it at once).

${optionsHelp(DAEMON_COMMAND_OPTIONS, 27)}
Memory (measured: test/reliability/memory-caps.ts): about 4 KiB per worker
connection, 1 KiB per stream (72 KiB when its last frame is a full 64 KiB),
13 KiB per session plus what it leaves unread, 0.3 KiB per claim. At the
default caps, with small frames: about 40 MiB of connections, 85 MiB of
streams, 130 MiB of sessions and 30 MiB of claims. The worst case is set by
the caps: streams x 72 KiB (7 GiB), sessions x --max-session-buffer-bytes
(80 GiB); lower the caps to bound it tighter.
`;

/**
 * Signals that stop the daemon cleanly; by default Node would exit at once and leave daemon.json
 * behind. On Windows, Ctrl+Break (SIGBREAK) is how service wrappers and many users stop a console
 * program; elsewhere there is no SIGBREAK.
 */
const STOP_SIGNALS: readonly NodeJS.Signals[] = [
  'SIGINT',
  'SIGTERM',
  'SIGHUP',
  ...(process.platform === 'win32' ? (['SIGBREAK'] as const) : []),
];

export async function daemonCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseOptions('daemon', argv, DAEMON_COMMAND_OPTIONS);
  if (values.help) {
    io.out(DAEMON_HELP);
    return 0;
  }
  // Handlers go in before the daemon starts: a signal that arrives as soon as
  // "ready:" is printed must still get a clean stop, not the default exit.
  let daemon: Daemon | undefined;
  let signalled = false;
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  const stopNow = (running: Daemon) =>
    running
      .stop()
      .then(
        () => 0,
        (error: Error) => {
          io.err(`mcp-progress error: stop failed: ${error.message}\n`);
          return 1;
        },
      )
      .then((code) => {
        finish(code);
        exitIfHeld(code, io);
      });
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      io.err(`mcp-progress: second ${signal}, exiting at once\n`);
      process.exit(1);
    }
    signalled = true;
    if (daemon !== undefined) stopNow(daemon);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    daemon = await startDaemon(values);
  } catch (error) {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    throw error;
  }
  if (signalled) stopNow(daemon);
  return finished;
}

/**
 * The daemon has stopped and removed its files; a process still alive a moment later is held
 * by something a library left running (unref'd, this timer fires only then): it exits anyway.
 */
function exitIfHeld(code: number, io: Io): void {
  setTimeout(() => {
    const held = process.getActiveResourcesInfo().filter((name) => name !== 'TTYWrap');
    io.err(
      `mcp-progress warn: stopped, but the process was still held (${held.join(', ')}): exiting\n`,
    );
    process.exit(code);
  }, EXIT_AFTER_STOP_MS).unref();
}

function startDaemon(values: OptionValues<readonly OptionRow[]>): Promise<Daemon> {
  const given = new Map<OptionSpec, unknown>();
  for (const spec of DAEMON_FLAGS) given.set(spec, values[spec.name]);
  return Daemon.start({ ...optionsInput(given), logLevel: values['log-level'] as LogLevel });
}
