/**
 * The NATS backplane (docs/BACKPLANE.md): the only importer of the NATS client,
 * loaded only when the daemon is given --nats. It publishes what this host's
 * router accepts from its own workers, and feeds what other hosts publish into
 * the same router under one pseudo-connection per host, so every existing
 * surface (sessions, list, get, cancel) sees remote streams unchanged. Here: the
 * NATS connection (join, rejoin, catch-up) and what goes in and out on it; the
 * names on NATS are backplane-names.ts, the other hosts remote-hosts.ts.
 *
 * Live values travel on plain subjects, so none is lost; a JetStream stream that
 * keeps the last message of each subject lets a daemon that (re)joins catch up. It is fed
 * on subjects of its own, with each stream's latest message at most every STORE_EVERY_MS,
 * so storing is off the hot path. The router on the receiving host takes a value only when
 * it is greater than the last, so a stored value that arrives after a live one, or a kept
 * copy of one it has, is refused, never regressed.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  type ConnectionOptions,
  connect,
  createInbox,
  credsAuthenticator,
  DiscardPolicy,
  type JetStreamManager,
  type Msg,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
  type Subscription,
} from 'nats';
import {
  type BackplaneStreamMessage,
  type DaemonStatus,
  type DoneFrame,
  fitsUtf8Bytes,
  MAX_HOST_NAME_BYTES,
  type ProgressFrame,
  type ProgressToken,
  parseBackplaneCancel,
  parseBackplaneHeartbeat,
  parseBackplaneNameClaim,
  parseBackplaneStream,
} from '../protocol/index.js';
import type { DoneNotification, ProgressNotification } from '../protocol/notifications.js';
import {
  BACKPLANE_CONFIRM_MS,
  BACKPLANE_MAX_HOSTS,
  BACKPLANE_MAX_STREAMS_PER_HOST,
  BACKPLANE_MAX_UNCONFIRMED,
  BACKPLANE_MAX_UNCONFIRMED_BYTES,
  BACKPLANE_STALL_HEARTBEATS,
} from '../shared/defaults.js';
import type { Logger } from '../shared/log.js';
import { PauseWatch } from '../shared/pause-watch.js';
import { credsRefusal } from './backplane-creds.js';
import { BackplaneSubjects, redacted, splitCredentials, tokenSubject } from './backplane-names.js';
import { RemoteHosts } from './remote-hosts.js';
import type { ConnectionId, Router } from './router.js';

/** How long the store keeps a stream's last message: past it, a late joiner no longer learns of it. */
const STORE_MAX_AGE_MS = 24 * 3_600_000;
/** Between two connection attempts while NATS is unreachable at start. */
const RETRY_MS = 2000;
/**
 * A catch-up that waits this long for JetStream (the consumer it asked for, or the next stored
 * message) gives up with a warning: a cluster without JetStream quorum does not answer.
 */
const CATCH_UP_IDLE_MS = 5000;
/** How many stored messages a catch-up asks for at a time. */
const CATCH_UP_BATCH = 256;
/** The JetStream API's subjects (no domain: the daemon uses the default). */
const JS_API = '$JS.API';
/**
 * How often each stream's latest message is put on its kept subject, for the store. Storing
 * every value in the file store was most of the latency the backplane added at 10,000 values
 * a second (docs/BACKPLANE.md, "Latency"). A late joiner's stored value is at most this much
 * older than the live one, and the kept copy it also receives live brings it level.
 */
const STORE_EVERY_MS = 100;

export interface BackplaneOptions {
  readonly servers: readonly string[];
  readonly prefix: string;
  readonly name: string;
  readonly creds: string | undefined;
  readonly ca: string | undefined;
  readonly heartbeatMs: number;
  /** How long a lost host's streams stay active before they end as abandoned. */
  readonly abandonGraceMs: number;
  /** A stored done older than this is not taken by a late joiner (the router's retention). */
  readonly retentionMs: number;
  /** A stored value older than this is not taken by a late joiner (the router's stream TTL). */
  readonly streamTtlMs: number;
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

type BackplaneStatus = NonNullable<DaemonStatus['backplane']>;

export class Backplane {
  readonly #options: BackplaneOptions;
  readonly #host: BackplaneHost;
  readonly #log: Logger;
  readonly #subjects: BackplaneSubjects;
  readonly #hosts: RemoteHosts;
  #nc: NatsConnection | undefined;
  #jsm: JetStreamManager | undefined;
  #connected = false;
  #stopped = false;
  #warnedUnreachable = false;
  #retry: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Whether the first join is done: only it adopts what an earlier daemon of this host left. */
  #joined = false;
  /** The catch-up under way: a stop, or the catch-up of a reconnect, cancels it. */
  #catchUpRead: StoreRead | undefined;
  /** This daemon's tokens, active or done, while its router keeps them: the subjects of each. */
  readonly #local = new Map<ProgressToken, StreamSubjects>();
  /** The latest message of each local stream not yet on its kept subject. */
  readonly #storeDue = new Map<ProgressToken, string>();
  #storeTimer: NodeJS.Timeout | undefined;
  /** An existing store that captures other subjects than this version's was warned about. */
  #warnedStore = false;
  /**
   * The pseudo-connection that publishes, at join, the streams an earlier daemon of this host left
   * in the store: it leaves at once, so the router ends them as abandoned after the grace unless
   * a worker of this daemon takes them up again.
   */
  readonly #adopter: ConnectionId;
  /**
   * Tokens already warned about, with the start of the stream warned about: a conflict is logged
   * once a stream, and forgotten with it.
   */
  readonly #warned = new Map<ProgressToken, number>();
  /** Messages from the backplane that failed validation. */
  #invalidMessages = 0;
  /** This daemon process on the backplane: in its heartbeats and its answers to name checks. */
  readonly #instance = randomBytes(4).toString('hex');
  /** When it joined (epoch ms), for its answers to name checks. */
  #joinedAt = 0;
  /** Why it did not join: another live daemon has its name. */
  #refused: string | undefined;
  /** Instances of other daemons heard using this daemon's name, each logged once. */
  readonly #namesakes = new Set<string>();
  /** Stream messages sent since the server last confirmed, and those made while cut off, in order. */
  #unconfirmed: StreamMessage[] = [];
  /** The bytes of #unconfirmed (subjects and bodies), capped by BACKPLANE_MAX_UNCONFIRMED_BYTES. */
  #unconfirmedBytes = 0;
  #confirming: NodeJS.Timeout | undefined;
  /**
   * When the flush of the confirmation under way began: one at a time, so two never take the
   * same messages off the list; one unanswered for BACKPLANE_STALL_HEARTBEATS means NATS stalled.
   */
  #confirmation: { since: number } | undefined;
  /**
   * Between two confirms: whether this daemon itself stood still. One heartbeat, a third of the
   * stall window, not two BACKPLANE_CONFIRM_MS: a busy event loop late by a few hundred ms must
   * not keep postponing the verdict on a NATS that did stall.
   */
  readonly #confirmPause: PauseWatch;
  /**
   * Stream messages of this turn of the event loop, handed to the client together once the poll
   * phase has read every worker socket that was ready: one write to NATS for all of them, not one
   * per socket read (the client writes at the end of each microtask queue, so once per read).
   */
  #outbox: StreamMessage[] = [];
  #outboxImmediate: NodeJS.Immediate | undefined;

