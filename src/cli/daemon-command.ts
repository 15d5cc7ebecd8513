import { Daemon } from '../daemon/daemon.js';
import { DEFAULT_PORT, DEFAULTS } from '../daemon/options.js';
import { DEFAULT_ROUTER_OPTIONS } from '../daemon/router.js';
import { LOG_LEVELS, type LogLevel } from '../shared/log.js';
import { integerFlag, parse, UsageError } from './args.js';
import type { Io } from './io.js';

const ROUTER = DEFAULT_ROUTER_OPTIONS;

export const DAEMON_HELP = `Usage: mcp-progress daemon [options]

Runs the per-user bridge daemon in the foreground. Workers publish progress on
its socket; MCP gateways subscribe over its WebSocket endpoint. When ready it
writes <runtime-dir>/daemon.json (mode 0600) with its pid, socket, URL and
secret. SIGINT or SIGTERM stop it gracefully.

Where:
  --runtime-dir DIR        runtime directory (default: $MCP_PROGRESS_RUNTIME_DIR,
                           else $XDG_RUNTIME_DIR/mcp-progress, else
                           <tmpdir>/mcp-progress-<uid>); created with mode 0700
  --socket PATH            worker socket (default: <runtime-dir>/bridge.sock)
  --host ADDR              WebSocket listen address (default: 127.0.0.1)
  --port N                 WebSocket port (default: ${DEFAULT_PORT}; 0 picks a free one)
  --allow-remote           allow a --host that is not loopback (prints a warning)
  --allow-origin ORIGIN    let a browser page from ORIGIN connect (repeatable)

Limits:
  --max-connections N      worker connections (default ${DEFAULTS.maxConnections})
  --max-sessions N         sessions: WebSocket and /mcp, together (default ${DEFAULTS.maxSessions})
  --max-streams N          streams in the table (default ${ROUTER.maxStreams})
  --max-streams-per-connection N
                           active streams one worker connection may publish (default ${ROUTER.maxStreamsPerConnection})
  --max-subscriptions N    subscriptions per session (default ${ROUTER.maxSubscriptionsPerSubscriber})
  --max-session-buffer-bytes N
                           unread bytes before a session is closed (default ${DEFAULTS.maxSessionBufferBytes})

Timing (milliseconds):
  --min-interval-ms N      default coalescing interval (default ${ROUTER.defaultMinIntervalMs}; 0 = off)
  --retention-ms N         how long a done stream is kept (default ${ROUTER.retentionMs})
  --ttl-ms N               idle time after which a stream ends (default ${ROUTER.streamTtlMs})
  --abandon-grace-ms N     how long a stream waits for its worker to come back
                           (default ${ROUTER.abandonGraceMs})
  --frame-timeout-ms N     incomplete-frame timeout (default ${DEFAULTS.frameTimeoutMs})

Other:
  --log-level LEVEL        ${LOG_LEVELS.join(', ')} (default info)
  -h, --help               show this help
`;

export async function daemonCommand(argv: string[], io: Io): Promise<number> {
  const { values } = parse('daemon', argv, {
    'runtime-dir': { type: 'string' },
    socket: { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'allow-remote': { type: 'boolean' },
    'allow-origin': { type: 'string', multiple: true },
    'max-connections': { type: 'string' },
    'max-sessions': { type: 'string' },
    'max-streams': { type: 'string' },
    'max-streams-per-connection': { type: 'string' },
    'max-subscriptions': { type: 'string' },
    'max-session-buffer-bytes': { type: 'string' },
    'max-pending-connections': { type: 'string' },
    'handshake-timeout-ms': { type: 'string' },
    'ping-interval-ms': { type: 'string' },
    'pong-timeout-ms': { type: 'string' },
    'min-interval-ms': { type: 'string' },
    'retention-ms': { type: 'string' },
    'ttl-ms': { type: 'string' },
    'abandon-grace-ms': { type: 'string' },
    'frame-timeout-ms': { type: 'string' },
    'log-level': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    io.out(DAEMON_HELP);
    return 0;
  }
  const logLevel = values['log-level'];
  if (logLevel !== undefined && !(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new UsageError(
      `--log-level: expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`,
    );
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
    running.stop().then(
      () => finish(0),
      (error: Error) => {
        io.err(`mcp-progress error: stop failed: ${error.message}\n`);
        finish(1);
      },
    );
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      io.err(`mcp-progress: second ${signal}, exiting at once\n`);
      process.exit(1);
    }
    signalled = true;
    if (daemon !== undefined) stopNow(daemon);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    daemon = await startDaemon(values, logLevel as LogLevel | undefined);
  } catch (error) {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    throw error;
  }
  if (signalled) stopNow(daemon);
  return finished;
}

function startDaemon(
  values: Record<string, string | boolean | string[] | undefined>,
  logLevel: LogLevel | undefined,
): Promise<Daemon> {
  const text = (name: string) => values[name] as string | undefined;
  return Daemon.start({
    runtimeDir: text('runtime-dir'),
    socketPath: text('socket'),
    host: text('host'),
    port: integerFlag('port', text('port')),
    allowRemote: values['allow-remote'] as boolean | undefined,
    allowOrigins: values['allow-origin'] as string[] | undefined,
    logLevel,
    maxConnections: integerFlag('max-connections', text('max-connections')),
    maxSessions: integerFlag('max-sessions', text('max-sessions')),
    maxSessionBufferBytes: integerFlag(
      'max-session-buffer-bytes',
      text('max-session-buffer-bytes'),
    ),
    frameTimeoutMs: integerFlag('frame-timeout-ms', text('frame-timeout-ms')),
    maxPendingConnections: integerFlag('max-pending-connections', text('max-pending-connections')),
    handshakeTimeoutMs: integerFlag('handshake-timeout-ms', text('handshake-timeout-ms')),
    pingIntervalMs: integerFlag('ping-interval-ms', text('ping-interval-ms')),
    pongTimeoutMs: integerFlag('pong-timeout-ms', text('pong-timeout-ms')),
    router: {
      maxStreams: integerFlag('max-streams', text('max-streams')),
      maxStreamsPerConnection: integerFlag(
        'max-streams-per-connection',
        text('max-streams-per-connection'),
      ),
      maxSubscriptionsPerSubscriber: integerFlag('max-subscriptions', text('max-subscriptions')),
      defaultMinIntervalMs: integerFlag('min-interval-ms', text('min-interval-ms')),
      retentionMs: integerFlag('retention-ms', text('retention-ms')),
      streamTtlMs: integerFlag('ttl-ms', text('ttl-ms')),
      abandonGraceMs: integerFlag('abandon-grace-ms', text('abandon-grace-ms')),
    },
  });
}
