/**
 * Wires the data path, one way: ingress -> protocol -> router -> gate ->
 * egress. Start and stop; no globals, so several daemons can share a process.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { MCP_PATH } from '../mcp/http-path.js';
import type { McpHttpSessions } from '../mcp/http-sessions.js';
import type { ProgressSource } from '../mcp/progress-source.js';
import type {
  McpSessionGrant,
  McpSessionRefusal,
  McpSessionTransport,
} from '../mcp/session-host.js';
import type { RejectCode } from '../protocol/errors.js';
// Not protocol/index.js: that loads zod and every schema, which reading workers does not need.
import {
  isClaimFrame,
  isDoneFrame,
  isProgressFrame,
  WORKER_EVENT_NAMES,
} from '../protocol/frame-guards.js';
import type { DaemonStatus, DoneFrame, ProgressToken, StreamSummary } from '../protocol/frames.js';
import {
  DEFAULT_DONE_STATUS,
  MAX_LIST_REPLY_BYTES,
  PROTOCOL_VERSION,
  shorten,
} from '../protocol/limits.js';
import type { TaskRecord } from '../protocol/tasks.js';
import {
  checkEmptyRequest,
  explainClaimFrame,
  explainDoneFrame,
  explainProgressFrame,
  type FrameRejection,
} from '../protocol/validate.js';
import { type IdleCollection, idleCollection } from '../shared/collection.js';
import {
  DEFAULT_TASK_TTL_MS,
  IDLE_COLLECTION_MIN_GROWTH_BYTES,
  IDLE_COLLECTION_MS,
  MAX_LIVE_TASKS,
  MAX_TASK_TTL_MS,
  TASK_EXPIRY_CHECK_MS,
  TASK_POLL_INTERVAL_MS,
} from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import { type DaemonInfo, daemonInfoPath, gatewaySocketPath } from '../shared/locate.js';
import { createLogger, type Logger } from '../shared/log.js';
import { progressFlows } from '../shared/tiering.js';
import { VERSION } from '../shared/version.js';
import type { Backplane } from './backplane.js';
import { DoneJournal, doneJournalPath, type JournalLine } from './done-journal.js';
import { GatewayEndpoint, type HttpHandler } from './gateway.js';
import { LocalProgressSource } from './in-process-source.js';
import { formatPrometheus } from './metrics.js';
import {
  type DaemonOptions,
  type DaemonOptionsInput,
  isLoopback,
  resolveDaemonOptions,
} from './options.js';
import { addPageRoutes } from './page.js';
import { PageAccess } from './page-access.js';
import { DEFAULT_PAGE_FEED_OPTIONS, PageFeed } from './page-feed.js';
import { type DoneCommit, type EndingStream, Router } from './router.js';
import type { GatewayBackend } from './rpc.js';
import {
  bindError,
  bindPathFor,
  claimGatewaySocket,
  claimSocketPath,
  type FileIdentity,
  filesGone,
  keepPipeName,
  lockRuntimeDir,
  MAX_SOCKET_PATH_BYTES,
  prepareRuntimeDir,
  publishSocket,
  type RuntimeDirLock,
  refuseLiveDaemonInfo,
  removeIfSameFile,
  removeOwnDaemonInfo,
  writeDaemonInfo,
} from './runtime-dir.js';
import { TickScheduler } from './scheduler.js';
import { SessionHub } from './sessions.js';
import { TaskTable } from './task-table.js';
import { type ConnectionId, IngressServer, type WorkerConnection } from './worker-socket.js';

/** An MCP session over HTTP with no request for this long is closed. */
const MCP_SESSION_IDLE_MS = 30 * 60_000;