  constructor(options: BackplaneOptions, host: BackplaneHost) {
    this.#options = options;
    this.#host = host;
    this.#log = host.log;
    this.#subjects = new BackplaneSubjects(options.prefix, options.name);
    this.#confirmPause = new PauseWatch(host.now(), options.heartbeatMs);
    this.#hosts = new RemoteHosts({
      log: host.log,
      now: () => host.now(),
      heartbeatMs: options.heartbeatMs,
      abandonGraceMs: options.abandonGraceMs,
      abandon: (tokens, reason) => {
        const now = host.now();
        for (const token of tokens) host.router.abandon(token, reason, now);
        host.schedule();
      },
    });
    this.#adopter = this.#hosts.newConnection();
    // Streams this daemon already holds (dones its journal recovered) are its own.
    for (const summary of host.router.list()) {
      if (summary.state !== 'waiting') this.#localSubjects(summary.progressToken);
    }
    host.router.observe((connection, notification, last) =>
      this.#published(connection, notification, last),
    );
  }

  get name(): string {
    return this.#options.name;
  }

  /** Starts joining; never throws: an unreachable NATS is retried while the daemon runs locally. */
  start(): void {
    void this.#attempt();
  }

  async #attempt(): Promise<void> {
    if (this.#stopped) return;
    let nc: NatsConnection | undefined;
    try {
      nc = await connect(this.#connectionOptions());
      if (this.#stopped) {
        await nc.close();
        return;
      }
      this.#nc = nc;
      await this.#join(nc);
    } catch (error) {
      const why = (error as Error).message;
      if (!this.#warnedUnreachable) {
        this.#warnedUnreachable = true;
        this.#log.warn(
          `backplane: cannot join NATS at ${redacted(this.#options.servers)} (${why}): running locally, retrying every ${RETRY_MS / 1000} s` +
            (/author|auth/i.test(why) ? `; ${this.#refusedCredentials()}` : ''),
        );
      } else {
        this.#log.debug(`backplane: NATS still unreachable (${why})`);
      }
      this.#nc = undefined;
      this.#connected = false;
      clearInterval(this.#heartbeat);
      await nc?.close().catch(() => {});
      if (!this.#stopped) {
        this.#retry = setTimeout(() => void this.#attempt(), RETRY_MS);
        this.#retry.unref();
      }
    }
  }

  /** Why the server refused this daemon's credentials, as far as this side can tell. */
  #refusedCredentials(): string {
    const file = this.#options.creds;
    if (file === undefined) {
      return 'the server refused the credentials: check the user and password or token in the URL, or give --nats-creds';
    }
    let creds: string;
    try {
      creds = readFileSync(file, 'utf8');
    } catch (error) {
      return `--nats-creds ${file} is no longer readable (${(error as Error).message})`;
    }
    return credsRefusal(file, creds, Date.now());
  }

  #connectionOptions(): ConnectionOptions {
    const { servers, user, pass, token } = splitCredentials(this.#options.servers);
    const options: ConnectionOptions = {
      servers,
      name: `mcp-progress ${this.#options.name}`,
      // Once joined, the client reconnects for ever; the first connection is retried by #attempt.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 1000,
      // This daemon's own messages do not come back to it.
      noEcho: true,
      // A server that stops answering (stopped, not closed: its socket stays open) is lost within
      // BACKPLANE_STALL_HEARTBEATS heartbeats even when no stream message is waiting for a flush.
      pingInterval: this.#options.heartbeatMs,
      maxPingOut: BACKPLANE_STALL_HEARTBEATS - 1,
    };
    if (user !== undefined) options.user = user;
    if (pass !== undefined) options.pass = pass;
    if (token !== undefined) options.token = token;
    if (this.#options.creds !== undefined) {
      options.authenticator = credsAuthenticator(readFileSync(this.#options.creds));
    }
    if (this.#options.ca !== undefined) options.tls = { caFile: this.#options.ca };
    else if (this.#options.servers.some((url) => url.startsWith('tls://'))) options.tls = {};
    return options;
  }

  /** The JetStream stream that keeps the last message of each stream subject. */
  async #ensureStore(nc: NatsConnection): Promise<void> {
    const jsm = await nc.jetstreamManager();
    const config = {
      name: this.#subjects.store,
      subjects: [this.#subjects.allKept],
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
      const info = await jsm.streams.info(this.#subjects.store).catch(() => {
        throw error;
      });
      this.#checkStoreSubjects(info.config.subjects ?? []);
    }
    this.#jsm = jsm;
  }

  /**
   * A store made by a version that stored the live subjects: it does not capture the kept ones,
   * so nothing new is stored and a catch-up is refused, and it still stores every live value.
   * Not changed here: a host's NATS user may create the store, not update it.
   */
  #checkStoreSubjects(subjects: readonly string[]): void {
    if (subjects.includes(this.#subjects.allKept) || this.#warnedStore) return;
    this.#warnedStore = true;
    this.#log.warn(
      `backplane: the JetStream store ${this.#subjects.store} captures ${subjects.join(', ') || 'no subject'}, ` +
        `not ${this.#subjects.allKept}: an older mcp-progress-bridge made it. Live values go on, but a daemon ` +
        `that joins cannot catch up; remove it (nats stream rm ${this.#subjects.store}) and the next daemon to join makes it again`,
    );
  }

  async #join(nc: NatsConnection): Promise<void> {
    // Watched from the start: a disconnect during the join is not missed.
    void this.#watch(nc);
    // Before anything is heard or said: a daemon that may not join takes nothing in.
    const holder = await this.#nameHolder(nc);
    if (holder !== undefined) {
      this.#refuse(nc, holder);
      return;
    }
    this.#joinedAt = Date.now();
    // Only now: two daemons checking the same name at once must not answer each other.
    nc.subscribe(this.#subjects.nameCheckOf(this.#options.name), {
      callback: (error, msg) => error || this.#nameCheckIn(msg),
    });
    await this.#ensureStore(nc);
    // Live subscriptions first, registered at the server (flush), then the stored last values:
    // a value published in between arrives live, and the older stored one is refused as not greater.
    // The kept subjects too: a kept copy stored after the catch-up read the store brings a stream
    // that has paused since level with its last value.
    for (const subject of [this.#subjects.allStreams, this.#subjects.allKept]) {
      nc.subscribe(subject, {
        callback: (error, msg) => error || this.#streamIn(msg.subject, msg.data, undefined),
      });
    }
    nc.subscribe(this.#subjects.allHeartbeats, {
      callback: (error, msg) => error || this.#heartbeatIn(msg),
    });
    nc.subscribe(this.#subjects.cancelOf(this.#options.name), {
      callback: (error, msg) => error || this.#cancelIn(msg),
    });
    await nc.flush();
    this.#connected = true;
    this.#republishLocal();
    this.#sendHeartbeat('up');
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => this.#beat(), this.#options.heartbeatMs);
    this.#heartbeat.unref();
    clearInterval(this.#confirming);
    this.#confirming = setInterval(() => void this.#confirm(), BACKPLANE_CONFIRM_MS);
    this.#confirming.unref();
    await this.#catchUp(nc);
    if (this.#stopped) return;
    this.#joined = true;
    this.#router.removeConnection(this.#adopter, this.#host.now());
    this.#host.schedule();
    if (this.#warnedUnreachable) this.#log.info('backplane: NATS is reachable now');
    this.#log.info(
      `backplane: joined NATS ${nc.getServer()} as ${this.#options.name} (prefix ${this.#options.prefix})`,
    );
  }

  get #router(): Router {
    return this.#host.router;
  }

  /**
   * Asks on the name-check subject whether a live daemon has this daemon's name: its answer, or
   * undefined when nobody answers (no responders at once; a dead one's leftover subscription
   * within a heartbeat interval).
   */
  async #nameHolder(nc: NatsConnection): Promise<{ instance: string; since: number } | undefined> {
    const question = { v: 1, instance: this.#instance, since: Date.now() };
    try {
      const answer = await nc.request(
        this.#subjects.nameCheckOf(this.#options.name),
        JSON.stringify(question),
        { timeout: this.#options.heartbeatMs },
      );
      return parseBackplaneNameClaim(parseJson(answer.data));
    } catch (error) {
      this.#log.debug(`backplane: name check: ${(error as Error).message}`);
      return undefined;
    }
  }

  /** Another live daemon has this name: this one stays local and says which one. */
  #refuse(nc: NatsConnection, holder: { instance: string; since: number }): void {
    this.#refused =
      `another live daemon already joined NATS ${redacted(this.#options.servers)} as ${this.#options.name} ` +
      `(instance ${holder.instance}, joined ${new Date(holder.since).toISOString()}), prefix ${this.#options.prefix}`;
    this.#log.error(
      `backplane: not joining: ${this.#refused}. Two daemons under one name would end each other's streams; ` +
        'give this one a --nats-name of its own (or stop the other), then restart it. Running locally.',
    );
    this.#nc = undefined;
    this.#connected = false;
    this.#stopped = true;
    void nc.close().catch(() => {});
  }

  /** A daemon about to join under this daemon's name asks: this one is alive, and says so. */
  #nameCheckIn(msg: Msg): void {
    const question = parseBackplaneNameClaim(parseJson(msg.data));
    if (question === undefined || msg.reply === undefined) {
      this.#invalid(msg.subject, 'not a name check of this backplane');
      return;
    }
    this.#log.warn(
      `backplane: another daemon (instance ${question.instance}) tried to join as ${this.#options.name}; it was told this one (instance ${this.#instance}) has the name`,
    );
    msg.respond(JSON.stringify({ v: 1, instance: this.#instance, since: this.#joinedAt }));
  }

  async #watch(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (this.#stopped || this.#nc !== nc) return;
      if (status.type === 'staleConnection') {
        this.#stalled('its PINGs went unanswered');
      } else if (status.type === 'disconnect') {
        this.#connected = false;
        this.#log.warn(
          'backplane: lost NATS, reconnecting; values published meanwhile go out when it is back',
        );
      } else if (status.type === 'reconnect') {
        this.#rejoined(nc).catch((error: Error) =>
          this.#log.error(`backplane: rejoining failed: ${error.message}`),
        );
      } else if (status.type === 'error') {
        // A slow consumer among them: NATS cut this daemon off for reading too slowly; at
        // reconnect the catch-up restores the last value of every stream.
        this.#log.warn(`backplane: NATS reports ${String(status.data)}`);
      }
    }
  }

  /**
   * NATS stopped answering while its socket stays open: taken as lost now, before the client has
   * buffered without bound what this daemon keeps writing; nothing more is handed to the client
   * until the reconnect, which sends what is kept and every stream's newest value and end.
   */
  #stalled(why: string): void {
    if (!this.#connected) return;
    this.#connected = false;
    this.#log.warn(
      `backplane: NATS has not answered for ${(BACKPLANE_STALL_HEARTBEATS * this.#options.heartbeatMs) / 1000} s (${why}): taking it as lost`,
    );
  }

  async #rejoined(nc: NatsConnection): Promise<void> {
    // A flush of the old connection is no longer waited for.
    this.#confirmation = undefined;
    // Live first: what the old server may not have passed on, then every stream's last value.
    await nc.flush();
    this.#connected = true;
    this.#hosts.allSeenNow();
    this.#resendUnconfirmed(nc);
    this.#republishLocal();
    this.#sendHeartbeat('up');
    this.#host.schedule();
    this.#log.info(`backplane: NATS reconnected to ${nc.getServer()}`);
    // A NATS that restarted on an empty store needs the stream again, and the last values in it;
    // a cluster that lost its JetStream quorum with the dead server has none: live goes on.
    try {
      await this.#ensureStore(nc);
    } catch (error) {
      this.#log.warn(
        `backplane: NATS reconnected but its JetStream is unavailable (${(error as Error).message}): live values go on; a daemon that joins meanwhile cannot catch up`,
      );
      return;
    }
    this.#republishLocal();
    await this.#catchUp(nc);
    this.#host.schedule();
  }

  /** After a reconnect: what the old server may not have passed on, and what was made while cut off. */
  #resendUnconfirmed(nc: NatsConnection): void {
    // The outbox's messages are among the unconfirmed: sent here, they must not go twice.
    this.#outbox = [];
    for (const { subject, data } of this.#unconfirmed) nc.publish(subject, data);
  }

  /** Hands this turn's stream messages to the client, in order; it writes them in one go. */
  #publishOutbox(): void {
    clearImmediate(this.#outboxImmediate);
    this.#outboxImmediate = undefined;
    const outbox = this.#outbox;
    if (outbox.length === 0) return;
    this.#outbox = [];
    const nc = this.#nc;
    // Cut off meanwhile: they are among the unconfirmed, which the reconnect sends.
    if (nc === undefined || !this.#connected) return;
    for (const { subject, data } of outbox) {
      try {
        nc.publish(subject, data);
      } catch (error) {
        // A connection closing under us: the reconnect sends it again; the local path goes on.
        this.#log.debug(`backplane: could not publish on ${subject}: ${(error as Error).message}`);
      }
    }
  }

  /** Drops the stream messages the server has seen: those sent before a flush that returned. */
  async #confirm(): Promise<void> {
    const nc = this.#nc;
    if (nc === undefined || !this.#connected) return;
    const pending = this.#confirmation;
    // This daemon stood still: the answer to the flush may be unread yet; it gets a fresh window.
    if (this.#confirmPause.resumed(this.#host.now()) && pending !== undefined) {
      pending.since = this.#host.now();
    }
    if (pending !== undefined) {
      if (
        this.#host.now() - pending.since >=
        BACKPLANE_STALL_HEARTBEATS * this.#options.heartbeatMs
      ) {
        this.#stalled('a flush went unanswered');
        // The client's own transport may look healthy: a reconnect closes it, and frees what it buffered.
        nc.reconnect().catch(() => {});
      }
      return;
    }
    if (this.#unconfirmed.length === 0) return;
    // The flush confirms only what went before its PING.
    this.#publishOutbox();
    const kept = this.#unconfirmed;
    const sent = kept.length;
    const confirmation = { since: this.#host.now() };
    this.#confirmation = confirmation;
    try {
      await nc.flush();
    } catch {
      return;
    } finally {
      if (this.#confirmation === confirmation) this.#confirmation = undefined;
    }
    // Not when the connection went meanwhile, nor when the list was dropped for a new one.
    if (nc === this.#nc && this.#connected && kept === this.#unconfirmed) {
      for (let i = 0; i < sent; i++) this.#unconfirmedBytes -= kept[i]?.bytes ?? 0;
      kept.splice(0, sent);
    }
  }

  /**
   * Reads the last stored message of every stream subject once, then stops: live messages come on
   * the plain subscription. Never longer than JetStream keeps answering (StoreRead), and an
   * earlier catch-up still reading ends first, leaving nothing behind.
   */
  async #catchUp(nc: NatsConnection): Promise<void> {
    this.#catchUpRead?.cancel();
    if (this.#stopped) return;
    const read = new StoreRead(nc, this.#subjects.store, this.#subjects.allKept, (s, d, age) =>
      this.#streamIn(s, d, age),
    );
    this.#catchUpRead = read;
    const failure = await read.done;
    if (this.#catchUpRead === read) this.#catchUpRead = undefined;
    if (failure !== undefined && !this.#stopped) {
      this.#log.warn(
        `backplane: cannot catch up from the JetStream store ${this.#subjects.store} (${failure}): live values go on; the values stored before are not read until the next reconnect`,
      );
    }
  }

  /** Puts every local stream's last value, or its end, on the backplane again (after a (re)join). */
  #republishLocal(): void {
    for (const token of [...this.#local.keys()]) {
      const summary = this.#router.get(token);
      if (summary === undefined) {
        this.#forgetLocal(token);
      } else if (summary.state === 'active' && summary.last !== undefined) {
        this.#send(token, { v: 1, kind: 'progress', params: summary.last }, 'now');
      } else if (summary.state === 'done' && summary.status !== undefined) {
        const params: Record<string, unknown> = { progressToken: token, status: summary.status };
        if (summary.message !== undefined) params.message = summary.message;
        const message: Record<string, unknown> = { v: 1, kind: 'done', params };
        if (summary.last !== undefined) message.last = summary.last;
        this.#send(token, message, 'now');
      }
    }
  }

  /** The host that publishes a remote token, while this daemon mirrors it. */
  hostOf(token: ProgressToken): string | undefined {
    return this.#hosts.ownerOf(token)?.name;
  }

  /** Whether a local worker may publish the token: not while another host publishes it. */
  refusal(token: ProgressToken): { ok: false; code: 'token_in_use'; message: string } | undefined {
    const remote = this.#hosts.ownerOf(token);
    if (remote === undefined || this.#router.get(token)?.state !== 'active') return undefined;
    return {
      ok: false,
      code: 'token_in_use',
      message: `token ${JSON.stringify(token)} is already published by host ${remote.name} of the NATS backplane: use a token of your own (the relay mints unique ones)`,
    };
  }

  /** Whether the router connection stands for a remote host. */
  isRemote(connection: ConnectionId): boolean {
    return this.#hosts.ofConnection(connection) !== undefined;
  }

  /** Forwards a cancel to the host of a remote stream. */
  cancel(connection: ConnectionId, token: ProgressToken, reason: string | undefined): boolean {
    const host = this.#hosts.ofConnection(connection);
    if (host === undefined || this.#nc === undefined || !this.#connected) return false;
    const data: Record<string, unknown> = { v: 1, progressToken: token };
    if (reason !== undefined) data.reason = reason;
    this.#nc.publish(this.#subjects.cancelOf(host.name), JSON.stringify(data));
    return true;
  }

  status(): BackplaneStatus {
    const active = this.#hosts.activeStreams(
      (token) => this.#router.get(token)?.state === 'active',
    );
    const status: BackplaneStatus = {
      name: this.#options.name,
      instance: this.#instance,
      connected: this.#connected,
      unconfirmed: this.#unconfirmed.length,
      unconfirmedBytes: this.#unconfirmedBytes,
      hosts: [...this.#hosts.all()].map((host) => ({
        name: host.name,
        state: host.lost ? 'lost' : 'up',
        activeStreams: active.get(host) ?? 0,
        ...(host.instance !== undefined && { instance: host.instance }),
      })),
      invalidMessages: this.#invalidMessages,
    };
    if (this.#refused !== undefined) status.refused = this.#refused;
    return status;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#router.observe(undefined);
    clearTimeout(this.#retry);
    clearInterval(this.#heartbeat);
    clearInterval(this.#confirming);
    this.#catchUpRead?.cancel();
    this.#hosts.stop();
    // The last values and dones before the stop go out, and into the store, before the `down`.
    this.#feedStore();
    this.#publishOutbox();
    const nc = this.#nc;
    this.#nc = undefined;
    if (nc === undefined) return;
    if (this.#connected) {
      this.#sendHeartbeat('down', nc);
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
    if (
      connection !== undefined
        ? this.isRemote(connection)
        : this.#hosts.ownerOf(token) !== undefined
    ) {
      return;
    }
    if (connection === this.#adopter) {
      // Already on the backplane: the store had it.
      this.#localSubjects(token);
      return;
    }
    if (notification.method === 'notifications/progress') {
      this.#send(token, { v: 1, kind: 'progress', params: notification.params }, 'soon');
    } else {
      const message: Record<string, unknown> = { v: 1, kind: 'done', params: notification.params };
      if (last !== undefined) message.last = last.params;
      this.#send(token, message, 'now');
    }
  }

  /**
   * Sends a stream message live, and stores it: `now`, or `soon` (with the stream's next messages,
   * at most STORE_EVERY_MS later) when the store has the stream already. A stream's first message
   * and its end are stored at once: a daemon killed and started again learns from the store which
   * streams it must end, and a late joiner which ones ended.
   */
  #send(token: ProgressToken, message: object, store: 'now' | 'soon'): void {
    const subjects = this.#localSubjects(token);
    // Before the first join nothing is sent: the join puts the last value or the end of every
    // local stream on the backplane. Once joined, every message is kept until the server confirms
    // it, and while cut off it waits to be sent at the reconnect, so a failover loses none.
    if (!this.#joined && !this.#connected) return;
    const data = JSON.stringify(message);
    this.#enqueue(subjects.live, data);
    if (store === 'now' || !subjects.stored) {
      this.#storeDue.delete(token);
      this.#enqueue(subjects.kept, data);
      subjects.stored = true;
      return;
    }
    this.#storeDue.set(token, data);
    this.#storeTimer ??= setTimeout(() => this.#feedStore(), STORE_EVERY_MS).unref();
  }

  /** The subjects of a local token, remembered while its stream is this daemon's. */
  #localSubjects(token: ProgressToken): StreamSubjects {
    let subjects = this.#local.get(token);
    if (subjects === undefined) {
      subjects = {
        live: this.#subjects.streamOf(token),
        kept: this.#subjects.keptOf(token),
        stored: false,
      };
      this.#local.set(token, subjects);
    }
    return subjects;
  }

  /** Puts the latest message of each stream that changed since the last time on its kept subject. */
  #feedStore(): void {
    clearTimeout(this.#storeTimer);
    this.#storeTimer = undefined;
    for (const [token, data] of this.#storeDue) {
      const subjects = this.#local.get(token);
      if (subjects !== undefined) this.#enqueue(subjects.kept, data);
    }
    this.#storeDue.clear();
  }

  /** Keeps a message until the server confirms it, and hands it to the client at the end of this turn. */
  #enqueue(subject: string, data: string): void {
    const bytes = Buffer.byteLength(subject) + Buffer.byteLength(data);
    if (
      this.#unconfirmed.length >= BACKPLANE_MAX_UNCONFIRMED ||
      this.#unconfirmedBytes + bytes > BACKPLANE_MAX_UNCONFIRMED_BYTES
    ) {
      // Cut off for long: the reconnect sends only each stream's last value or end.
      this.#unconfirmed = [];
      this.#unconfirmedBytes = 0;
    }
    const entry = { subject, data, bytes };
    this.#unconfirmed.push(entry);
    this.#unconfirmedBytes += bytes;
    if (this.#nc === undefined || !this.#connected) return;
    this.#outbox.push(entry);
    // setImmediate runs after the poll phase, in which libuv read every other ready socket.
    this.#outboxImmediate ??= setImmediate(() => this.#publishOutbox());
  }

  #forgetLocal(token: ProgressToken): void {
    const subjects = this.#local.get(token);
    this.#local.delete(token);
    this.#storeDue.delete(token);
    // The store keeps nothing of a stream this daemon no longer holds.
    if (subjects !== undefined && this.#connected) {
      this.#jsm?.streams.purge(this.#subjects.store, { filter: subjects.kept }).catch(() => {});
    }
  }

  /**
   * A message on a stream subject: live (`ageMs` undefined) or from the store. Checked like a
   * frame from a socket: anything else is counted, logged now and then, and ignored.
   */
  #streamIn(subject: string, data: Uint8Array, ageMs: number | undefined): void {
    const parts = this.#subjects.parseStream(subject);
    if (parts === undefined) {
      this.#invalid(subject, 'not a subject of this backplane');
      return;
    }
    const { host: name, token: subjectToken } = parts;
    if (this.#nameTooLong(subject, name)) return;
    const message = parseBackplaneStream(parseJson(data));
    const token = message?.params.progressToken;
    if (message === undefined || token === undefined || tokenSubject(token) !== subjectToken) {
      this.#invalid(subject, 'not a stream message of this backplane (docs/BACKPLANE.md)');
      return;
    }
    if (
      message.kind === 'done' &&
      message.last !== undefined &&
      message.last.progressToken !== token
    ) {
      this.#invalid(subject, 'a done whose last value is of another token');
      return;
    }
    const now = this.#host.now();
    if (name === this.#options.name) {
      if (ageMs !== undefined && !this.#joined) this.#adopt(message, now);
      return;
    }
    if (ageMs !== undefined) {
      // A late joiner takes what the router would still hold.
      const limit = message.kind === 'done' ? this.#options.retentionMs : this.#options.streamTtlMs;
      if (ageMs > limit) return;
    }
    if (this.#local.has(token)) {
      this.#conflict(token, name, 'a worker of this host publishes it too');
      return;
    }
    const host = this.#hosts.named(name);
    if (host === undefined) {
      this.#invalid(subject, tooManyHosts);
      return;
    }
    const owner = this.#hosts.ownerOf(token);
    if (owner !== undefined && owner !== host && this.#router.get(token)?.state === 'active') {
      this.#conflict(token, name, `host ${owner.name} published it first`);
      return;
    }
    if (!this.#hosts.setOwner(token, host)) {
      this.#invalid(
        subject,
        `host ${name} already has ${BACKPLANE_MAX_STREAMS_PER_HOST} streams here, the most one host may have`,
      );
      return;
    }
    if (ageMs === undefined) this.#hosts.seen(host);
    this.#apply(host.connection, message, now);
    this.#host.schedule();
  }

  /** Into the router: values only when greater than the last (the router's rule), so nothing regresses. */
  #apply(connection: ConnectionId, message: BackplaneStreamMessage, now: number): void {
    if (message.kind === 'progress') {
      this.#router.publish(connection, { v: 1, ...message.params } as ProgressFrame, now);
      return;
    }
    if (message.last !== undefined) {
      const last = this.#router.get(message.params.progressToken)?.last?.progress;
      if (last === undefined || message.last.progress > last) {
        this.#router.publish(connection, { v: 1, ...message.last } as ProgressFrame, now);
      }
    }
    this.#router.finish(connection, { v: 1, ...message.params } as DoneFrame, now);
  }

  /**
   * A stream an earlier daemon of this host left active in the store: taken into the router under
   * the adopter, which leaves at the end of the catch-up, so the stream ends as abandoned after the
   * grace unless a worker takes it up again; the other hosts learn that end.
   */
  #adopt(message: BackplaneStreamMessage, now: number): void {
    const token = message.params.progressToken;
    if (message.kind !== 'progress' || this.#router.get(token) !== undefined) return;
    this.#router.publish(this.#adopter, { v: 1, ...message.params } as ProgressFrame, now);
  }

  #conflict(token: ProgressToken, name: string, why: string): void {
    const startedAt = this.#router.get(token)?.startedAt ?? -1;
    if (this.#warned.get(token) === startedAt) return;
    this.#warned.set(token, startedAt);
    this.#log.warn(
      `backplane: host ${name} publishes token ${JSON.stringify(token)}, but ${why}: its messages for it are ignored here`,
    );
  }

  /**
   * A host name longer than any daemon may have (MAX_HOST_NAME_BYTES, as --nats-name): the
   * message is ignored as invalid, so that names in replies and reasons stay within their limits.
   */
  #nameTooLong(subject: string, name: string): boolean {
    if (fitsUtf8Bytes(name, MAX_HOST_NAME_BYTES)) return false;
    this.#invalid(subject, `a host name longer than ${MAX_HOST_NAME_BYTES} bytes`);
    return true;
  }

  #invalid(subject: string, why: string): void {
    this.#invalidMessages++;
    if (this.#invalidMessages === 1 || this.#invalidMessages % 1000 === 0) {
      this.#log.warn(
        `backplane: ignored a message on ${subject.slice(0, 200)}: ${why} (${this.#invalidMessages} so far)`,
      );
    }
  }

  #cancelIn(msg: Msg): void {
    const cancel = parseBackplaneCancel(parseJson(msg.data));
    if (cancel === undefined) {
      this.#invalid(msg.subject, 'not a cancel of this backplane');
      return;
    }
    if (!this.#local.has(cancel.progressToken)) return;
    this.#host.cancelLocal(cancel.progressToken, cancel.reason);
  }

  #heartbeatIn(msg: Msg): void {
    const name = this.#subjects.heartbeatHost(msg.subject);
    if (this.#nameTooLong(msg.subject, name)) return;
    const heartbeat = parseBackplaneHeartbeat(parseJson(msg.data));
    if (heartbeat === undefined || name === '') {
      this.#invalid(msg.subject, 'not a heartbeat of this backplane');
      return;
    }
    if (name === this.#options.name) {
      this.#namesake(heartbeat.instance);
      return;
    }
    const host = this.#hosts.named(name);
    if (host === undefined) {
      this.#invalid(msg.subject, tooManyHosts);
      return;
    }
    if (heartbeat.instance !== undefined) host.instance = heartbeat.instance;
    if (heartbeat.state === 'up') this.#hosts.seen(host);
    else this.#hosts.lose(host, 'stopped');
  }

  #beat(): void {
    if (!this.#connected) {
      // Cut off, it hears nobody, which says nothing of the others: it judges none of them. The
      // pause check still runs: else a lost host's grace running out while cut off would take the
      // time since the last review for a pause of this daemon, and start again and again.
      this.#hosts.checkPause();
      return;
    }
    this.#sendHeartbeat('up');
    // Tokens the router evicted (done and past retention) are forgotten too.
    this.#hosts.review((token) => this.#router.get(token) !== undefined);
    for (const token of [...this.#local.keys()]) {
      if (this.#router.get(token) === undefined) this.#forgetLocal(token);
    }
    // A conflict is only ever over a token the router holds: once it is evicted, so is the warning.
    for (const token of this.#warned.keys()) {
      if (this.#router.get(token) === undefined) this.#warned.delete(token);
    }
  }

  /**
   * A heartbeat under this daemon's own name (its own never come back: noEcho): a daemon that
   * joined in the same instant, past the name check, or one that does not check. Logged once each.
   */
  #namesake(instance: string | undefined): void {
    const other = instance ?? 'unknown';
    if (other === this.#instance || this.#namesakes.has(other)) return;
    this.#namesakes.add(other);
    this.#log.error(
      `backplane: another daemon (instance ${other}) publishes as ${this.#options.name} too: each would end the other's streams on other hosts; give one of them another --nats-name`,
    );
  }

  #sendHeartbeat(state: 'up' | 'down', nc = this.#nc): void {
    const heartbeat = { v: 1, state, instance: this.#instance };
    nc?.publish(this.#subjects.heartbeatOf(this.#options.name), JSON.stringify(heartbeat));
  }
}

/**
 * One read of the store's last message per stream subject: an ephemeral pull consumer (deliver
 * policy last_per_subject, no acks) made with one request, then read in batches, every answer on
 * one inbox subscription, under one timer. JetStream silent or refusing for CATCH_UP_IDLE_MS ends
 * it with the reason; cancel() ends it at once. Either way nothing of it remains: nats.js's
 * ordered consumer, by contrast, retries making its consumer for minutes while JetStream cannot
 * answer (a cluster without quorum), and neither its stop nor the connection's close ends that.
 */
class StoreRead {
  /** Why it gave up, or undefined: read to the end, or cancelled. */
  readonly done: Promise<string | undefined>;
  readonly #nc: NatsConnection;
  readonly #store: string;
  readonly #take: (subject: string, data: Uint8Array, ageMs: number) => void;
  readonly #inbox = createInbox();
  readonly #sub: Subscription;
  #finish: (failure: string | undefined) => void = () => {};
  #ended = false;
  #timer: NodeJS.Timeout | undefined;
  #consumer: string | undefined;
  /** Messages of the last pull not yet delivered. */
  #owed = 0;
  /**
   * Stored messages still to read of those there were when the consumer was made: values stored
   * after it arrive live too, so a store written to without pause does not make it read for ever.
   */
  #remaining = 0;

  constructor(
    nc: NatsConnection,
    store: string,
    filter: string,
    take: (subject: string, data: Uint8Array, ageMs: number) => void,
  ) {
    this.#nc = nc;
    this.#store = store;
    this.#take = take;
    this.done = new Promise((resolve) => {
      this.#finish = resolve;
    });
    this.#sub = nc.subscribe(`${this.#inbox}.*`, {
      callback: (error, msg) => (error ? this.#end(error.message) : this.#in(msg)),
    });
    const request = {
      stream_name: store,
      config: {
        deliver_policy: 'last_per_subject',
        ack_policy: 'none',
        // One subject: nats-server before 2.10 (Debian's) has no filter_subjects list.
        filter_subject: filter,
        inactive_threshold: nanos(CATCH_UP_IDLE_MS),
        mem_storage: true,
        num_replicas: 1,
      },
    };
    this.#send(
      `${JS_API}.CONSUMER.CREATE.${store}`,
      request,
      'c',
      'no answer to the consumer request',
    );
  }

  cancel(): void {
    this.#end(undefined);
  }

  #send(subject: string, body: object, reply: string, silence: string): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => this.#end(`${silence} within ${CATCH_UP_IDLE_MS / 1000} s`),
      CATCH_UP_IDLE_MS,
    );
    this.#timer.unref();
    try {
      this.#nc.publish(subject, JSON.stringify(body), { reply: `${this.#inbox}.${reply}` });
    } catch (error) {
      this.#end((error as Error).message);
    }
  }

  #pull(): void {
    if (this.#consumer === undefined) return;
    this.#owed = CATCH_UP_BATCH;
    // The server ends a pull it cannot fill before this; the timer is for a server gone silent.
    const body = { batch: CATCH_UP_BATCH, expires: nanos(CATCH_UP_IDLE_MS - 1000) };
    this.#send(
      `${JS_API}.CONSUMER.MSG.NEXT.${this.#store}.${this.#consumer}`,
      body,
      'm',
      'no stored message',
    );
  }

  #in(msg: Msg): void {
    if (this.#ended) return;
    if (msg.subject.endsWith('.c')) {
      this.#created(msg);
      return;
    }
    const stored = msg.reply === undefined ? undefined : storedMeta(msg.reply);
    if (stored === undefined) {
      // A status of the pull: 404 or 408, nothing (more) to read; anything else, a failure.
      const code = msg.headers?.code ?? 0;
      this.#end(code === 404 || code === 408 ? undefined : statusOf(msg));
      return;
    }
    this.#take(msg.subject, msg.data, Date.now() - stored.epochMs);
    if (this.#ended) return;
    if (stored.pending === 0 || --this.#remaining <= 0) this.#end(undefined);
    else if (--this.#owed === 0) this.#pull();
  }

  /** JetStream's answer to the consumer request: the consumer, or why not. */
  #created(msg: Msg): void {
    if (msg.headers?.code !== undefined && msg.data.length === 0) {
      this.#end(statusOf(msg));
      return;
    }
    const answer = parseJson(msg.data) as
      | { name?: unknown; num_pending?: unknown; error?: { code?: unknown; description?: unknown } }
      | undefined;
    if (answer?.error !== undefined || typeof answer?.name !== 'string') {
      this.#end(
        answer?.error === undefined
          ? 'JetStream gave no consumer'
          : `JetStream: ${String(answer.error.description)} (${String(answer.error.code)})`,
      );
      return;
    }
    this.#consumer = answer.name;
    // Not a count (a server that does not say): read until a message says none is pending.
    this.#remaining = typeof answer.num_pending === 'number' ? answer.num_pending : Infinity;
    if (this.#remaining === 0) this.#end(undefined);
    else this.#pull();
  }

  #end(failure: string | undefined): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#timer);
    try {
      this.#sub.unsubscribe();
      // Its inactive threshold would remove it too; this is sooner. No reply: nothing waits for it.
      if (this.#consumer !== undefined && !this.#nc.isClosed()) {
        this.#nc.publish(`${JS_API}.CONSUMER.DELETE.${this.#store}.${this.#consumer}`);
      }
    } catch {
      // The connection is closing: the server drops both.
    }
    this.#finish(failure);
  }
}

