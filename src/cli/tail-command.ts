import { GatewayClient } from '../gateway-client/gateway-client.js';
import type { ProgressToken, StreamSummary } from '../protocol/frames.js';
import type { Notification } from '../protocol/notifications.js';
import { DEFAULT_MIN_INTERVAL_MS, DEFAULT_TAIL_LINES_INTERVAL_MS } from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { integerFlag, parse, UsageError } from './args.js';
import type { Io } from './io.js';
import { formatLine, formatScreen, TailModel } from './tail-view.js';
import { printable } from './terminal-text.js';

export const TAIL_HELP = `Usage: mcp-progress tail [TOKEN...] [--json] [options]

A live view of the named streams, or of every stream when none is named (new
streams appear within a second). One line per stream: a bar when the total
is known and a counter when it is not, rate, ETA and message; "stalled" when
a stream sent nothing for 10 s; finished streams show their status. On a terminal the view redraws in place; when
stdout is not a terminal, each update is printed as a plain line.

With TOKENs, tail exits (0) once every named stream is done; without, it
runs until interrupted. It survives a daemon restart.

  TOKEN               a string token
  --token-json JSON   a token written as JSON, for integer tokens: --token-json 7
                      (repeatable)
  --json              print each notification as one JSON object per line (NDJSON)
  --min-interval-ms N at most one update per stream per N ms (default ${DEFAULT_MIN_INTERVAL_MS}; for
                      plain lines ${DEFAULT_TAIL_LINES_INTERVAL_MS})
  --runtime-dir DIR   the daemon's runtime dir (default: as the daemon's)
  -h, --help          show this help

Examples:
  mcp-progress tail
  mcp-progress tail render-1 --json | jq .params.progress
`;

/** How often the list of streams is polled for new ones when no token is named. */
const POLL_MS = 500;
/** Terminal redraws at most this often. */
const FRAME_MS = 100;
/** And at least this often, so that rates fall and stalled streams show while nothing arrives. */
const TICK_MS = 1000;

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