export class Daemon {
  readonly options: DaemonOptions;
  readonly #log: Logger;
  readonly #router: Router;
  /** A list page's budget: under the session buffer cap, so a reply never closes its own session. */
  readonly #listReplyBytes: number;
  readonly #ingress: IngressServer;
  readonly #endpoint: GatewayEndpoint;
  readonly #hub: SessionHub;
  /** /mcp's sessions, made on its first request (#mcpSessions). */
  #mcpHttp: Promise<McpHttpSessions> | undefined;
  readonly #secret: string;
  /** Progress for MCP tools in this process (the embedded daemon, /mcp), without a WebSocket. */
  readonly progressSource: ProgressSource;
  /** A monotonic clock in epoch milliseconds: wall time at start plus elapsed time. */
  readonly #epoch = Date.now() - performance.now();
  readonly #startedAt: number;
  #info: DaemonInfo | undefined;
  /** The socket file this daemon bound: at stop it removes that file and no other. */
  #boundSocket: FileIdentity | undefined;
  /** The gateway's Unix socket this daemon bound (the local link), if any: removed at stop. */
  #boundGatewaySocket: FileIdentity | undefined;
  readonly #scheduler: TickScheduler;
  /** Forgets the tasks past their TTL when the first may be, so none holds memory on an idle daemon. */
  readonly #taskExpiry: TickScheduler;
  /** Gives memory back once workers are quiet (a daemon started by bin/mcp-progress only). */
  #idleCollection: IdleCollection | undefined;
  /**
   * The clock reading shared by the frames of one read: they arrived together, and on this
   * hot path reading the clock (about 100 ns) costs as much as routing a frame.
   */
  #readAt: number | undefined;
  #framesAccepted = 0;
  readonly #framesRejected: Partial<Record<RejectCode, number>> = {};
  #stopping: Promise<void> | undefined;
  /** The NATS backplane, with --nats only. */
  #backplane: Backplane | undefined;
  #runtimeDirLock: RuntimeDirLock | undefined;
  readonly #doneJournal: DoneJournal;
  /** The live page's cookies and tickets, and its stream (one session per browser tab). */
  readonly #pageAccess: PageAccess;
  readonly #pageFeed: PageFeed;
  /** MCP tasks: daemon state, so that any `mcp-progress mcp` process or /mcp session can answer for one. */
  readonly #tasks = new TaskTable(
    {
      defaultTtlMs: DEFAULT_TASK_TTL_MS,
      maxTtlMs: MAX_TASK_TTL_MS,
      maxTasks: MAX_LIVE_TASKS,
      pollIntervalMs: TASK_POLL_INTERVAL_MS,
      expiryCheckMs: TASK_EXPIRY_CHECK_MS,
    },
    () => randomBytes(16).toString('base64url'),
  );
  /** Told of each task cancelled here (any caller): this process's task follows stop at once. */
  readonly #taskCancelled = new Set<(task: TaskRecord) => void>();
  /** How an in-process source hears of the tasks cancelled here; returns how to stop. */
  readonly #onTaskCancelled = (listener: (task: TaskRecord) => void): (() => void) => {
    this.#taskCancelled.add(listener);
    return () => this.#taskCancelled.delete(listener);
  };

  private constructor(options: DaemonOptions, log: Logger, bindPath: string) {
    this.options = options;
    this.#log = log;
    this.#startedAt = this.now();
    this.#secret = options.secret ?? randomBytes(32).toString('base64url');
    this.#doneJournal = new DoneJournal({
      path: doneJournalPath(options.runtimeDir),
      retentionMs: options.router.retentionMs,
      maxBytes: options.maxJournalBytes,
      log,
      clock: () => this.now(),
    });
    this.#listReplyBytes = Math.min(
      MAX_LIST_REPLY_BYTES,
      Math.floor(options.maxSessionBufferBytes / 4),
    );
    this.#hub = new SessionHub(
      { maxSessions: options.maxSessions, maxSessionBufferBytes: options.maxSessionBufferBytes },
      (session) => this.#router.removeSubscriber(session),
      log,
    );
    this.#router = new Router(options.router, this.#hub.deliver);
    this.#router.observeEnds((ended, now) => this.#tasks.streamEnded(ended, now));
    this.#scheduler = new TickScheduler(
      this.#router,
      () => this.now(),
      (error) => this.#log.error(`router tick failed: ${error.message}`),
    );
    this.#taskExpiry = new TickScheduler(
      {
        nextDeadline: () => this.#tasks.nextExpiryAt(),
        tick: (now) => this.#tasks.prune(this.backend.get, now),
      },
      () => this.now(),
      (error) => this.#log.error(`task expiry failed: ${error.message}`),
    );
    this.#ingress = new IngressServer(
      {
        socketPath: bindPath,
        maxConnections: options.maxConnections,
        maxFrameBytes: options.maxFrameBytes,
        frameTimeoutMs: options.frameTimeoutMs,
        maxPendingReplyBytes: options.maxPendingReplyBytes,
      },
      {
        frame: (connection, type, data) => this.#frame(connection, type, data),
        batchEnd: () => {
          this.#readAt = undefined;
          this.#scheduler.schedule();
          this.#idleCollection?.activity();
        },
        closed: (connection) => {
          this.#router.removeConnection(connection.id, this.now());
          this.#scheduler.schedule();
        },
        framingRejected: (code) => this.#countRejected(code),
        sync: (synced) => this.#syncJournal(synced),
        syncNow: () => this.#syncJournalNow(),
      },
      log,
    );
    this.#endpoint = this.#gateway();
    this.progressSource = new LocalProgressSource(
      this.backend,
      (receive) => this.#hub.openLocal(receive),
      this.#onTaskCancelled,
    );
    addRoutes(this.#endpoint, {
      mcp: (request, response) => {
        this.#mcpSessions().then(
          (sessions) => sessions.handle(request, response),
          (error: Error) => {
            this.#log.error(`MCP over HTTP could not load: ${error.message}`);
            response.writeHead(500, { 'content-type': 'text/plain' });
            response.end(`MCP over HTTP could not load: ${error.message}\n`);
          },
        );
      },
      metrics: () => formatPrometheus(this.status()),
    });
    this.#pageAccess = new PageAccess(
      this.#secret,
      options.runtimeDir,
      options.pageCookieMs,
      options.pageSessionMs,
    );
    this.#pageFeed = new PageFeed(
      { ...DEFAULT_PAGE_FEED_OPTIONS, streamMs: this.#pageAccess.renewAfterMs },
      // With the clock: an active job is sent with the daemon's rate and ETA as of its change.
      () => this.#router.list(this.now()).map((summary) => this.#withHost(summary)),
      this.#hub,
    );
    addPageRoutes(this.#endpoint, {
      access: this.#pageAccess,
      feed: this.#pageFeed,
      cancel: (token, reason) => this.#cancel(token, reason),
    });
  }

  /** The HTTP/WebSocket face: transport only, its sessions kept by the hub. */
  #gateway(): GatewayEndpoint {
    const options = this.options;
    return new GatewayEndpoint(
      {
        host: options.host,
        port: options.port,
        secret: this.#secret,
        allowOrigins: options.allowOrigins,
        maxPendingConnections: options.maxPendingConnections,
        handshakeTimeoutMs: options.handshakeTimeoutMs,
        pingIntervalMs: options.pingIntervalMs,
        pongTimeoutMs: options.pongTimeoutMs,
      },
      this.backend,
      this.#hub,
      this.#log,
    );
  }

  /** An /mcp session: one place in the hub; each of its watches a member subscriber. */
  #openMcpSession(transport: McpSessionTransport): McpSessionGrant | McpSessionRefusal {
    const { id, refused } = this.#hub.open('mcp', transport);
    if (refused !== undefined) return { refused: refused.message, code: refused.code };
    const source = new LocalProgressSource(
      this.backend,
      (receive) => this.#hub.openMember(id, receive),
      this.#onTaskCancelled,
    );
    return {
      source,
      close: () => {
        this.#hub.close(id);
        void source.close();
      },
      closeIfSlow: (justWritten) => this.#hub.closeIfSlow(id, justWritten),
    };
  }

  /**
   * The MCP SDK's HTTP server and the tools load on the first /mcp request:
   * a daemon nobody asks over /mcp does not pay their memory and start-up.
   */
  #mcpSessions(): Promise<McpHttpSessions> {
    this.#mcpHttp ??= import('../mcp/http-sessions.js').then(
      ({ McpHttpSessions }) =>
        new McpHttpSessions(
          {
            host: { open: (transport) => this.#openMcpSession(transport) },
            source: this.progressSource,
            idleMs: MCP_SESSION_IDLE_MS,
            defaultMinIntervalMs: this.options.router.defaultMinIntervalMs,
          },
          this.#log,
        ),
    );
    return this.#mcpHttp;
  }

  /**
   * Validates options, claims the socket, listens, and writes daemon.json when
   * ready. Any failure after the bind undoes what was done: ingress and
   * endpoint stopped, this daemon's socket and temporary file removed.
   */
  static async start(input: DaemonOptionsInput = {}, logger?: Logger): Promise<Daemon> {
    const options = resolveDaemonOptions(input);
    const log = logger ?? createLogger(options.logLevel);
    prepareRuntimeDir(options.runtimeDir);
    const infoPath = daemonInfoPath(options.runtimeDir);
    // Of daemons started at once on one runtime dir, whatever their sockets, one gets past here.
    const lock = await lockRuntimeDir(options.runtimeDir, infoPath);
    let bindPath: string;
    try {
      await refuseLiveDaemonInfo(options.runtimeDir, infoPath);
      await claimSocketPath(options.socketPath);
      bindPath = bindPathFor(options.socketPath);
    } catch (error) {
      lock.release();
      throw error;
    }
    const daemon = new Daemon(options, log, bindPath);
    daemon.#runtimeDirLock = lock;
    try {
      // Dones an earlier daemon on this dir acked: their streams end again, as they were, for
      // re-subscribing watchers. Its own errors (a journal the disk cannot hold) say so.
      for (const done of await daemon.#doneJournal.recover()) daemon.#router.restore(done);
    } catch (error) {
      await daemon.#teardown(0);
      throw error;
    }
    // The socket first: of daemons started at once, the one that publishes it is the one that runs.
    try {
      await daemon.#ingress.start();
      daemon.#boundSocket = await publishSocket(bindPath, options.socketPath);
      await keepPipeName(options.runtimeDir, options.socketPath);
    } catch (error) {
      await daemon.#teardown(0);
      throw await bindError(options.socketPath, error);
    }
    try {
      const url = await daemon.#endpoint.listen().catch((error: NodeJS.ErrnoException) => {
        throw listenError(options, error);
      });
      daemon.#pageAccess.setPort(Number(new URL(url).port));
      const gatewaySocket = await daemon.#listenLocalLink();
      daemon.#info = {
        pid: process.pid,
        version: VERSION,
        socket: options.socketPath,
        url,
        secret: daemon.#secret,
        ...(gatewaySocket !== undefined && { gatewaySocket }),
      };
      // Look again: a daemon with another socket may have written daemon.json meanwhile.
      await refuseLiveDaemonInfo(options.runtimeDir, infoPath);
      await writeDaemonInfo(infoPath, daemon.#info);
      daemon.#idleCollection = idleCollection({
        idleMs: IDLE_COLLECTION_MS,
        minGrowthBytes: IDLE_COLLECTION_MIN_GROWTH_BYTES,
        collected: (before, after) =>
          log.debug(`idle: gave memory back, heap ${mebibytes(before)} -> ${mebibytes(after)} MiB`),
      });
      lock.orphaned = async () => {
        if (!(await filesGone(options.socketPath, daemon.#boundSocket, infoPath))) return false;
        // Yielding the runtime dir: its gateway.sock goes with it, for the next daemon to take.
        await daemon.#dropLocalLink();
        return true;
      };
    } catch (error) {
      await daemon.#teardown(0);
      if (error instanceof BridgeError) throw error;
      throw new BridgeError(
        'start_failed',
        `the daemon could not start: ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (options.nats.length > 0) {
      try {
        await daemon.#joinBackplane();
      } catch (error) {
        await daemon.#teardown(0);
        throw new BridgeError(
          'start_failed',
          `the daemon could not load its NATS client for --nats: ${(error as Error).message}`,
          { cause: error },
        );
      }
    }
    if (!isLoopback(options.host)) {
      // Here, not in the CLI, so that an embedding program warns its user too.
      log.warn(
        `the gateway listens on ${options.host}, reachable beyond this machine: anyone with the secret can read progress`,
      );
    }
    log.info(`ready: pid ${process.pid}, socket ${options.socketPath}, gateway ${daemon.info.url}`);
    return daemon;
  }

  /**
   * The local link: the gateway on <runtime-dir>/gateway.sock too, for this user's processes.
   * Bound beside its name and published with link(2), as the worker socket is; one left by a
   * killed daemon is replaced (this daemon holds the runtime dir's lock). Not on Windows, nor
   * where the path is too long for a Unix socket: TCP serves alone there.
   */
  async #listenLocalLink(): Promise<string | undefined> {
    if (process.platform === 'win32') return undefined;
    const path = gatewaySocketPath(this.options.runtimeDir);
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
      this.#log.info(
        `no local link: ${path} is longer than a Unix socket path may be (${MAX_SOCKET_PATH_BYTES} bytes); gateway clients use the TCP port`,
      );
      return undefined;
    }
    await claimGatewaySocket(path);
    const bindPath = bindPathFor(path);
    try {
      await this.#endpoint.listenLocal(bindPath);
      this.#boundGatewaySocket = await publishSocket(bindPath, path);
    } catch (error) {
      if (error instanceof BridgeError) throw error;
      throw new BridgeError(
        'listen_failed',
        `cannot listen on the gateway's local link ${path}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    return path;
  }

  /** Stops serving the local link and removes gateway.sock if it is still ours; sessions on it stay. */
  async #dropLocalLink(): Promise<void> {
    // Unlinked while still bound: its inode cannot be reused meanwhile, so the check is exact.
    await removeIfSameFile(gatewaySocketPath(this.options.runtimeDir), this.#boundGatewaySocket);
    this.#boundGatewaySocket = undefined;
    this.#endpoint.closeLocal();
  }

  /** Loads the NATS client only now, and starts joining in the background. */
  async #joinBackplane(): Promise<void> {
    const { Backplane } = await import('./backplane.js');
    const options = this.options;
    this.#backplane = new Backplane(
      {
        servers: options.nats,
        prefix: options.natsPrefix,
        name: options.natsName,
        creds: options.natsCreds,
        ca: options.natsCa,
        heartbeatMs: options.natsHeartbeatMs,
        abandonGraceMs: options.router.abandonGraceMs,
        retentionMs: options.router.retentionMs,
        streamTtlMs: options.router.streamTtlMs,
      },
      {
        router: this.#router,
        log: this.#log,
        now: () => this.now(),
        schedule: () => this.#scheduler.schedule(),
        cancelLocal: (token, reason) => this.#cancel(token, reason, true),
      },
    );
    this.#backplane.start();
  }

  /** A summary with the host its stream is on, when there is a backplane. */
  #withHost(summary: StreamSummary): StreamSummary {
    const backplane = this.#backplane;
    if (backplane === undefined || summary.state === 'waiting') return summary;
    return { ...summary, host: backplane.hostOf(summary.progressToken) ?? backplane.name };
  }

  get info(): DaemonInfo {
    if (this.#info === undefined)
      throw new BridgeError(
        'not_started',
        'the daemon has not started: read its info once Daemon.start() has resolved',
      );
    return this.#info;
  }

  now(): number {
    return this.#epoch + performance.now();
  }

  /** The gateway methods, also used in-process by the MCP server. */
  readonly backend: GatewayBackend = {
    subscribe: (session, params) => {
      const outcome = this.#router.subscribe(session, params, this.now());
      this.#scheduler.schedule();
      return outcome;
    },
    unsubscribe: (session, token) => {
      this.#router.unsubscribe(session, token);
    },
    subscribeAll: (session, params) => {
      const outcome = this.#router.subscribeAll(session, params?.minIntervalMs, this.now());
      this.#scheduler.schedule();
      return outcome;
    },
    unsubscribeAll: (session) => {
      this.#router.unsubscribeAll(session);
    },
    listReplyBytes: () => this.#listReplyBytes,
    list: (after, limit, maxBytes) =>
      this.#router.page(after, limit, maxBytes, (summary) => this.#withHost(summary), this.now()),
    listEpoch: randomBytes(6).toString('base64url'),
    positionsIssued: () => this.#router.positionsIssued,
    get: (token) => {
      const summary = this.#router.get(token, this.now());
      return summary === undefined ? undefined : this.#withHost(summary);
    },
    cancel: (token, reason) => this.#cancel(token, reason),
    status: () => this.status(),
    createTask: (params) => {
      const created = this.#tasks.create(
        params.progressToken,
        params.ttlMs,
        this.backend.get,
        this.now(),
      );
      // Its TTL may pass before any other's.
      this.#taskExpiry.schedule();
      return created;
    },
    getTask: (taskId) => this.#tasks.get(taskId, this.backend.get, this.now()),
    cancelTask: (taskId, reason) => {
      const cancelled = this.#tasks.cancel(taskId, reason, this.backend.get, this.now());
      if (cancelled === undefined) return { task: undefined, workers: 0 };
      const workers = cancelled.wasWorking
        ? this.#cancel(cancelled.task.progressToken, cancelled.task.reason)
        : 0;
      if (cancelled.wasWorking) {
        const task = cancelled.task;
        // After the caller's turn (not inside its cancel), yet before any frame read later.
        for (const listener of this.#taskCancelled) queueMicrotask(() => listener(task));
      }
      return { task: cancelled.task, workers };
    },
    listTasks: (after, limit, maxBytes) =>
      this.#tasks.list({ after, limit, maxBytes }, this.backend.get, this.now()),
  };

  /** `askers`: connections that asked for this status, which are not workers and are not counted. */
  status(askers = 0): DaemonStatus {
    const stats = this.#router.stats();
    const status: DaemonStatus = {
      pid: process.pid,
      version: VERSION,
      uptimeMs: Math.round(this.now() - this.#startedAt),
      socket: this.options.socketPath,
      url: this.#info?.url ?? '',
      connections: Math.max(0, this.#ingress.connectionCount - askers),
      sessions: this.#hub.count,
      pageSessions: this.#hub.countOf('page'),
      localLinkSessions: this.#endpoint.localLinkSessions,
      streams: stats.streams,
      subscriptions: stats.subscriptions,
      subscribedToAll: stats.subscribedToAll,
      claims: stats.claims,
      tasks: this.#tasks.size,
      memory: { rss: process.memoryUsage.rss(), heapUsed: process.memoryUsage().heapUsed },
      counters: {
        framesAccepted: this.#framesAccepted,
        framesRejected: { ...this.#framesRejected },
        notificationsSent: this.#hub.notificationsSent,
        coalesced: stats.coalesced,
        connectionsRefused: this.#ingress.refusedConnections,
        unreadRepliesClosed: this.#ingress.unreadRepliesClosed,
        slowSessionsClosed: this.#hub.slowSessionsClosed,
        ...this.#endpoint.counters,
      },
      journal: this.#doneJournal.figures(),
    };
    if (this.#backplane !== undefined) status.backplane = this.#backplane.status();
    return status;
  }

  /**
   * Graceful stop: no new connections, workers' queued replies drain, held
   * values are flushed to sessions, sessions close, files are removed.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#log.info('stopping: new sessions are refused (daemon_stopping)');
    await this.#teardown(this.options.shutdownGraceMs);
    this.#log.info('stopped');
  }

  /**
   * Closes everything and removes this daemon's files: the socket only if it is
   * still the file this daemon bound, daemon.json only if it still names this
   * daemon. Another daemon may have replaced either; its files are left alone.
   */
  async #teardown(graceMs: number): Promise<void> {
    // Before the grace it gives workers: a session opened during it would only be closed after.
    this.#hub.refuseNewSessions();
    this.#scheduler.stop();
    this.#taskExpiry.stop();
    this.#idleCollection?.stop();
    // While the socket is still bound its file cannot be freed and its inode reused,
    // so the identity check is exact: unlink first, then close.
    await removeIfSameFile(this.options.socketPath, this.#boundSocket);
    await this.#dropLocalLink();
    await this.#ingress.stop(graceMs);
    this.#router.flushAll(this.now());
    await this.#backplane?.stop();
    // MCP sessions first: their open SSE responses would hold the HTTP server open.
    await (await this.#mcpHttp?.catch(() => undefined))?.close();
    await this.progressSource.close();
    this.#pageFeed.stop();
    await this.#endpoint.stop(graceMs);
    if (this.#info !== undefined)
      await removeOwnDaemonInfo(daemonInfoPath(this.options.runtimeDir), this.#info.pid);
    this.#doneJournal.close();
    this.#runtimeDirLock?.release();
  }

  #frame(connection: WorkerConnection, type: string, data: unknown): void {
    switch (type) {
      case 'progress':
        // The guard alone on the hot path: no result object per frame; refusals are explained apart.
        if (isProgressFrame(data)) {
          this.#answer(
            connection,
            this.#backplane?.refusal(data.progressToken) ??
              this.#router.publish(connection.id, data, this.#frameTime()),
            data,
          );
        } else {
          this.#reject(connection, explainProgressFrame(data));
        }
        return;
      case 'done':
        if (isDoneFrame(data)) {
          const now = this.#frameTime();
          // Journaled before it is applied (a done the journal cannot take is refused, and the
          // stream stays as it was), and the ack held until the journal is on disk (one sync for
          // every done of a turn, or more): an acked done survives a crash and a power loss.
          const outcome =
            this.#backplane?.refusal(data.progressToken) ??
            this.#router.finish(connection.id, data, now, (ending) =>
              this.#journal(connection.id, data, ending, now),
            );
          if (outcome.ok && data.seq !== undefined) connection.holdRepliesForSync();
          this.#answer(connection, outcome, data);
        } else {
          this.#reject(connection, explainDoneFrame(data));
        }
        return;
      case 'claim':
        if (isClaimFrame(data)) {
          // A token another host publishes is refused, not half claimed: that host's workers
          // get its cancels, and this connection could send it nothing (docs/PROTOCOL.md §7).
          this.#answer(
            connection,
            this.#backplane?.refusal(data.progressToken) ??
              this.#router.claim(connection.id, data.progressToken),
            data,
          );
        } else {
          this.#reject(connection, explainClaimFrame(data));
        }
        return;
      case 'ping':
      case 'status': {
        const refusal = checkEmptyRequest(type, data);
        if (refusal !== undefined) this.#reject(connection, refusal);
        else if (type === 'ping')
          connection.send('pong', {
            pid: process.pid,
            version: VERSION,
            protocol: PROTOCOL_VERSION,
          });
        else connection.send('status', this.status(1));
        return;
      }
      default:
        this.#reject(connection, {
          code: 'unknown_event',
          message: `unknown event type ${JSON.stringify(type.length > 80 ? `${shorten(type, 80)}…` : type)}: workers send ${WORKER_EVENT_LIST}`,
        });
    }
  }

  /** Writes an accepted done, with what a restarted daemon needs to end its stream as it was. */
  #journal(
    connection: ConnectionId,
    frame: DoneFrame,
    ending: EndingStream,
    now: number,
  ): ReturnType<DoneCommit> {
    const line: JournalLine = {
      v: 1,
      at: Math.floor(now),
      startedAt: Math.floor(ending.startedAt),
      progressToken: frame.progressToken,
      status: frame.status ?? DEFAULT_DONE_STATUS,
    };
    if (frame.message !== undefined) line.message = frame.message;
    if (ending.last !== undefined) {
      const { progressToken: _token, ...last } = ending.last;
      line.last = last;
    }
    const failure = this.#doneJournal.record(line, connection);
    return failure === undefined
      ? undefined
      : { ok: false, code: 'journal_failed', message: failure };
  }

  /** The group commit: the held acks leave once the journal's sync has returned. */
  #syncJournal(synced: () => void): void {
    this.#doneJournal.sync((error, dones) => {
      // The dones are written (a crash keeps them), only not known to be on disk: say so, ack anyway.
      if (error !== null) this.#log.error(`done journal: sync failed: ${error.message}`);
      else this.#log.debug(`done journal: synced ${dones} done(s); their acks follow`);
      synced();
    });
  }

  #syncJournalNow(): void {
    try {
      this.#doneJournal.syncNow();
    } catch (error) {
      this.#log.error(`done journal: sync failed: ${(error as Error).message}`);
    }
  }

  #frameTime(): number {
    this.#readAt ??= this.now();
    return this.#readAt;
  }

  /** Acks an accepted frame that asked for it, or rejects it with the router's reason. */
  #answer(
    connection: WorkerConnection,
    outcome: { ok: true } | { ok: false; code: RejectCode; message: string },
    frame: { progressToken: ProgressToken; seq?: number | undefined },
  ): void {
    const { progressToken, seq } = frame;
    if (outcome.ok) {
      this.#framesAccepted++;
      progressFlows();
      if (seq !== undefined) connection.send('ack', { seq });
      return;
    }
    const rejection: FrameRejection = {
      code: outcome.code,
      message: outcome.message,
      progressToken,
    };
    if (seq !== undefined) rejection.seq = seq;
    this.#reject(connection, rejection);
  }

  #countRejected(code: RejectCode): void {
    this.#framesRejected[code] = (this.#framesRejected[code] ?? 0) + 1;
  }

  #reject(connection: WorkerConnection, rejection: FrameRejection): void {
    this.#countRejected(rejection.code);
    connection.send('rejected', rejection);
  }

  /**
   * Tells the stream's workers to cancel; a remote host's workers through the backplane, each
   * host counted as one. `localOnly`: a cancel that came from the backplane goes no further.
   */
  #cancel(token: ProgressToken, reason: string | undefined, localOnly = false): number {
    const data = reason === undefined ? { progressToken: token } : { progressToken: token, reason };
    let told = 0;
    for (const id of this.#router.cancelTargets(token)) {
      if (this.#backplane?.isRemote(id)) {
        if (!localOnly && this.#backplane.cancel(id, token, reason)) told++;
      } else if (this.#ingress.send(id, 'cancel', data)) told++;
    }
    return told;
  }
}

