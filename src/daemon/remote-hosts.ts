/**
 * The other hosts of the NATS backplane, as this daemon knows them: each one's pseudo-connection
 * in the router, when it was last heard, whether it is lost (and the grace before its active
 * streams end as abandoned), and which host publishes each remote token. No NATS here: the
 * backplane (backplane.ts) feeds it what it hears and asks it who is who.
 */
import type { ProgressToken } from '../protocol/index.js';
import {
  BACKPLANE_MAX_HOSTS,
  BACKPLANE_MAX_STREAMS_PER_HOST,
  BACKPLANE_MISSED_HEARTBEATS,
  PAUSE_TOLERANCE_PERIODS,
} from '../shared/defaults.js';
import type { Logger } from '../shared/log.js';
import { PauseWatch } from '../shared/pause-watch.js';
import type { ConnectionId } from './router.js';

export interface RemoteHost {
  readonly name: string;
  readonly connection: ConnectionId;
  lastSeen: number;
  lost: boolean;
  /** The instance its last heartbeat carried (a daemon older than instances sends none). */
  instance: string | undefined;
  /** Its tokens in the table (at most BACKPLANE_MAX_STREAMS_PER_HOST). */
  streams: number;
  /** Ends its active streams as abandoned when it does not come back. */
  graceTimer: NodeJS.Timeout | undefined;
  /** Why it was lost (`its daemon stopped`, `no heartbeat for 3 s`), for the abandoned streams' message. */
  lostBecause: string | undefined;
}

export interface RemoteHostsOptions {
  readonly log: Logger;
  now(): number;
  readonly heartbeatMs: number;
  /** How long a lost host's streams stay active before they end as abandoned. */
  readonly abandonGraceMs: number;
  /** Ends a lost host's stream as abandoned (in the router), then runs the router's due work. */
  abandon(tokens: readonly ProgressToken[], reason: string): void;
}

export class RemoteHosts {
  readonly #options: RemoteHostsOptions;
  readonly #byName = new Map<string, RemoteHost>();
  readonly #byConnection = new Map<ConnectionId, RemoteHost>();
  /** Remote tokens and the host that publishes each. */
  readonly #owners = new Map<ProgressToken, RemoteHost>();
  #nextConnection = -1;
  /**
   * Between two checks (reviews, beats while cut off, graces running out): whether this daemon
   * itself stood still.
   */
  readonly #pause: PauseWatch;

  constructor(options: RemoteHostsOptions) {
    this.#options = options;
    this.#pause = new PauseWatch(options.now(), this.#pauseToleranceMs);
  }

  /** A router connection id of no host (negative, as every host's, so never a worker's). */
  newConnection(): ConnectionId {
    return this.#nextConnection--;
  }