/**
 * The stream's time (epoch ms) and the messages still to come, from a stored message's reply
 * subject: `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>`, or with a
 * domain and an account hash after ACK (and a token at the end) from newer servers.
 */
function storedMeta(reply: string): { epochMs: number; pending: number } | undefined {
  const tokens = reply.split('.');
  if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return undefined;
  const at = tokens.length === 9 ? 7 : tokens.length >= 11 ? 9 : -1;
  if (at < 0) return undefined;
  const nanoseconds = Number(tokens[at]);
  const pending = Number(tokens[at + 1]);
  if (!Number.isFinite(nanoseconds) || !Number.isInteger(pending)) return undefined;
  return { epochMs: nanoseconds / 1e6, pending };
}

function statusOf(msg: Msg): string {
  const code = msg.headers?.code ?? 0;
  if (code === 503) return 'no responders: JetStream is not running there';
  return `JetStream: ${msg.headers?.description || 'status'} (${code})`;
}

interface StreamMessage {
  readonly subject: string;
  readonly data: string;
  /** Its subject's and body's size in bytes (UTF-8). */
  readonly bytes: number;
}

/** Where a local stream goes: every message live, the latest now and then kept for the store. */
interface StreamSubjects {
  readonly live: string;
  readonly kept: string;
  /** Whether a message of the stream was put on its kept subject since this daemon started. */
  stored: boolean;
}

const tooManyHosts = `more than ${BACKPLANE_MAX_HOSTS} hosts, all heard recently`;

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch {
    return undefined;
  }
}