/** The daemon's HTTP routes beside /ws: /mcp and /metrics need the secret, /healthz does not. */
function addRoutes(
  endpoint: GatewayEndpoint,
  handlers: { mcp: HttpHandler; metrics: () => string },
): void {
  for (const method of ['POST', 'GET', 'DELETE'])
    endpoint.route(method, MCP_PATH, handlers.mcp, true);
  endpoint.route('GET', '/healthz', (_request: IncomingMessage, response: ServerResponse) => {
    // nosniff: a browser must not read the answer as anything but JSON.
    response.writeHead(200, {
      'content-type': 'application/json',
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
    });
    response.end(JSON.stringify({ ok: true, version: VERSION, pid: process.pid }));
  });
  endpoint.route(
    'GET',
    '/metrics',
    (_request, response) => {
      response.writeHead(200, {
        'content-type': 'text/plain; version=0.0.4; charset=utf-8',
        'x-content-type-options': 'nosniff',
      });
      response.end(handlers.metrics());
    },
    true,
  );
}

function mebibytes(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

function listenError(options: DaemonOptions, error: NodeJS.ErrnoException): Error {
  if (error.code === 'EADDRINUSE') {
    return new BridgeError(
      'port_in_use',
      `port ${options.port} on ${options.host} is in use (another user's daemon?): choose another with --port, or --port 0 for any free port`,
      { cause: error },
    );
  }
  return new BridgeError(
    'listen_failed',
    `cannot listen on ${options.host}:${options.port}: ${error.message}`,
    {
      cause: error,
    },
  );
}

/** "progress, done, claim, ping or status", for the unknown_event message. */
const WORKER_EVENT_LIST = WORKER_EVENT_NAMES.join(', ').replace(/, (\w+)$/, ' or $1');