export async function tailCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(
    'tail',
    argv,
    {
      json: { type: 'boolean' },
      'token-json': { type: 'string', multiple: true },
      'min-interval-ms': { type: 'string' },
      'runtime-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    true,
  );
  if (values.help) {
    io.out(TAIL_HELP);
    return 0;
  }
  const named: ProgressToken[] = [...positionals];
  for (const text of values['token-json'] ?? []) named.push(jsonToken(text));
  if (named.some((token) => token === '')) throw new UsageError('a token is a non-empty string');
  const mode = values.json ? 'json' : io.isTTY ? 'screen' : 'lines';
  const minIntervalMs =
    integerFlag('min-interval-ms', values['min-interval-ms']) ??
    (mode === 'lines' ? DEFAULT_TAIL_LINES_INTERVAL_MS : DEFAULT_MIN_INTERVAL_MS);

  const model = new TailModel();
  let state: 'connected' | 'disconnected' = 'connected';
  let render: () => void = () => {};
  const client = await GatewayClient.connect({
    runtimeDir: values['runtime-dir'],
    onState: (next) => {
      state = next;
      if (next === 'disconnected' && mode !== 'screen')
        io.err('mcp-progress tail: lost the daemon, reconnecting\n');
      render();
    },
  });

  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  /**
   * Tokens whose subscription is live, and the stream (the daemon's startedAt) each follows.
   * A daemon restart, or a waiting stream that becomes active, gives the same stream a new
   * startedAt: `followed` takes it over while the subscription lives, and a token whose done
   * arrived before its new startedAt was seen is `settling` until the list shows it done.
   */
  const live = new Set<ProgressToken>();
  const followed = new Map<ProgressToken, number | undefined>();
  const settling = new Set<ProgressToken>();
  const pendingNamed = new Set<ProgressToken>(named);

  const screen = mode === 'screen' ? new Screen(io) : undefined;
  let ticker: NodeJS.Timeout | undefined;
  if (screen !== undefined) {
    render = () =>
      screen.schedule(() =>
        formatScreen(model.rows, screen.columns, screen.rows, state, Date.now()),
      );
    ticker = setInterval(() => render(), TICK_MS).unref();
  }

  const received = (notification: Notification) => {
    const token = notification.params.progressToken;
    const now = Date.now();
    const row = model.apply(notification, now);
    if (mode === 'json') io.out(`${JSON.stringify(notification)}\n`);
    else if (mode === 'lines') io.out(`${formatLine(row, now)}\n`);
    else render();
    if (notification.method === 'notifications/progress/done') {
      live.delete(token);
      settling.add(token);
      if (pendingNamed.delete(token) && named.length > 0 && pendingNamed.size === 0) finish(0);
    }
  };

  const follow = async (token: ProgressToken, startedAt?: number) => {
    live.add(token);
    settling.delete(token);
    followed.set(token, startedAt);
    model.follow(token, startedAt);
    try {
      await client.subscribe({ progressToken: token, minIntervalMs }, received);
    } catch (error) {
      live.delete(token);
      if (error instanceof BridgeError && error.code === 'disconnected') return;
      // JSON.stringify escapes C0 controls but neither DEL nor C1 controls, nor the daemon's message.
      io.err(
        `${printable(`mcp-progress tail: cannot follow ${JSON.stringify(token)}: ${(error as Error).message}`)}\n`,
      );
    }
  };

  const discover = async () => {
    let streams: StreamSummary[];
    try {
      streams = await client.listAll();
    } catch {
      return; // disconnected: the gateway client reconnects, and the next poll goes on
    }
    for (const stream of streams) {
      const token = stream.progressToken;
      if (stream.state === 'waiting') continue;
      // The stream this subscription follows, under the startedAt this daemon gave it.
      const same = live.has(token) || (settling.has(token) && stream.state === 'done');
      if (same) {
        settling.delete(token);
        followed.set(token, stream.startedAt);
        model.restamp(token, stream.startedAt);
        continue;
      }
      if (followed.has(token) && followed.get(token) === stream.startedAt) continue;
      await follow(token, stream.startedAt);
    }
  };

  let poller: NodeJS.Timeout | undefined;
  if (named.length > 0) {
    for (const token of named) await follow(token);
  } else {
    await discover();
    const poll = () => {
      poller = setTimeout(() => void discover().finally(poll), POLL_MS);
    };
    poll();
  }
  render();

  const stop = () => finish(0);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const code = await finished;
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
  clearTimeout(poller);
  clearInterval(ticker);
  screen?.close(formatScreen(model.rows, screen.columns, screen.rows, state, Date.now()));
  await client.close();
  return code;
}

function jsonToken(text: string): ProgressToken {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`--token-json: expected JSON, got ${JSON.stringify(text)}`);
  }
  if (typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value)))
    return value;
  throw new UsageError(`--token-json: a token is a JSON string or integer, got ${text}`);
}

/** Redraws a block of lines in place, at most once per frame. */
class Screen {
  readonly #io: Io;
  #drawn = 0;
  #timer: NodeJS.Timeout | undefined;
  #lines: (() => string[]) | undefined;

  constructor(io: Io) {
    this.#io = io;
    io.out(HIDE_CURSOR);
  }

  get columns(): number {
    return process.stdout.columns ?? 80;
  }

  get rows(): number {
    return process.stdout.rows ?? 24;
  }

  schedule(lines: () => string[]): void {
    this.#lines = lines;
    if (this.#timer !== undefined) return;
    this.#draw();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#lines !== undefined) this.schedule(this.#lines);
    }, FRAME_MS);
    this.#lines = undefined;
  }

  close(lines: string[]): void {
    clearTimeout(this.#timer);
    this.#write(lines);
    this.#io.out(SHOW_CURSOR);
  }

  #draw(): void {
    if (this.#lines !== undefined) this.#write(this.#lines());
  }

  #write(lines: string[]): void {
    // Up to the first line drawn, then each line cleared and rewritten, then the rest cleared.
    const up = this.#drawn > 0 ? `\x1b[${this.#drawn}F` : '';
    this.#io.out(`${up}${lines.map((line) => `\x1b[2K${line}\n`).join('')}\x1b[J`);
    this.#drawn = lines.length;
  }
}
