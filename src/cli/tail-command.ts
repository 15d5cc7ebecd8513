import { GatewayClient, type GatewayClientOptions } from '../gateway-client/gateway-client.js';
import type { ProgressToken, StreamSummary } from '../protocol/frames.js';
import { MAX_MIN_INTERVAL_MS } from '../protocol/limits.js';
import type { Notification } from '../protocol/notifications.js';
import {
  backoffDelayMs,
  DEFAULT_MIN_INTERVAL_MS,
  DEFAULT_TAIL_LINES_INTERVAL_MS,
  TAIL_HOST_RETRIES,
  TAIL_HOST_RETRY_BACKOFF,
  TAIL_POLL_MS,
  TAIL_STALLED_AFTER_MS,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { NO_LIVE_DAEMON } from '../shared/no-daemon.js';
import { helpRow, type OptionRow, optionsHelp } from '../shared/option-table.js';
import { parseOptions, UsageError } from './args.js';
import type { Io } from './io.js';
import { formatLine, formatScreen, type StreamRow, TailModel } from './tail-view.js';
import { printable } from './terminal-text.js';

export const TAIL_OPTIONS = [
  {
    name: 'token-json',
    kind: 'list',
    value: 'JSON',
    help: 'a token written as JSON, for integer tokens:\n--token-json 7 (repeatable)',
  },
  {
    name: 'json',
    kind: 'boolean',
    help: 'print each notification as one JSON object per line (NDJSON)',
  },
  {
    name: 'min-interval-ms',
    kind: 'integer',
    min: 0,
    max: MAX_MIN_INTERVAL_MS,
    // The default depends on the output: a terminal's, or plain lines'.
    help: `at most one update per stream per N ms (default ${DEFAULT_MIN_INTERVAL_MS}; for plain lines ${DEFAULT_TAIL_LINES_INTERVAL_MS})`,
  },
  {
    name: 'runtime-dir',
    kind: 'string',
    value: 'DIR',
    help: "the daemon's runtime dir (default: as the daemon's)",
  },
  helpRow(),
] as const satisfies readonly OptionRow[];

export const TAIL_HELP = `Usage: mcp-progress tail [TOKEN...] [--json] [options]

A live view of the named streams, or of every stream when none is named.
One line per stream: a bar when the total is known and a counter when it is
not, rate, ETA and message; "stalled" when a stream sent nothing for ${TAIL_STALLED_AFTER_MS / 1000} s;
finished streams show their status. On a terminal the view redraws in place;
when stdout is not a terminal, each update is printed as a plain line.

Without TOKENs, tail follows every stream: those under way from their
newest value, those that start later from their first (progress/subscribeAll),
and shows the finished ones the daemon still keeps. If the daemon refuses
that (at its --max-subscribe-all cap), tail says so and lists the streams
every ${TAIL_POLL_MS / 1000} s instead, following each from the value it has then.

With a NATS backplane (docs/BACKPLANE.md), a stream of another host shows
that host after its name: render-1 @gpu-1. When asking the daemon for it
fails (it did not answer in time), the stream shows without it, and its
next updates ask again (a few times, further and further apart).

With TOKENs, tail exits (0) once every named stream is done; without, it
runs until interrupted. It survives a daemon restart, and when no daemon is
up yet, or the one named does not answer (stopped, hung), it says so once
and waits for one. A daemon that runs and refuses it (at --max-sessions) is
named as such, with its reason, once; tail asks again every ${TAIL_POLL_MS / 1000} s and
follows once it is let in.

Options:
  TOKEN                a string token
${optionsHelp(TAIL_OPTIONS, 23)}
Examples:
  mcp-progress tail
  mcp-progress tail render-1 --json | jq .params.progress
`;

/**
 * Connect errors tail waits out: no daemon yet, one that accepted the connection and said nothing,
 * or one that refused it (at --max-sessions, say: tail takes a place once one frees).
 */
const WAIT_FOR: ReadonlySet<string> = new Set([
  ...NO_LIVE_DAEMON,
  'gateway_timeout',
  'gateway_refused',
]);
/** Terminal redraws at most this often. */
const FRAME_MS = 100;
/** And at least this often, so that rates fall and stalled streams show while nothing arrives. */
const TICK_MS = 1000;
/** Any period: the interval that keeps tail running never does anything. */
const HOLD_MS = 2 ** 30;

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

export interface TailPlan {
  readonly named: ProgressToken[];
  readonly mode: 'json' | 'screen' | 'lines';
  readonly minIntervalMs: number;
  readonly runtimeDir: string | undefined;
}

/** What tail's command line asks for: 'help', or the plan. Throws UsageError for a wrong one. */
export function planTail(argv: string[], isTTY: boolean): TailPlan | 'help' {
  const { values, positionals } = parseOptions('tail', argv, TAIL_OPTIONS, true);
  if (values.help) return 'help';
  const named: ProgressToken[] = [...positionals];
  for (const text of values['token-json'] ?? []) named.push(jsonToken(text));
  if (named.some((token) => token === '')) throw new UsageError('a token is a non-empty string');
  const mode = values.json ? 'json' : isTTY ? 'screen' : 'lines';
  const minIntervalMs =
    values['min-interval-ms'] ??
    (mode === 'lines' ? DEFAULT_TAIL_LINES_INTERVAL_MS : DEFAULT_MIN_INTERVAL_MS);
  return { named, mode, minIntervalMs, runtimeDir: values['runtime-dir'] };
}

/**
 * Which streams tail follows, without a daemon: the tokens whose subscription
 * is live, and the stream (the daemon's startedAt) each follows. A daemon
 * restart, or a waiting stream that becomes active, gives the same stream a
 * new startedAt: `followed` takes it over while the subscription lives, and a
 * token whose done arrived before its new startedAt was seen is `settling`
 * until the list shows it done.
 */
export class Following {
  readonly #live = new Set<ProgressToken>();
  readonly #followed = new Map<ProgressToken, number | undefined>();
  readonly #settling = new Set<ProgressToken>();
  readonly #pendingNamed: Set<ProgressToken>;
  readonly #anyNamed: boolean;

  constructor(named: readonly ProgressToken[]) {
    this.#pendingNamed = new Set(named);
    this.#anyNamed = named.length > 0;
  }

  /** A subscription to the token starts, following the stream of that startedAt. */
  started(token: ProgressToken, startedAt: number | undefined): void {
    this.#live.add(token);
    this.#settling.delete(token);
    this.#followed.set(token, startedAt);
  }

  /** A subscription of its own follows the token. */
  isLive(token: ProgressToken): boolean {
    return this.#live.has(token);
  }

  /** The subscription could not start, or ended without a done (the daemon went away). */
  failed(token: ProgressToken): void {
    this.#live.delete(token);
  }

  /** The token's done arrived. True when that was the last named token still running. */
  done(token: ProgressToken): boolean {
    this.#live.delete(token);
    this.#settling.add(token);
    return this.#pendingNamed.delete(token) && this.#anyNamed && this.#pendingNamed.size === 0;
  }

  /**
   * From the daemon's list: the streams to start following, and those already
   * followed whose startedAt is now another (the model's rows are restamped).
   */
  review(streams: readonly StreamSummary[]): {
    follow: Array<{ token: ProgressToken; startedAt: number }>;
    restamp: Array<{ token: ProgressToken; startedAt: number }>;
  } {
    const follow: Array<{ token: ProgressToken; startedAt: number }> = [];
    const restamp: Array<{ token: ProgressToken; startedAt: number }> = [];
    for (const stream of streams) {
      const token = stream.progressToken;
      if (stream.state === 'waiting') continue;
      // The stream this subscription follows, under the startedAt this daemon gave it.
      const same = this.#live.has(token) || (this.#settling.has(token) && stream.state === 'done');
      if (same) {
        this.#settling.delete(token);
        this.#followed.set(token, stream.startedAt);
        restamp.push({ token, startedAt: stream.startedAt });
        continue;
      }
      if (this.#followed.has(token) && this.#followed.get(token) === stream.startedAt) continue;
      follow.push({ token, startedAt: stream.startedAt });
    }
    return { follow, restamp };
  }
}

/**
 * Connects to the daemon, waiting for one to start when none is up (said once
 * on stderr), until `stopped` resolves: then undefined.
 */
async function connectWhenUp(
  options: GatewayClientOptions,
  io: Io,
  stopped: Promise<unknown>,
): Promise<GatewayClient | undefined> {
  let isStopped = false;
  void stopped.then(() => {
    isStopped = true;
  });
  // What was said last: said again only when the reason changes (none up, then one that refuses).
  let told: string | undefined;
  while (!isStopped) {
    try {
      return await GatewayClient.connect(options);
    } catch (error) {
      if (!(error instanceof BridgeError) || !WAIT_FOR.has(error.code)) throw error;
      const why = error.code === 'gateway_refused' ? 'refused' : 'no daemon';
      if (told !== why) io.err(`mcp-progress tail: ${waitMessage(error)}\n`);
      told = why;
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      stopped,
      new Promise((resolve) => {
        timer = setTimeout(resolve, TAIL_POLL_MS);
      }),
    ]);
    clearTimeout(timer);
  }
  return undefined;
}

/**
 * What tail says while it waits: for a daemon when none answers; a daemon that runs and said no
 * (at --max-sessions, say) is named as such, with its reason, as tail keeps asking.
 */
function waitMessage(error: BridgeError): string {
  if (error.code !== 'gateway_refused')
    return `${error.message}; waiting for a daemon (Ctrl-C to stop)`;
  return `${error.message}; the daemon is running and said no: tail asks again every ${TAIL_POLL_MS} ms and follows once it is let in (at --max-sessions: once a session ends) (Ctrl-C to stop)`;
}

export async function tailCommand(argv: string[], io: Io): Promise<number> {
  const plan = planTail(argv, io.isTTY);
  if (plan === 'help') {
    io.out(TAIL_HELP);
    return 0;
  }
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => {
    finish = resolve;
  });
  const stop = () => finish(0);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // tail runs until done or interrupted: while its daemon is away nothing else holds the event
  // loop (the gateway client's reconnect timers are unref'd), and it would end, 0, mid-restart.
  const running = setInterval(() => {}, HOLD_MS);
  try {
    return await tailUntilFinished(plan, io, finished, finish);
  } finally {
    clearInterval(running);
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

async function tailUntilFinished(
  plan: TailPlan,
  io: Io,
  finished: Promise<number>,
  finish: (code: number) => void,
): Promise<number> {
  const model = new TailModel();
  let view: View | undefined;
  let tail: Tail | undefined;
  let state: 'connected' | 'disconnected' = 'connected';
  const client = await connectWhenUp(
    {
      runtimeDir: plan.runtimeDir,
      // A live view waits for its daemon to come back for as long as it runs.
      reconnectTimeoutMs: Number.POSITIVE_INFINITY,
      onState: (next, why) => {
        state = next;
        if (next === 'disconnected' && plan.mode !== 'screen')
          io.err(
            why?.code === 'slow_consumer'
              ? `mcp-progress tail: ${why.message} (${why.code}); reconnecting\n`
              : 'mcp-progress tail: lost the daemon, reconnecting\n',
          );
        // The first 'connected' comes before tail exists; a later one is a reconnect.
        if (next === 'connected') tail?.reconnected();
        view?.render();
      },
    },
    io,
    finished,
  );
  if (client === undefined) return finished;
  view = createView(plan.mode, io, model, () => state);
  tail = new Tail(client, plan, io, model, view, finish);

  if (plan.named.length > 0) {
    for (const token of plan.named) await tail.follow(token);
    // Piped or redirected there is no screen to show an empty row: say once what tail waits for.
    const waiting = plan.named.filter((token) => !model.hasNews(token));
    if (plan.mode !== 'screen' && waiting.length > 0)
      io.err(
        `${printable(`mcp-progress tail: nothing published yet for ${waiting.map((token) => JSON.stringify(token)).join(', ')}; waiting (Ctrl-C to stop)`)}\n`,
      );
  } else {
    await tail.followAll();
    await tail.discover();
    tail.pollWhileListing();
  }
  view.render();

  const code = await finished;
  tail.stop();
  view.close();
  await client.close();
  return code;
}

/** How tail shows what arrives: NDJSON, plain lines, or a screen redrawn in place. */
interface View {
  /** A notification arrived for this row. */
  show(notification: Notification, row: StreamRow, now: number): void;
  /** Something changed (a row, the connection): redraw a screen. */
  render(): void;
  close(): void;
}

function createView(
  mode: TailPlan['mode'],
  io: Io,
  model: TailModel,
  state: () => 'connected' | 'disconnected',
): View {
  if (mode === 'json') {
    return {
      show: (notification) => io.out(`${JSON.stringify(notification)}\n`),
      render() {},
      close() {},
    };
  }
  if (mode === 'lines') {
    return {
      show: (_, row, now) => io.out(`${formatLine(row, now)}\n`),
      render() {},
      close() {},
    };
  }
  const screen = new Screen(io);
  const lines = () => formatScreen(model.rows, screen.columns, screen.rows, state(), Date.now());
  const render = () => screen.schedule(lines);
  const ticker = setInterval(render, TICK_MS).unref();
  return {
    show: render,
    render,
    close() {
      clearInterval(ticker);
      screen.close(lines());
    },
  };
}

/** A stream whose host look-up failed: the look-ups failed so far, and when the next may be. */
interface HostRetry {
  failures: number;
  notBefore: number;
  looking: boolean;
}

/** Subscribes to the streams tail follows, and passes what arrives to the model and the view. */
class Tail {
  readonly #client: GatewayClient;
  readonly #minIntervalMs: number;
  readonly #io: Io;
  readonly #model: TailModel;
  readonly #view: View;
  readonly #finish: (code: number) => void;
  readonly #following: Following;
  /** Following every stream through progress/subscribeAll (else by listing them). */
  #followsAll = false;
  /** The daemon refused progress/subscribeAll: tail lists the streams instead, for good. */
  #refused = false;
  #listed = false;
  /** The listings, one after another: a reconnect's must not follow a done stream the first also does. */
  #listing: Promise<void> = Promise.resolve();
  /** The next list poll, while tail lists the streams rather than follows all of them. */
  #poller: NodeJS.Timeout | undefined;
  #stopped = false;
  /**
   * With followAll, the notifications of a stream not shown yet, held while progress/get says
   * which host it is on, so that its first line names the host as every later one does.
   */
  readonly #awaitingHost = new Map<ProgressToken, Notification[]>();
  /**
   * With followAll, the streams shown whose host look-up failed (not by a lost connection):
   * how many times, and how soon their next update may look again (TAIL_HOST_RETRY_BACKOFF).
   */
  readonly #hostRetries = new Map<ProgressToken, HostRetry>();

  constructor(
    client: GatewayClient,
    plan: TailPlan,
    io: Io,
    model: TailModel,
    view: View,
    finish: (code: number) => void,
  ) {
    this.#client = client;
    this.#minIntervalMs = plan.minIntervalMs;
    this.#io = io;
    this.#model = model;
    this.#view = view;
    this.#finish = finish;
    this.#following = new Following(plan.named);
  }

  /** `shownUpTo`: the row shows this value already, which the subscription replays first. */
  async follow(
    token: ProgressToken,
    startedAt?: number,
    host?: string,
    shownUpTo?: number,
  ): Promise<void> {
    this.#following.started(token, startedAt);
    this.#model.follow(token, startedAt);
    if (host !== undefined) this.#model.setHost(token, host);
    try {
      await this.#client.subscribe(
        { progressToken: token, minIntervalMs: this.#minIntervalMs },
        (n) => {
          const replayed =
            shownUpTo !== undefined &&
            n.method === 'notifications/progress' &&
            n.params.progress <= shownUpTo;
          if (!replayed) this.#received(n);
        },
      );
    } catch (error) {
      this.#following.failed(token);
      if (error instanceof BridgeError && error.code === 'disconnected') return;
      // JSON.stringify escapes C0 controls but neither DEL nor C1 controls, nor the daemon's message.
      this.#io.err(
        `${printable(`mcp-progress tail: cannot follow ${JSON.stringify(token)}: ${(error as Error).message}`)}\n`,
      );
    }
  }

  /** Follows every stream, as it starts; on a refusal, says why, and discover() lists them. */
  async followAll(): Promise<void> {
    const fallBack = (error: BridgeError) => {
      this.#followsAll = false;
      this.#refused = true;
      this.#io.err(
        `${printable(`mcp-progress tail: cannot follow every stream as it starts: ${error.message}; listing the streams every ${TAIL_POLL_MS / 1000} s instead, each followed from the value it has then`)}\n`,
      );
      // Refused at a reconnect's resubscribe: tail was not polling until now.
      this.pollWhileListing();
    };
    try {
      await this.#client.subscribeAll(
        { minIntervalMs: this.#minIntervalMs },
        (n) => this.#receivedFromAll(n),
        fallBack,
      );
      this.#followsAll = true;
    } catch (error) {
      if (error instanceof BridgeError && error.code !== 'disconnected') fallBack(error);
    }
  }

  /**
   * Lists the streams every TAIL_POLL_MS while tail does not follow all of them (the daemon refused
   * subscribeAll). Following all, it lists only at start and after a reconnect: the subscription
   * reports every stream that starts, its values and its done, and a progress/get each new
   * stream's host, so polling the whole table would learn nothing.
   */
  pollWhileListing(): void {
    if (this.#stopped || this.#followsAll || this.#poller !== undefined) return;
    this.#poller = setTimeout(
      () =>
        void this.discover().finally(() => {
          this.#poller = undefined;
          this.pollWhileListing();
        }),
      TAIL_POLL_MS,
    );
  }

  /**
   * Reconnected (the subscriptions are back): following all, one listing learns what the
   * connection may have missed, the hosts of streams that started again meanwhile (and the
   * finished streams, if the listing at start failed).
   */
  reconnected(): void {
    if (this.#followsAll) {
      void this.discover();
      return;
    }
    // A subscribeAll that a dropped connection cut off (not one the daemon refused) is asked
    // again: polling is only for a daemon that refuses it.
    if (this.#refused || this.#stopped) return;
    void this.followAll().then(() => {
      if (!this.#followsAll) return;
      clearTimeout(this.#poller);
      this.#poller = undefined;
      return this.discover();
    });
  }

  /** No more polls, not even after one in flight fails. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#poller);
  }

  /**
   * With followAll: the finished streams the daemon keeps (once), and each stream's host.
   * Without: follows the streams the daemon lists that are not followed yet.
   */
  discover(): Promise<void> {
    const listed = this.#listing.then(() => this.#discover());
    // A listing that threw must not stop the ones after it.
    this.#listing = listed.catch(() => {});
    return listed;
  }

  async #discover(): Promise<void> {
    let streams: StreamSummary[];
    try {
      streams = await this.#client.listAll();
    } catch {
      return; // disconnected: the gateway client reconnects, and lists again then (or polls)
    }
    if (this.#followsAll) {
      // The list comes after every notification sent before it: a stream done here with no
      // done shown, and none of its notifications held for its host, ended before
      // subscribeAll, which does not send it: at start, a finished stream the daemon keeps;
      // after a reconnect, a row shown running whose done the dropped connection missed.
      // (A held one is shown from its first value.)
      for (const stream of streams) {
        const token = stream.progressToken;
        const row = this.#model.get(token);
        if (
          (!this.#listed || row !== undefined) &&
          stream.state === 'done' &&
          row?.status === undefined &&
          !this.#awaitingHost.has(token)
        ) {
          // A row shown keeps what it shows: only the done is new.
          if (row === undefined) await this.follow(token, stream.startedAt, stream.host);
          else await this.follow(token, undefined, stream.host, row.progress);
        } else if (stream.host !== undefined) {
          this.#model.setHost(token, stream.host);
          this.#hostRetries.delete(token);
        }
      }
      this.#listed = true;
      return;
    }
    const { follow, restamp } = this.#following.review(streams);
    for (const { token, startedAt } of restamp) this.#model.restamp(token, startedAt);
    const hosts = new Map<ProgressToken, string>();
    for (const stream of streams)
      if (stream.host !== undefined) hosts.set(stream.progressToken, stream.host);
    for (const { token, startedAt } of follow)
      await this.follow(token, startedAt, hosts.get(token));
  }

  #receivedFromAll(notification: Notification): void {
    const token = notification.params.progressToken;
    // A stream followed on its own before subscribeAll took (or for its done): that
    // subscription shows it, and this would show each value twice.
    if (this.#following.isLive(token)) return;
    const held = this.#awaitingHost.get(token);
    if (held !== undefined) {
      held.push(notification);
      return;
    }
    // A value after the row's done starts a new stream under the token, perhaps on another host.
    const row = this.#model.get(token);
    const restarts = row?.status !== undefined && notification.method === 'notifications/progress';
    if (row !== undefined && !restarts) {
      this.#received(notification);
      this.#lookAgain(token);
      return;
    }
    this.#awaitingHost.set(token, [notification]);
    this.#hostRetries.delete(token);
    const release = (stream: StreamSummary | undefined) => {
      const notifications = this.#awaitingHost.get(token) ?? [];
      this.#awaitingHost.delete(token);
      this.#model.follow(token, stream?.startedAt);
      if (stream?.host !== undefined) this.#model.setHost(token, stream.host);
      for (const next of notifications) this.#received(next);
    };
    this.#client.get(token).then(release, (error: unknown) => {
      // Shown without its host for now: its next update looks again.
      release(undefined);
      this.#lookupFailed(token, error, 0);
    });
  }

  /** The stream's host look-up failed (`failures` before this one): when to look again, if at all. */
  #lookupFailed(token: ProgressToken, error: unknown, failures: number): void {
    const lost =
      error instanceof BridgeError && (error.code === 'disconnected' || error.code === 'closed');
    // A lost connection's reconnect lists the hosts; a finished stream has no next update.
    if (lost || failures >= TAIL_HOST_RETRIES || this.#model.get(token)?.status !== undefined) {
      this.#hostRetries.delete(token);
      return;
    }
    const waitMs = failures === 0 ? 0 : backoffDelayMs(TAIL_HOST_RETRY_BACKOFF, failures - 1);
    this.#hostRetries.set(token, {
      failures: failures + 1,
      notBefore: Date.now() + waitMs,
      looking: false,
    });
  }

  /** At an update of a stream shown without its host because its look-up failed: looks again. */
  #lookAgain(token: ProgressToken): void {
    const retry = this.#hostRetries.get(token);
    if (retry === undefined || retry.looking) return;
    if (Date.now() < retry.notBefore) {
      // Its done: no update follows it to look at.
      if (this.#model.get(token)?.status !== undefined) this.#hostRetries.delete(token);
      return;
    }
    retry.looking = true;
    this.#client.get(token).then(
      (stream) => {
        // A listing, or a restart of the stream under the token, came first: it knows better.
        if (this.#hostRetries.get(token) !== retry) return;
        this.#hostRetries.delete(token);
        if (stream?.host !== undefined) this.#model.setHost(token, stream.host);
      },
      (error: unknown) => {
        if (this.#hostRetries.get(token) === retry)
          this.#lookupFailed(token, error, retry.failures);
      },
    );
  }

  #received(notification: Notification): void {
    const now = Date.now();
    const row = this.#model.apply(notification, now);
    this.#view.show(notification, row, now);
    if (
      notification.method === 'notifications/progress/done' &&
      this.#following.done(notification.params.progressToken)
    )
      this.#finish(0);
  }
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
