import { DEFAULT_PORT, isLoopback } from '../config.js';
import { Daemon } from '../daemon.js';
import { LOG_LEVELS, type LogLevel } from '../log.js';
import { integerFlag, parse, UsageError } from './args.js';
import type { Io } from './io.js';

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
  --max-connections N      worker connections (default 10000)
  --max-sessions N         WebSocket sessions (default 10000)
  --max-streams N          streams in the table (default 100000)
  --max-streams-per-connection N
                           active streams one worker connection may publish (default 10000)
  --max-subscriptions N    subscriptions per session (default 10000)
  --max-session-buffer-bytes N
                           unread bytes before a session is closed (default 8388608)

Timing (milliseconds):
  --min-interval-ms N      default coalescing interval (default 100; 0 = off)
  --retention-ms N         how long a done stream is kept (default 60000)
  --ttl-ms N               idle time after which a stream ends (default 3600000)
  --abandon-grace-ms N     how long a stream waits for its worker to come back
                           (default 30000)
  --frame-timeout-ms N     incomplete-frame timeout (default 30000)

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
  const daemon = await Daemon.start({
    runtimeDir: values['runtime-dir'],
    socketPath: values.socket,
    host: values.host,
    port: integerFlag('port', values.port),
    allowRemote: values['allow-remote'],
    allowOrigins: values['allow-origin'],
    logLevel: logLevel as LogLevel | undefined,
    maxConnections: integerFlag('max-connections', values['max-connections']),
    maxSessions: integerFlag('max-sessions', values['max-sessions']),
    maxSessionBufferBytes: integerFlag(
      'max-session-buffer-bytes',
      values['max-session-buffer-bytes'],
    ),
    frameTimeoutMs: integerFlag('frame-timeout-ms', values['frame-timeout-ms']),
    router: {
      maxStreams: integerFlag('max-streams', values['max-streams']),
      maxStreamsPerConnection: integerFlag(
        'max-streams-per-connection',
        values['max-streams-per-connection'],
      ),
      maxSubscriptionsPerSubscriber: integerFlag('max-subscriptions', values['max-subscriptions']),
      defaultMinIntervalMs: integerFlag('min-interval-ms', values['min-interval-ms']),
      retentionMs: integerFlag('retention-ms', values['retention-ms']),
      streamTtlMs: integerFlag('ttl-ms', values['ttl-ms']),
      abandonGraceMs: integerFlag('abandon-grace-ms', values['abandon-grace-ms']),
    },
  });
  if (!isLoopback(daemon.options.host)) {
    io.err(
      `mcp-progress warn: the gateway listens on ${daemon.options.host}, reachable beyond this machine; anyone with the secret can read progress\n`,
    );
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        io.err(`mcp-progress: second ${signal}, exiting at once\n`);
        process.exit(1);
      }
      stopping = true;
      daemon.stop().then(
        () => resolve(0),
        (error: Error) => {
          io.err(`mcp-progress error: stop failed: ${error.message}\n`);
          resolve(1);
        },
      );
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
}