  /**
   * The host of that name, added when new. When BACKPLANE_MAX_HOSTS are known, a new host takes
   * the place of the one heard least recently, if that one is silent (no heartbeat for
   * BACKPLANE_MISSED_HEARTBEATS) or lost: its streams end as abandoned. Undefined when every known host
   * was heard recently: a crowd of invented names cannot push out hosts that are alive.
   */
  named(name: string): RemoteHost | undefined {
    let host = this.#byName.get(name);
    if (host === undefined) {
      if (this.#byName.size >= BACKPLANE_MAX_HOSTS && !this.#evictOne()) return undefined;
      host = {
        name,
        connection: this.newConnection(),
        lastSeen: this.#options.now(),
        lost: false,
        instance: undefined,
        streams: 0,
        graceTimer: undefined,
        lostBecause: undefined,
      };
      this.#byName.set(name, host);
      this.#byConnection.set(host.connection, host);
    }
    return host;
  }

  /** Forgets the host heard least recently when it is silent or lost; false when none is. */
  #evictOne(): boolean {
    const silentSince = this.#silentSince();
    let oldest: RemoteHost | undefined;
    for (const host of this.#byName.values()) {
      if (oldest === undefined || host.lastSeen < oldest.lastSeen) oldest = host;
    }
    if (oldest === undefined || (!oldest.lost && oldest.lastSeen >= silentSince)) return false;
    clearTimeout(oldest.graceTimer);
    const tokens = this.#tokensOf(oldest);
    this.#options.log.warn(
      `backplane: forgot host ${oldest.name} (not heard for ${(this.#options.now() - oldest.lastSeen) / 1000} s) to make room for a new one: at most ${BACKPLANE_MAX_HOSTS} hosts`,
    );
    // Abandoned while the tokens still name their host: the backplane publishes an end only for
    // tokens no host owns (its own), so ended after, they would go out as this daemon's streams.
    if (tokens.length > 0) {
      this.#options.abandon(
        tokens,
        `host ${oldest.name} was not heard from and another host took its place (at most ${BACKPLANE_MAX_HOSTS} hosts on the backplane)`,
      );
    }
    for (const token of tokens) this.#owners.delete(token);
    this.#byName.delete(oldest.name);
    this.#byConnection.delete(oldest.connection);
    return true;
  }

  get #pauseToleranceMs(): number {
    return PAUSE_TOLERANCE_PERIODS * this.#options.heartbeatMs;
  }

  #silentSince(): number {
    return this.#options.now() - BACKPLANE_MISSED_HEARTBEATS * this.#options.heartbeatMs;
  }

  #tokensOf(host: RemoteHost): ProgressToken[] {
    return [...this.#owners].filter(([, owner]) => owner === host).map(([token]) => token);
  }

  /** The host a router connection stands for. */
  ofConnection(connection: ConnectionId): RemoteHost | undefined {
    return this.#byConnection.get(connection);
  }

  /** The host that publishes a remote token. */
  ownerOf(token: ProgressToken): RemoteHost | undefined {
    return this.#owners.get(token);
  }

  /**
   * Records that the host publishes the token; false (nothing recorded) when that would be one
   * more than BACKPLANE_MAX_STREAMS_PER_HOST tokens of that host.
   */
  setOwner(token: ProgressToken, host: RemoteHost): boolean {
    const owner = this.#owners.get(token);
    if (owner === host) return true;
    if (host.streams >= BACKPLANE_MAX_STREAMS_PER_HOST) return false;
    if (owner !== undefined) owner.streams--;
    this.#owners.set(token, host);
    host.streams++;
    return true;
  }

  /** How many of each host's tokens `isActive` says are active. */
  activeStreams(isActive: (token: ProgressToken) => boolean): Map<RemoteHost, number> {
    const active = new Map<RemoteHost, number>();
    for (const [token, host] of this.#owners) {
      if (isActive(token)) active.set(host, (active.get(host) ?? 0) + 1);
    }
    return active;
  }

  all(): IterableIterator<RemoteHost> {
    return this.#byName.values();
  }

  /** Heard from: a lost host is back, and its streams stay. */
  seen(host: RemoteHost): void {
    host.lastSeen = this.#options.now();
    if (!host.lost) return;
    host.lost = false;
    clearTimeout(host.graceTimer);
    host.graceTimer = undefined;
    this.#options.log.info(`backplane: host ${host.name} is back`);
  }

  /** While this daemon was cut off it heard nobody: that says nothing about the others. */
  allSeenNow(): void {
    const now = this.#options.now();
    for (const host of this.#byName.values()) host.lastSeen = now;
  }

  /**
   * At each heartbeat: hosts silent for BACKPLANE_MISSED_HEARTBEATS are lost, unless this daemon
   * itself stood still since the last check (checkPause); tokens `isKnown` no longer holds are forgotten, and
   * then lost hosts with nothing left.
   */
  review(isKnown: (token: ProgressToken) => boolean): void {
    this.checkPause();
    const silentSince = this.#silentSince();
    for (const host of this.#byName.values()) {
      if (!host.lost && host.lastSeen < silentSince) this.lose(host, 'silent');
    }
    const owners = new Set<RemoteHost>();
    for (const [token, owner] of this.#owners) {
      if (!isKnown(token)) {
        this.#owners.delete(token);
        owner.streams--;
      } else owners.add(owner);
    }
    for (const host of this.#byName.values()) {
      if (host.lost && host.graceTimer === undefined && !owners.has(host)) {
        this.#byName.delete(host.name);
        this.#byConnection.delete(host.connection);
      }
    }
  }

  /** A host stopped or went silent: its active streams end as abandoned after the grace. */
  lose(host: RemoteHost, why: 'stopped' | 'silent'): void {
    if (host.lost) return;
    host.lost = true;
    host.lostBecause =
      why === 'stopped'
        ? 'its daemon stopped'
        : `no heartbeat for ${(BACKPLANE_MISSED_HEARTBEATS * this.#options.heartbeatMs) / 1000} s`;
    this.#options.log.warn(
      `backplane: host ${host.name} is lost (${host.lostBecause}); its active streams end as abandoned in ${this.#options.abandonGraceMs / 1000} s unless it comes back`,
    );
    this.#startGrace(host);
  }

  /** (Re)starts a lost host's grace: a whole one from now. */
  #startGrace(host: RemoteHost): void {
    clearTimeout(host.graceTimer);
    const grace = this.#options.abandonGraceMs;
    host.graceTimer = setTimeout(() => {
      // Run late because this daemon stood still: the host may have come back meanwhile, unread
      // yet in this daemon's socket; checkPause gave it a fresh grace instead.
      if (this.checkPause()) return;
      host.graceTimer = undefined;
      this.#options.abandon(
        this.#tokensOf(host),
        `host ${host.name} left the backplane (${host.lostBecause}) and did not come back within ${grace / 1000} s`,
      );
    }, grace);
    host.graceTimer.unref();
  }

  /**
   * Called at each check (a review, a heartbeat while cut off from NATS, a grace running out):
   * true when this daemon stood still since the one before (stopped, asleep, its event loop
   * blocked). Then what the others sent meanwhile is still unread in its socket, and timers run
   * before reads on waking: each host gets a fresh window, its silence counted from now and a
   * lost host's grace started again, so its messages are read before it is judged.
   */
  checkPause(): boolean {
    if (!this.#pause.resumed(this.#options.now())) return false;
    this.allSeenNow();
    for (const host of this.#byName.values()) {
      if (host.graceTimer === undefined) continue;
      this.#options.log.info(
        `backplane: this daemon stood still (more than ${this.#pauseToleranceMs / 1000} s between two checks): host ${host.name} gets a fresh ${this.#options.abandonGraceMs / 1000} s before its active streams end as abandoned`,
      );
      this.#startGrace(host);
    }
    return true;
  }

  stop(): void {
    for (const host of this.#byName.values()) clearTimeout(host.graceTimer);
  }
}
