import { setTimeout as delay } from 'node:timers/promises';
import type { Daemon } from '../daemon/daemon.js';
import { createProgressMcpServer } from '../mcp/mcp-server.js';
import {
  type ProgressSource,
  RecoveringProgressSource,
  RemoteProgressSource,
} from '../mcp/progress-source.js';
import { serveStdio } from '../mcp/stdio.js';
import { MAX_MIN_INTERVAL_MS } from '../protocol/limits.js';
import { holdReducerWhileProgressFlows } from '../shared/collection.js';
import {
  backoffDelayMs,
  DEFAULT_MCP_LOG_LEVEL,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_PORT,
  DEFAULT_RECONNECT_TIMEOUT_MS,
  IDLE_COLLECTION_MS,
  STOPPING_DAEMON_BACKOFF,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { readDaemonInfo, resolveRuntimeDir } from '../shared/locate.js';
import { createLogger, LOG_LEVELS, type LogLevel } from '../shared/log.js';
import { NO_LIVE_DAEMON } from '../shared/no-daemon.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { parseOptions } from './args.js';
import type { Io } from './io.js';

export const MCP_OPTIONS = [
  {
    name: 'runtime-dir',
    kind: 'string',
    value: 'DIR',
    section: 'Options',
    help: 'runtime directory (default: $MCP_PROGRESS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/mcp-progress, else <tmpdir>/mcp-progress-<uid>; on Windows %LOCALAPPDATA%\\mcp-progress)',
  },
  {
    name: 'port',
    kind: 'integer',
    min: 0,
    max: 65_535,
    section: 'Options',
    // No default in the row: an omitted port may fall back to a free one, a given one may not.
    help: `port of the embedded daemon's gateway (default ${DEFAULT_PORT}; a free one when that is taken)`,
  },
  {
    name: 'min-interval-ms',
    kind: 'integer',
    min: 0,
    max: MAX_MIN_INTERVAL_MS,
    section: 'Options',
    help: `default coalescing of watch_progress (default ${DEFAULT_MIN_INTERVAL_MS})`,
  },
  {
    name: 'log-level',
    kind: 'string',
    value: 'LEVEL',
    choices: LOG_LEVELS,
    default: DEFAULT_MCP_LOG_LEVEL,
    section: 'Options',
    help: `${LOG_LEVELS.join(', ')} (default {default})`,
  },
  helpRow('Options'),
] as const satisfies readonly OptionRow[];

export const MCP_HELP = `Usage: mcp-progress mcp [options]

Runs an MCP server over stdio, for hosts configured with a command line
(Claude Desktop, Claude Code, Cursor, VS Code). From a clone (after npm ci
and npm run build), with the clone's absolute path:

  {"command": "node", "args": ["/path/to/mcp-progress-bridge/bin/mcp-progress", "mcp"]}

or, after npm link in the clone, {"command": "mcp-progress", "args": ["mcp"]};
once the package is on the npm registry:

  {"command": "npx", "args": ["-y", "mcp-progress-bridge", "mcp"]}

Started in a terminal, it says so on stderr once: it reads JSON-RPC only.

It uses the running daemon of the runtime directory (connecting at the
first tool call, so that a host's start-up does not wait for it), or, when
none runs, starts one inside this process right after it has answered the
host's initialize (same runtime directory, socket and daemon.json; tool
calls wait for it, and if it cannot start, each call says why and tries
again), so that this one line is the whole set-up. When the daemon it uses
goes away (another \`mcp\` that embedded it exits), the next call connects
again or starts one here (a daemon that is stopping is waited for until it
is gone); a daemon that refuses the connection (at its --max-sessions, say)
has not gone away, and the call fails with its reason. Workers publish to it
as usual. stdout carries MCP messages only; logs go to stderr.

Tools:
  watch_progress {progressToken, timeoutMs?, minIntervalMs?}
                 follow a job until it is done, streaming its progress to the
                 caller as notifications/progress under the caller's token
  list_progress  running and recently finished jobs with their last values
  get_progress {progressToken}
                 one job's last value and state

${optionsHelp(MCP_OPTIONS, 25)}`;

export const TERMINAL_NOTICE =
  'mcp-progress mcp: this is an MCP server on stdio, for an MCP host to start (see "mcp-progress mcp --help"); it ignores what is typed here. Ctrl-D or Ctrl-C ends it.\n';

export async function mcpCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parseOptions('mcp', argv, MCP_OPTIONS);
  if (values.help) {
    io.out(MCP_HELP);
    return 0;
  }
  const log = createLogger(values['log-level'] as LogLevel, (line) => io.err(line));
  const reducerHold = holdReducerWhileProgressFlows({
    quietMs: IDLE_COLLECTION_MS,
    changed: (held) =>
      log.debug(
        held
          ? "progress flows: V8's memory reducer held off until it is quiet"
          : "quiet: V8's memory reducer may run again",
      ),
  });
  // Typed input is not JSON-RPC and the SDK ignores it: say once what this is for.
  if (process.stdin.isTTY === true) io.err(TERMINAL_NOTICE);
  const runtimeDir = resolveRuntimeDir(values['runtime-dir'], io.env);
  const port = values.port;
  const minIntervalMs = values['min-interval-ms'];

  const daemons: Daemon[] = [];
  const establish = async (liveDaemon?: boolean): Promise<ProgressSource> => {
    const { source, daemon } = await connectOrEmbed(runtimeDir, port, log, liveDaemon);
    if (daemon !== undefined) daemons.push(daemon);
    return source;
  };
  // A live daemon named in daemon.json is connected to at the first tool call, not before
  // initialize: connecting (ws, the handshake) cost a host's start-up about 80 ms and the idle
  // process 9 MiB. With none, one is embedded now, beside initialize rather than before it: the
  // host's start-up no longer waits for it (about 40 ms), tool calls do, and workers find its
  // socket a few tens of ms after the start (the Node, Python and C clients retry until then).
  // Connect-or-embed runs again whenever the daemon in use goes away (the `mcp` process that
  // embedded it exited): this process then uses the next daemon, or embeds one itself.
  const liveDaemon = await liveDaemonNamed(runtimeDir);
  const source: RecoveringProgressSource = new RecoveringProgressSource(() => {
    log.info(
      source.established
        ? `the daemon of ${runtimeDir} went away: connecting again, or starting one`
        : `first call: connecting to the daemon of ${runtimeDir}, or starting one`,
    );
    return establish();
  });
  if (!liveDaemon) {
    // In the check phase, after the poll phase has read stdin: an initialize already waiting there
    // is answered first. Tool calls wait for the daemon.
    setImmediate(() => {
      source
        .establishNow(() => establish(false))
        .catch((error: Error) =>
          log.warn(`could not start a daemon (${error.message}): the first tool call tries again`),
        );
    });
  }
  const serverOptions = { source, defaultMinIntervalMs: minIntervalMs };
  const ended = await serveStdio(createProgressMcpServer(serverOptions), async () =>
    (await import('../mcp/modern-server.js')).createModernProgressMcpServer(serverOptions),
  );
  log.debug(`stdio ended (${ended}), stopping`);
  reducerHold?.stop();
  await source.close();
  await Promise.all(daemons.map((daemon) => daemon.stop()));
  return 0;
}

