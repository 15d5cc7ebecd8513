/**
 * The NATS backplane (docs/BACKPLANE.md): the only importer of the NATS client,
 * loaded only when the daemon is given --nats. It publishes what this host's
 * router accepts from its own workers, and feeds what other hosts publish into
 * the same router under one pseudo-connection per host, so every existing
 * surface (sessions, list, get, cancel) sees remote streams unchanged.
 */
import { readFileSync } from 'node:fs';
import {
  type ConnectionOptions,
  connect,
  credsAuthenticator,
  DeliverPolicy,
  DiscardPolicy,
  type JsMsg,
  type Msg,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import {
  type DoneFrame,
  isDoneFrame,
  isProgressFrame,
  type ProgressFrame,
  type ProgressToken,
} from '../protocol/index.js';
import type { DoneNotification, ProgressNotification } from '../protocol/notifications.js';
import type { Logger } from '../shared/log.js';
import type { ConnectionId, Router } from './router.js';

/** A lost host counts as lost after this many heartbeats were not heard. */
const MISSED_HEARTBEATS = 3;
/** How long the store keeps a stream's last message: past it, a late joiner no longer learns of it. */
const STORE_MAX_AGE_MS = 24 * 3_600_000;
/** Between two connection attempts while NATS is unreachable at start. */
const RETRY_MS = 2000;

export interface BackplaneOptions {
  readonly servers: readonly string[];
  readonly prefix: string;
  readonly name: string;
  readonly creds: string | undefined;
  readonly ca: string | undefined;
  readonly heartbeatMs: number;
  /** How long a lost host's streams stay active before they end as abandoned. */
  readonly abandonGraceMs: number;
}

/** What the backplane needs of its daemon. */
export interface BackplaneHost {
  readonly router: Router;
  readonly log: Logger;
  now(): number;
  /** Runs the router's due work after the backplane changed the table. */
  schedule(): void;
  /** Sends cancel to this host's own workers of the token; returns how many were told. */
  cancelLocal(token: ProgressToken, reason: string | undefined): number;
}

/** The subject token of a progressToken: base64url of its JSON, so "7" and 7 differ. */
export function tokenSubject(token: ProgressToken): string {
  return Buffer.from(JSON.stringify(token), 'utf8').toString('base64url');
}

interface RemoteHost {
  readonly name: string;
  readonly connection: ConnectionId;
  lastSeen: number;
  lost: boolean;
  /** Ends its active streams as abandoned when it does not come back. */
  graceTimer: NodeJS.Timeout | undefined;
}

export class Backplane {
  readonly #options: BackplaneOptions;
  readonly #host: BackplaneHost;
  readonly #log: Logger;
  #nc: NatsConnection | undefined;
  #connected = false;
  #stopped = false;
  #retry: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** This daemon's tokens: the subject each publishes on. */
  readonly #local = new Map<ProgressToken, string>();
  /** Remote tokens and the host that publishes each. */
  readonly #remote = new Map<ProgressToken, RemoteHost>();
  readonly #hosts = new Map<string, RemoteHost>();
  readonly #byConnection = new Map<ConnectionId, RemoteHost>();
  #nextConnection = -1;
  /** Tokens already warned about, so a conflict is logged once. */
  readonly #warned = new Set<ProgressToken>();
  /** Messages from the backplane that failed validation. */
  invalidMessages = 0;
  readonly #ready: Promise<void>;
  #markReady: () => void = () => {};

  constructor(options: BackplaneOptions, host: BackplaneHost) {
    this.#options = options;
    this.#host = host;
    this.#log = host.log;
    this.#ready = new Promise((resolve) => {
      this.#markReady = resolve;
    });
    host.router.observe((connection, notification, last) =>
      this.#published(connection, notification, last),
    );
  }

  get name(): string {
    return this.#options.name;
  }

  /** Resolves once joined; joining goes on in the background until then. */
  get ready(): Promise<void> {
    return this.#ready;
  }

  /** Starts joining; never throws: an unreachable NATS is retried while the daemon runs locally. */
  start(): void {
    void this.#attempt(true);
  }

  async #attempt(first: boolean): Promise<void> {
    if (this.#stopped) return;
    try {
      const nc = await connect(this.#connectionOptions());
      if (this.#stopped) {
        await nc.close();
        return;
      }
      this.#nc = nc;
      await this.#join(nc);
    } catch (error) {
      if (first) {
        this.#log.warn(
          `backplane: NATS at ${this.#options.servers.join(', ')} cannot be reached (${(error as Error).message}): ` +
            `running locally, retrying every ${RETRY_MS / 1000} s`,
        );
      }
      const nc = this.#nc;
      this.#nc = undefined;
      await nc?.close().catch(() => {});
      if (!this.#stopped) {
        this.#retry = setTimeout(() => void this.#attempt(false), RETRY_MS);
        this.#retry.unref();
      }
    }
  }

  #connectionOptions(): ConnectionOptions {
    const options: ConnectionOptions = {
      servers: [...this.#options.servers],
      name: `mcp-progress ${this.#options.name}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 1000,
    };
    if (this.#options.creds !== undefined) {
      options.authenticator = credsAuthenticator(readFileSync(this.#options.creds));
    }
    if (this.#options.ca !== undefined) options.tls = { caFile: this.#options.ca };
    return options;
  }

  get #streamName(): string {
    return `${this.#options.prefix.replaceAll('.', '_')}_streams`;
  }

  async #join(nc: NatsConnection): Promise<void> {
    const prefix = this.#options.prefix;
    const jsm = await nc.jetstreamManager();
    const config = {
      name: this.#streamName,
      subjects: [`${prefix}.s.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_msgs_per_subject: 1,
      max_age: nanos(STORE_MAX_AGE_MS),
    };
    try {
      await jsm.streams.add(config);
    } catch (error) {
      // Another daemon made it first (perhaps with other limits): use it as it is.
      await jsm.streams.info(this.#streamName).catch(() => {
        throw error;
      });
    }
    nc.subscribe(`${prefix}.h.*`, { callback: (error, msg) => error || this.#heartbeatIn(msg) });
    nc.subscribe(`${prefix}.c.${this.#options.name}`, {
      callback: (error, msg) => error || this.#cancelIn(msg),
    });
    const js = nc.jetstream();
    // The last message of every stream subject first, then every new one, in one ordered flow:
    // a late joiner learns the last values with no gap and no race against live messages.
    const consumer = await js.consumers.get(this.#streamName, {
      // One subject as a string: nats-server before 2.10 (Debian's) has no filter_subjects list.
      filterSubjects: `${prefix}.s.>`,
      deliver_policy: DeliverPolicy.LastPerSubject,
    });
    const messages = await consumer.consume();
    void (async () => {
      for await (const msg of messages) this.#streamIn(msg);
    })().catch((error: Error) => this.#log.error(`backplane: consumer stopped: ${error.message}`));
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === 'disconnect') {
          this.#connected = false;
          this.#log.warn('backplane: lost NATS, reconnecting');
        } else if (status.type === 'reconnect') {
          this.#rejoined();
        }
      }
    })();
    this.#connected = true;
    this.#republishLocal();
    this.#sendHeartbeat('up');
    this.#heartbeat = setInterval(() => this.#beat(), this.#options.heartbeatMs);
    this.#heartbeat.unref();
    this.#log.info(
      `backplane: joined NATS ${nc.getServer()} as ${this.#options.name} (prefix ${prefix})`,
    );
    this.#markReady();
  }

  #rejoined(): void {
    this.#connected = true;
    const now = this.#host.now();
    // While this daemon was cut off it heard nobody: that says nothing about the others.
    for (const host of this.#hosts.values()) host.lastSeen = now;
    this.#republishLocal();
    this.#log.info('backplane: NATS reconnected');
  }

  /** Puts the last value of every local stream on the backplane again (after a NATS restart). */
  #republishLocal(): void {
    for (const token of this.#local.keys()) {
      const summary = this.#host.router.get(token);
      if (summary?.last === undefined || summary.state !== 'active') continue;
      this.#send(token, { kind: 'progress', params: summary.last });
    }
  }

  /** The host that publishes a remote token, while this daemon mirrors it. */
  hostOf(token: ProgressToken): string | undefined {
    return this.#remote.get(token)?.name;
  }

  /** Whether a local worker may publish the token: not while another host publishes it. */
  refusal(token: ProgressToken): { ok: false; code: 'token_in_use'; message: string } | undefined {
    const remote = this.#remote.get(token);
    if (remote === undefined || this.#host.router.get(token)?.state !== 'active') return undefined;
    return {
      ok: false,
      code: 'token_in_use',
      message: `token ${JSON.stringify(token)} is already published by host ${remote.name} of the NATS backplane: use a token of your own (the relay mints unique ones)`,
    };
  }

  /** Whether the router connection stands for a remote host. */
  isRemote(connection: ConnectionId): boolean {
    return this.#byConnection.has(connection);
  }

  /** Forwards a cancel to the host of a remote stream. */
  cancel(connection: ConnectionId, token: ProgressToken, reason: string | undefined): boolean {
    const host = this.#byConnection.get(connection);
    if (host === undefined || this.#nc === undefined || !this.#connected) return false;
    const data = reason === undefined ? { progressToken: token } : { progressToken: token, reason };
    this.#nc.publish(`${this.#options.prefix}.c.${host.name}`, JSON.stringify(data));
    return true;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#host.router.observe(undefined);
    clearTimeout(this.#retry);
    clearInterval(this.#heartbeat);
    for (const host of this.#hosts.values()) clearTimeout(host.graceTimer);
    const nc = this.#nc;
    this.#nc = undefined;
    if (nc === undefined) return;
    if (this.#connected) {
      this.#sendHeartbeat('down');
      await nc.flush().catch(() => {});
    }
    await nc.close().catch(() => {});
  }

  #published(
    connection: ConnectionId | undefined,
    notification: ProgressNotification | DoneNotification,
    last: ProgressNotification | undefined,
  ): void {
    const token = notification.params.progressToken;
    if (connection !== undefined ? this.#byConnection.has(connection) : this.#remote.has(token)) {
      return;
    }
    if (notification.method === 'notifications/progress') {
      this.#send(token, { kind: 'progress', params: notification.params });
    } else {
      const message: Record<string, unknown> = { kind: 'done', params: notification.params };
      if (last !== undefined) message.last = last.params;
      this.#send(token, message);
      this.#local.delete(token);
    }
  }

  #send(token: ProgressToken, message: object): void {
    let subject = this.#local.get(token);
    if (subject === undefined) {
      subject = `${this.#options.prefix}.s.${this.#options.name}.${tokenSubject(token)}`;
      this.#local.set(token, subject);
    }
    // Before joining, and while cut off, the client buffers nothing useful: the last value
    // is put on the backplane again when it (re)joins.
    if (this.#nc !== undefined && this.#connected) {
      this.#nc.publish(subject, JSON.stringify(message));
    }
  }

  #streamIn(msg: JsMsg): void {
    const parts = msg.subject.split('.');
    const name = parts.at(-2);
    const subjectToken = parts.at(-1);
    if (name === undefined || subjectToken === undefined || name === this.#options.name) return;
    const message = parseMessage(msg.data);
    const params = message?.params as Record<string, unknown> | undefined;
    const token = params?.progressToken as ProgressToken | undefined;
    const valid =
      message !== undefined &&
      token !== undefined &&
      (typeof token === 'string' || typeof token === 'number') &&
      tokenSubject(token) === subjectToken;
    if (!valid) {
      this.#invalid(msg.subject, 'not a message of this backplane');
      return;
    }
    if (this.#local.has(token)) {
      if (!this.#warned.has(token)) {
        this.#warned.add(token);
        this.#log.warn(
          `backplane: host ${name} publishes token ${JSON.stringify(token)}, which a worker of this host publishes too; its messages are ignored here`,
        );
      }
      return;
    }
    const host = this.#hostNamed(name);
    this.#seen(host);
    const now = this.#host.now();
    const router = this.#host.router;
    if (message.kind === 'progress') {
      const frame = { v: 1, ...params };
      if (!isProgressFrame(frame)) {
        this.#invalid(msg.subject, 'progress params invalid');
        return;
      }
      this.#remote.set(token, host);
      // A replayed or repeated value is refused by the router as not increasing: nothing regresses.
      router.publish(host.connection, frame as ProgressFrame, now);
    } else if (message.kind === 'done') {
      const frame = { v: 1, ...params };
      if (!isDoneFrame(frame)) {
        this.#invalid(msg.subject, 'done params invalid');
        return;
      }
      this.#remote.set(token, host);
      const last = message.last === undefined ? undefined : { v: 1, ...(message.last as object) };
      if (last !== undefined && isProgressFrame(last) && last.progressToken === token) {
        router.publish(host.connection, last as ProgressFrame, now);
      }
      router.finish(host.connection, frame as DoneFrame, now);
    } else {
      this.#invalid(msg.subject, `unknown kind ${JSON.stringify(message.kind)}`);
      return;
    }
    this.#host.schedule();
  }

  #invalid(subject: string, why: string): void {
    this.invalidMessages++;
    if (this.invalidMessages === 1 || this.invalidMessages % 1000 === 0) {
      this.#log.warn(
        `backplane: ignored a message on ${subject.slice(0, 200)}: ${why} (${this.invalidMessages} so far)`,
      );
    }
  }

  #cancelIn(msg: Msg): void {
    const data = parseMessage(msg.data);
    const token = data?.progressToken;
    const reason = data?.reason;
    if (
      (typeof token !== 'string' && typeof token !== 'number') ||
      (reason !== undefined && typeof reason !== 'string')
    ) {
      this.#invalid(msg.subject, 'not a cancel of this backplane');
      return;
    }
    if (!this.#local.has(token)) return;
    this.#host.cancelLocal(token, reason as string | undefined);
  }

  #heartbeatIn(msg: Msg): void {
    const name = msg.subject.split('.').at(-1);
    if (name === undefined || name === this.#options.name) return;
    const data = parseMessage(msg.data);
    if (data?.state !== 'up' && data?.state !== 'down') {
      this.#invalid(msg.subject, 'not a heartbeat of this backplane');
      return;
    }
    const host = this.#hostNamed(name);
    if (data.state === 'up') this.#seen(host);
    else this.#lose(host, 'stopped');
  }

  #hostNamed(name: string): RemoteHost {
    let host = this.#hosts.get(name);
    if (host === undefined) {
      host = {
        name,
        connection: this.#nextConnection--,
        lastSeen: this.#host.now(),
        lost: false,
        graceTimer: undefined,
      };
      this.#hosts.set(name, host);
      this.#byConnection.set(host.connection, host);
    }
    return host;
  }

  #seen(host: RemoteHost): void {
    host.lastSeen = this.#host.now();
    if (!host.lost) return;
    host.lost = false;
    clearTimeout(host.graceTimer);
    host.graceTimer = undefined;
    this.#log.info(`backplane: host ${host.name} is back`);
  }

  #beat(): void {
    if (!this.#connected) return;
    this.#sendHeartbeat('up');
    const silentSince = this.#host.now() - MISSED_HEARTBEATS * this.#options.heartbeatMs;
    for (const host of this.#hosts.values()) {
      if (!host.lost && host.lastSeen < silentSince) this.#lose(host, 'silent');
    }
    // Remote tokens the router evicted (done and past retention) are forgotten too.
    for (const [token] of this.#remote) {
      if (this.#host.router.get(token) === undefined) this.#remote.delete(token);
    }
  }

  #sendHeartbeat(state: 'up' | 'down'): void {
    this.#nc?.publish(`${this.#options.prefix}.h.${this.#options.name}`, JSON.stringify({ state }));
  }

  /** A host stopped or went silent: its active streams end as abandoned after the grace. */
  #lose(host: RemoteHost, why: 'stopped' | 'silent'): void {
    if (host.lost) return;
    host.lost = true;
    const grace = this.#options.abandonGraceMs;
    const what =
      why === 'stopped'
        ? 'its daemon stopped'
        : `no heartbeat for ${(MISSED_HEARTBEATS * this.#options.heartbeatMs) / 1000} s`;
    this.#log.warn(
      `backplane: host ${host.name} is lost (${what}); its streams end in ${grace / 1000} s unless it comes back`,
    );
    host.graceTimer = setTimeout(() => {
      host.graceTimer = undefined;
      const router = this.#host.router;
      const now = this.#host.now();
      for (const [token, owner] of this.#remote) {
        if (owner !== host || router.get(token)?.state !== 'active') continue;
        router.abandon(
          token,
          `host ${host.name} left the backplane (${what}) and did not come back within ${grace / 1000} s`,
          now,
        );
      }
      this.#host.schedule();
    }, grace);
    host.graceTimer.unref();
  }
}

function parseMessage(data: Uint8Array): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(data).toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