/**
 * Whether the runtime dir's daemon.json names a process that is alive: a daemon to connect to
 * later. A stale one (its pid reused) is found out at the first call, which then embeds one.
 */
async function liveDaemonNamed(runtimeDir: string): Promise<boolean> {
  const info = await readDaemonInfo(runtimeDir).catch(() => undefined);
  if (info === undefined || info.pid === process.pid) return false;
  try {
    process.kill(info.pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, and someone else's; the first call then says so.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The running daemon if there is one; else one started in this process (the embedded default).
 * `liveDaemon`: whether daemon.json names a live process, when the caller has just read it.
 */
async function connectOrEmbed(
  runtimeDir: string,
  port: number | undefined,
  log: ReturnType<typeof createLogger>,
  liveDaemon?: boolean,
): Promise<{ source: ProgressSource; daemon: Daemon | undefined }> {
  for (let attempt = 0; ; attempt++) {
    let noDaemon: unknown;
    // When daemon.json names no live process, embed at once: learning that by connecting
    // would load the gateway client and ws (about 40 ms and 7 MiB) for nothing. Embedding
    // finds out a daemon that started meanwhile (already_running), and the next attempt connects.
    if (attempt > 0 || (liveDaemon ?? (await liveDaemonNamed(runtimeDir)))) {
      try {
        const source = await connectWaitingOutStop(runtimeDir, log);
        log.info(`using the running daemon of ${runtimeDir}`);
        return { source, daemon: undefined };
      } catch (error) {
        // A refusal (gateway_refused, at --max-sessions say) is a live daemon's answer: told at once.
        if (!(error instanceof BridgeError) || !NO_LIVE_DAEMON.has(error.code)) throw error;
        noDaemon = error;
        log.debug(`no live daemon in ${runtimeDir} (${error.message})`);
      }
    }
    try {
      const daemon = await startEmbedded(runtimeDir, port, log);
      log.info(`no daemon was running: started one in this process (${daemon.info.url})`);
      return { source: daemon.progressSource, daemon };
    } catch (error) {
      // Another process started one between our look and our start: use it.
      if ((error as BridgeError).code !== 'already_running') throw error;
      // A live daemon holds the socket, yet we cannot use it: say why.
      if (attempt >= 2) throw noDaemon ?? error;
    }
  }
}

/**
 * Connects to the running daemon. One that is stopping refuses new sessions (daemon_stopping) and
 * holds the runtime dir until it is gone, so embedding one fails meanwhile: it is waited out (for
 * as long as a gateway client waits for a daemon to come back), also past its grace, when it no
 * longer listens but daemon.json still names it. Then whatever runs is connected to, or the
 * error that none does is thrown for connectOrEmbed to embed one.
 */
async function connectWaitingOutStop(
  runtimeDir: string,
  log: ReturnType<typeof createLogger>,
): Promise<RemoteProgressSource> {
  const giveUpAt = performance.now() + DEFAULT_RECONNECT_TIMEOUT_MS;
  let stopping = false;
  for (let wait = 0; ; wait++) {
    try {
      return await RemoteProgressSource.connect({
        runtimeDir,
        // A watch that reads too slowly is closed by the daemon and reconnects: said where the user looks.
        onState: (_state, why) => {
          if (why?.code === 'slow_consumer') log.warn(`${why.message} (${why.code})`);
        },
      });
    } catch (error) {
      if (!(error instanceof BridgeError) || performance.now() >= giveUpAt) throw error;
      const stillStopping =
        error.code === 'daemon_stopping' ||
        (stopping && NO_LIVE_DAEMON.has(error.code) && (await liveDaemonNamed(runtimeDir)));
      if (!stillStopping) throw error;
      if (!stopping) log.info(`the daemon of ${runtimeDir} is stopping: waiting until it is gone`);
      stopping = true;
      await delay(backoffDelayMs(STOPPING_DAEMON_BACKOFF, wait));
    }
  }
}

async function startEmbedded(
  runtimeDir: string,
  port: number | undefined,
  log: ReturnType<typeof createLogger>,
): Promise<Daemon> {
  // Loaded only to embed one: with a daemon running, this process needs none of it (node-ipc, the gateway).
  const { Daemon } = await import('../daemon/daemon.js');
  try {
    return await Daemon.start({ runtimeDir, port, logLevel: DEFAULT_MCP_LOG_LEVEL }, log);
  } catch (error) {
    // The default port belongs to someone else (another user's daemon): any free port will do.
    if (!(error instanceof BridgeError) || error.code !== 'port_in_use' || port !== undefined)
      throw error;
    return Daemon.start({ runtimeDir, port: 0, logLevel: DEFAULT_MCP_LOG_LEVEL }, log);
  }
}
