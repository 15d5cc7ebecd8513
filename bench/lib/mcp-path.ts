/**
 * The MCP-path workload (issue 12): worker -> daemon -> MCP server -> an SDK
 * 1.x client's `onprogress`, over stdio, the way a host runs it; and the
 * same workload through mcp-telemetry-server, the peer, in the same run.
 *
 *   stdio      `mcp-progress mcp` using a separate daemon, tool watch_progress
 *   embedded   `mcp-progress mcp` with the daemon inside it, tool watch_progress
 *   relay      an SDK 1.x server whose tool forwards with relayProgress (separate daemon)
 *   telemetry  mcp-telemetry-server 0.1.3, tool telemetry_subscribe; the worker uses
 *              mcp-telemetry-sdk (one step event per update, one notification each)
 *   floor      bench/baselines/mcp-floor.ts: stdio JSON-RPC by hand, socket lines straight to stdout
 *   floor-pair the two-process floor: bench/baselines/floor-hop.ts takes the worker's socket and
 *              writes each read unchanged to the floor's: what daemon + `mcp` is measured against
 *   http-floor bench/baselines/mcp-http-floor.ts: the same over Streamable HTTP on loopback TCP, an
 *              SDK client as for http: what /mcp is measured against beside the stdio floor
 *   http       an SDK 1.x client on the daemon's /mcp (Streamable HTTP): one server process
 *   defaults   a default install: as stdio, at the default coalescing of the daemon, the tool
 *              (watch_progress without minIntervalMs) and the worker's client (connectPublisher
 *              without intervalMs)
 *   defaults-every  as defaults, but the worker sends every update (its client's coalescing off)
 *   sdk        start-up only: a bare SDK 1.x stdio server with three tools
 *
 * With --before DIR the bridge's own paths also run from that build, as `<path>@before`.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Child } from './child.ts';
import type {
  McpClientConfig,
  McpClientReady,
  McpClientResult,
  McpWorkerConfig,
  McpWorkerDone,
} from './mcp-targets.ts';
import {
  type ProcSample,
  sampleMachineCpu,
  sampleProcess,
  secondsBetween,
  sleep,
  stolenShare,
} from './proc.ts';
import { readSettled, type SettleWindow } from './settle.ts';
import { type LatencySummary, median } from './stats.ts';
import {
  type DaemonEndpoints,
  pollUntil,
  ROOT,
  type RunningSystem,
  removeScratch,
  scratchDir,
  startSystem,
} from './systems.ts';

export const MCP_PATHS = [
  'floor',
  'floor-pair',
  'http-floor',
  'telemetry',
  'embedded',
  'http',
  'stdio',
  'defaults',
  'defaults-every',
  'relay',
  'sdk',
] as const;
export type McpPath = (typeof MCP_PATHS)[number];
/** A path as run: from this build, or (the bridge's own paths) from the --before build. */
export type McpKey = McpPath | `${McpPath}@before`;
/** The peer the bridge's paths are compared with, and the floor under them all. */
export const MCP_PEER: McpPath = 'telemetry';
/** The mcp workload's shape (its key) that issue 27's targets judge: 10,000 updates at 1,000/s. */
export const MCP_TARGET_SHAPE = '1000';
export const MCP_FLOOR: McpPath = 'floor';
/**
 * Paths measured against a floor of their own shape too: /mcp against the HTTP floor, and the
 * paths with a separate daemon (two server processes, each woken once per update) against the
 * two-process floor.
 */
export const MCP_OWN_FLOOR: Partial<Record<McpPath, { path: McpPath; name: string }>> = {
  http: { path: 'http-floor', name: 'HTTP floor' },
  stdio: { path: 'floor-pair', name: 'two-process floor' },
  relay: { path: 'floor-pair', name: 'two-process floor' },
};
/** Paths that have something to start up but no progress tool; and paths with nothing to spawn. */
const STARTUP_ONLY: readonly McpPath[] = ['sdk'];
const RUN_ONLY: readonly McpPath[] = [
  'floor-pair',
  'http-floor',
  'http',
  'defaults',
  'defaults-every',
];
/**
 * The paths that run this project's build (`bin/mcp-progress`, and relayProgress from dist/),
 * which --before runs from the other build too.
 */
const BRIDGE_BUILD_PATHS: readonly McpPath[] = [
  'embedded',
  'http',
  'stdio',
  'defaults',
  'defaults-every',
  'relay',
];

export const MCP_PATH_LABELS: Record<McpPath, string> = {
  floor: 'floor relay',
  'floor-pair': 'two-process floor',
  'http-floor': 'floor relay (HTTP)',
  telemetry: 'mcp-telemetry',
  embedded: 'mcp (embedded)',
  http: '/mcp (SDK client)',
  stdio: 'mcp (daemon)',
  defaults: 'mcp (daemon), defaults',
  'defaults-every': 'mcp (daemon), defaults, worker sends every update',
  relay: 'relayProgress',
  sdk: 'bare SDK server',
};

export function mcpKeyLabel(key: McpKey): string {
  const { path, before } = splitKey(key);
  return before ? `${MCP_PATH_LABELS[path]} (before)` : MCP_PATH_LABELS[path];
}

export function splitKey(key: McpKey): { path: McpPath; before: boolean } {
  const before = key.endsWith('@before');
  return { path: (before ? key.slice(0, -'@before'.length) : key) as McpPath, before };
}

/** The keys a workload runs for the chosen paths: before builds next to their paths. */
export function mcpKeys(
  paths: readonly McpPath[],
  workload: 'startup' | 'mcp',
  withBefore: boolean,
): McpKey[] {
  const skip = workload === 'startup' ? RUN_ONLY : STARTUP_ONLY;
  return paths
    .filter((path) => !skip.includes(path))
    .flatMap((path): McpKey[] =>
      withBefore && BRIDGE_BUILD_PATHS.includes(path) ? [`${path}@before`, path] : [path],
    );
}

const TOKEN = 'bench-1';
/** Longer than any run; watch_progress allows at most an hour. */
const WATCH_TIMEOUT_MS = 3_600_000;
const RELAY_SERVER = join(ROOT, 'bench/load/relay-server.ts');
const FLOOR_SERVER = join(ROOT, 'bench/baselines/mcp-floor.ts');
const FLOOR_HOP = join(ROOT, 'bench/baselines/floor-hop.ts');
const HTTP_FLOOR_SERVER = join(ROOT, 'bench/baselines/mcp-http-floor.ts');
const SDK_SERVER = join(ROOT, 'bench/baselines/sdk-server.ts');
const TELEMETRY_SERVER = join(
  ROOT,
  'node_modules',
  'mcp-telemetry-server',
  (
    createRequire(import.meta.url)('mcp-telemetry-server/package.json') as {
      bin: Record<string, string>;
    }
  ).bin['mcp-telemetry-server'] ?? 'bin/server.js',
);

export interface ProcessFigures {
  role: string;
  /** CPU seconds from the first notification to the tool result. */
  cpuSeconds: number;
  /** The part of cpuSeconds spent in the kernel, system time (ProcSample.kernelSeconds). */
  kernelSeconds: number;
  /** Peak resident memory over the process's life (VmHWM). */
  peakRssBytes: number;
  /** Read calls over the same window: a server's wakes, near enough (--batch shows how many it read at once). */
  readCalls: number;
}

export interface McpRunResult {
  key: McpKey;
  /** 0: a burst, every update at once. */
  ratePerSecond: number;
  updates: number;
  latency: LatencySummary;
  /**
   * The same, of the updates that arrived `steadyFromMs` or more after the first: the stream once
   * warmed up (the first seconds run unoptimised code, in every process of the path).
   */
  steadyLatency: LatencySummary;
  steadyFromMs: number;
  /** How long warm-up updates came at the measured rate before the window opened (--warm; 0: cold). */
  warmMs: number;
  /** Updates the worker sent together, every `batch / ratePerSecond` seconds (--batch; 1: one at a time). */
  batch: number;
  /** Warm-up updates the worker sent before the measured ones (a few when cold). */
  warmUpdates: number;
  /** Progress notifications the client's onprogress got, all of them; and those of measured updates. */
  notifications: number;
  measured: number;
  /** The last update's value reached onprogress before the result. */
  finalArrived: boolean;
  outOfOrder: number;
  afterResult: number;
  /** From the worker's last update to the tool result at the client. */
  resultAfterLastUpdateMs: number;
  /** From the worker's last update to its value at the client's onprogress (coalescing shows here). */
  finalAfterLastUpdateMs: number;
  startupMs: number;
  processes: ProcessFigures[];
  /** The system's own processes (daemon and MCP server; the peer's server), CPU seconds together. */
  systemCpuSeconds: number;
  /**
   * Each run's own figures, in the order the runs ran (one entry for a single run): the runs of
   * every path interleave round by round, so entry i of two paths shared the machine's moment.
   */
  perRun: Array<{ systemCpuSeconds: number; p99Ms: number }>;
  /** The largest peak RSS of the system's own processes. */
  systemPeakRssBytes: number;
  /** Share of the machine's CPU time the host took (steal) over the window: near 0 on a quiet host. */
  stolenShare: number;
  errors: string[];
}

export interface McpStartupResult {
  key: McpKey;
  /** Spawn -> initialize result, each spawn, ms. */
  startupMs: number[];
  /**
   * CPU the server had used when the client had its initialize result, each spawn: steadier
   * than the wall time on a machine shared with other work (clock ticks, 10 ms steps).
   */
  startupCpuMs: number[];
  /** Resident memory of the MCP server process once idle after start, each spawn. */
  idleServerRssBytes: number[];
  /** The private part of it (RssAnon), each spawn. */
  idleServerPrivateBytes: number[];
  /** The separate daemon's resident memory, idle (NaN where the path has none). */
  idleDaemonRssBytes: number;
  idleDaemonPrivateBytes: number;
  /** How long after the initialize result the idle figures above were read. */
  idleAfterMs: number;
  /**
   * The server's and the separate daemon's memory later, once settled (one spawn, the last; the
   * daemon's undefined where the path has none), and when it was read: V8's memory reducer gives
   * back, seconds after start-up's last full collection, the young generation that start-up grew
   * (settle.ts). That is the figure a host lives with; the one above is start-up's.
   */
  settled?: { afterMs: number; server: IdleMemory; daemon: IdleMemory | undefined } | undefined;
}

/** A process's resident memory, and the private part of it (RssAnon). */
export interface IdleMemory {
  rssBytes: number;
  privateBytes: number;
}

/**
 * The memory of a bare Node process listening on a loopback HTTP port and a Unix socket, as the
 * servers' idle figures are read: soon after start, and (`settled`) when theirs are.
 */
export interface IdleFloor extends IdleMemory {
  /** Read as a server's settled figure is, `afterMs` after the floor was ready. */
  settled?: (IdleMemory & { afterMs: number }) | undefined;
}

interface StartedPath {
  client: Child;
  config: McpClientConfig;
  ready: McpClientReady;
  daemon: RunningSystem | undefined;
  /** The worker's socket, when known before the call (all paths but the relay). */
  workerSocket: string | undefined;
  workerKind: McpWorkerConfig['kind'];
  /** The worker client's coalescing (McpWorkerConfig.intervalMs). */
  workerIntervalMs: number | undefined;
  /** The build the worker's client comes from (McpWorkerConfig.clientRoot). */
  workerClientRoot: string;
  /** Processes that are the system, by role. */
  system: Array<{ role: string; pid: number }>;
  stop(): Promise<void>;
}

function bridgeEnv(): Record<string, string> {
  return { ...(process.env as Record<string, string>), MCP_PROGRESS_SOCKET: '' };
}

/** Where a path's processes come from: Node flags, and the --before build when the key asks for it. */
export interface McpRunOptions {
  execArgv: string[];
  beforeRoot?: string | undefined;
  /** A directory to write each run's per-update latency samples to (`--samples DIR`). */
  samplesDir?: string | undefined;
  /** Where McpRunResult.steadyLatency begins, ms after the first measured update (default 0). */
  steadyFromMs?: number | undefined;
  /**
   * Warm-up updates at the measured rate for this long before the window opens (bench --warm),
   * every path alike: the window then shows each process warm, its steady state apart from its
   * warm-up. 0 or undefined: the window opens at the first notification, cold.
   */
  warmMs?: number | undefined;
  /**
   * Updates the worker sends together, every `batch / rate` seconds (bench --batch), each its
   * own write: what a server costs per wake apart from what it costs per update. 1 or undefined:
   * one at a time.
   */
  batch?: number | undefined;
}

/** How the progress log and the table name a batched run: ", N at a time"; nothing at 1. */
export function batchLabel(batch: number | undefined): string {
  return (batch ?? 1) > 1 ? `, ${batch} at a time` : '';
}

async function startPath(key: McpKey, options: McpRunOptions): Promise<StartedPath> {
  const { path, before } = splitKey(key);
  const { execArgv } = options;
  if (before && options.beforeRoot === undefined) throw new Error(`${key} needs --before DIR`);
  // The build this key runs: its bin/mcp-progress, and the Node client its worker imports.
  const buildRoot = before ? (options.beforeRoot ?? '') : ROOT;
  const bin = join(buildRoot, 'bin/mcp-progress');
  const atDefaults = path === 'defaults' || path === 'defaults-every';
  const needsDaemon = path === 'stdio' || path === 'relay' || path === 'http' || atDefaults;
  const daemon = needsDaemon
    ? await startSystem(before ? 'before' : 'bridge', {
        // The defaults row is the daemon as installed: its own coalescing default.
        minIntervalMs: atDefaults ? undefined : 0,
        execArgv,
        beforeRoot: options.beforeRoot,
      })
    : undefined;
  const dir = needsDaemon ? undefined : scratchDir(`mcp-${path}`);
  const runtimeDir = daemon?.runtimeDir ?? dir ?? '';
  const watchArgs = { progressToken: TOKEN, timeoutMs: WATCH_TIMEOUT_MS, minIntervalMs: 0 };
  const bridgeServer = (tool: Record<string, unknown>): McpClientConfig => ({
    command: process.execPath,
    args: [
      ...execArgv,
      bin,
      'mcp',
      '--runtime-dir',
      runtimeDir,
      ...(path === 'embedded' ? ['--port', '0'] : []),
    ],
    env: bridgeEnv(),
    tool: 'watch_progress',
    toolArgs: tool,
    routeOnStderr: false,
  });
  const spawned = (script: string, args: string[], tool: string): McpClientConfig => ({
    command: process.execPath,
    args: [...execArgv, script, ...args],
    cwd: runtimeDir,
    env: process.env as Record<string, string>,
    tool,
    toolArgs: {},
    routeOnStderr: false,
  });
  const floorSocket = join(runtimeDir, 'floor.sock');
  // The HTTP floor is a server of its own, as the daemon is for /mcp: the client connects to it.
  const httpFloor =
    path === 'http-floor'
      ? await startBaseline<{ url: string }>(execArgv, HTTP_FLOOR_SERVER, [floorSocket])
      : undefined;
  // The two-process floor's first process; the floor relay, spawned by the client, is its second.
  const hopSocket = join(runtimeDir, 'hop.sock');
  const hop =
    path === 'floor-pair'
      ? await startBaseline(execArgv, FLOOR_HOP, [hopSocket, floorSocket])
      : undefined;
  let config: McpClientConfig;
  switch (path) {
    case 'telemetry':
      config = {
        ...spawned(TELEMETRY_SERVER, [], 'telemetry_subscribe'),
        toolArgs: { jobId: 'bench', timeoutMs: WATCH_TIMEOUT_MS },
      };
      break;
    case 'relay':
      config = {
        command: process.execPath,
        args: [...execArgv, RELAY_SERVER],
        env: {
          ...bridgeEnv(),
          MCP_PROGRESS_BENCH_RUNTIME_DIR: runtimeDir,
          // The server imports relayProgress from the build this key runs.
          MCP_PROGRESS_BENCH_BUILD: buildRoot,
        },
        tool: 'relay_job',
        toolArgs: {},
        routeOnStderr: true,
      };
      break;
    case 'floor':
    case 'floor-pair':
      config = spawned(FLOOR_SERVER, [floorSocket], 'watch');
      break;
    case 'http-floor':
      config = {
        ...spawned(HTTP_FLOOR_SERVER, [floorSocket], 'watch'),
        http: { url: httpFloor?.first.url ?? '', secret: 'floor' },
      };
      break;
    case 'sdk':
      config = spawned(SDK_SERVER, [], 'first');
      break;
    case 'http': {
      const { url, secret } = daemonEndpoints(runtimeDir);
      config = {
        ...bridgeServer(watchArgs),
        http: { url: new URL('/mcp', url.replace(/^ws/, 'http')).href, secret },
      };
      break;
    }
    case 'defaults':
    case 'defaults-every':
      config = bridgeServer({ progressToken: TOKEN, timeoutMs: WATCH_TIMEOUT_MS });
      break;
    default:
      config = bridgeServer(watchArgs);
  }
  if (options.samplesDir !== undefined) {
    mkdirSync(options.samplesDir, { recursive: true });
    config.samplesPath = join(options.samplesDir, `${key}.tsv`);
  }
  config.steadyFromMs = options.steadyFromMs;
  const client = new Child('load/mcp-client.ts');
  let serverPid: number | undefined;
  const stop = async () => {
    const closed = client.next('closed', 10_000);
    client.send({ type: 'close' });
    await closed.catch(() => {});
    await client.stop(5000);
    if (serverPid !== undefined && config.http === undefined) await gone(serverPid);
    await httpFloor?.stop();
    await hop?.stop();
    await daemon?.stop();
    if (dir !== undefined) removeScratch(dir);
  };
  try {
    client.send({ type: 'config', config });
    const ready = await client.nextUnlessFailed<McpClientReady>('ready', 60_000);
    // Over HTTP the client spawns nothing: the server is the daemon, or the HTTP floor.
    const httpServer =
      httpFloor !== undefined
        ? { role: SERVER_ROLES['http-floor'] ?? path, pid: httpFloor.pid }
        : daemon !== undefined
          ? { role: 'daemon', pid: daemon.pid }
          : undefined;
    serverPid = config.http === undefined ? ready.serverPid : httpServer?.pid;
    const serverRole = SERVER_ROLES[path] ?? 'mcp';
    const system =
      config.http !== undefined && httpServer !== undefined
        ? [httpServer]
        : [
            ...(daemon === undefined ? [] : [{ role: 'daemon', pid: daemon.pid }]),
            ...(hop === undefined ? [] : [{ role: 'floor hop', pid: hop.pid }]),
            { role: serverRole, pid: ready.serverPid },
          ];
    let workerSocket: string | undefined;
    if (path === 'telemetry') workerSocket = join(runtimeDir, '.mcp-telemetry.sock');
    else if (path === 'floor' || path === 'http-floor') workerSocket = floorSocket;
    else if (path === 'floor-pair') workerSocket = hopSocket;
    else if (path !== 'relay' && daemon?.workers.kind === 'unix')
      workerSocket = daemon.workers.path;
    else if (path === 'embedded') {
      // The embedded daemon starts beside initialize: the worker connects once it is up.
      await daemonInfoWritten(runtimeDir);
      workerSocket = daemonEndpoints(runtimeDir).socket;
    }
    return {
      client,
      config,
      ready: { ...ready, serverPid: serverPid ?? ready.serverPid },
      daemon,
      workerSocket,
      workerKind:
        path === 'telemetry'
          ? 'telemetry'
          : path === 'floor' || path === 'floor-pair' || path === 'http-floor'
            ? 'floor'
            : 'bridge',
      // The defaults row is a default install end to end: the worker's client coalesces too.
      workerIntervalMs: path === 'defaults' ? undefined : 0,
      workerClientRoot: buildRoot,
      system,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

const SERVER_ROLES: Partial<Record<McpPath, string>> = {
  telemetry: 'mcp-telemetry-server',
  relay: 'relay server',
  floor: 'floor relay',
  'floor-pair': 'floor relay',
  'http-floor': 'floor relay (HTTP)',
  sdk: 'sdk server',
};

/**
 * A baseline server of its own (the HTTP floor, the two-process floor's hop), spawned here, not by
 * the client: resolves with its pid and the first line it prints (JSON, once it listens); stop()
 * ends it (SIGTERM).
 */
async function startBaseline<First = unknown>(
  execArgv: string[],
  script: string,
  args: string[],
): Promise<{ pid: number; first: First; stop(): Promise<void> }> {
  const server = spawn(process.execPath, [...execArgv, script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
    await exited;
  };
  try {
    const first = await new Promise<First>((resolve, reject) => {
      let text = '';
      server.once('error', reject);
      server.once('exit', (code) =>
        reject(new Error(`${script} exited (${code}) before it listened`)),
      );
      server.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        const end = text.indexOf('\n');
        if (end !== -1) resolve(JSON.parse(text.slice(0, end)) as First);
      });
    });
    return { pid: server.pid ?? -1, first, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Settles once the daemon of `runtimeDir` has written its daemon.json (it writes it once it serves). */
function daemonInfoWritten(runtimeDir: string, timeoutMs = 10_000): Promise<void> {
  const infoPath = join(runtimeDir, 'daemon.json');
  return pollUntil(() => existsSync(infoPath), {
    timedOut: () => `the daemon wrote no ${infoPath} within ${timeoutMs} ms`,
    timeoutMs,
  });
}

function daemonEndpoints(runtimeDir: string): DaemonEndpoints {
  const infoPath = join(runtimeDir, 'daemon.json');
  if (!existsSync(infoPath)) throw new Error(`the daemon wrote no ${infoPath}`);
  return JSON.parse(readFileSync(infoPath, 'utf8')) as DaemonEndpoints;
}

function idleMemory(pid: number): IdleMemory {
  const { rssBytes, privateBytes } = sampleProcess(pid);
  return { rssBytes, privateBytes };
}

/**
 * Spawn -> initialize, and idle memory `settleMs` after it, `spawns` times; with `settle`, the
 * last spawn's memory once more when settled (McpStartupResult.settled).
 */
export async function runMcpStartup(
  key: McpKey,
  options: McpRunOptions,
  spawns: number,
  settleMs: number,
  settle?: SettleWindow,
): Promise<McpStartupResult> {
  const startupMs: number[] = [];
  const startupCpuMs: number[] = [];
  const idleServerRssBytes: number[] = [];
  const idleServerPrivateBytes: number[] = [];
  let idleDaemonRssBytes = Number.NaN;
  let idleDaemonPrivateBytes = Number.NaN;
  let settled: McpStartupResult['settled'];
  for (let i = 0; i < spawns; i++) {
    const started = await startPath(key, options);
    const readyAt = performance.now();
    startupCpuMs.push(sampleProcess(started.ready.serverPid).cpuSeconds * 1000);
    try {
      // Start-up's garbage has had its chance to go by then (the settled figure comes later).
      await sleep(settleMs);
      startupMs.push(started.ready.startupMs);
      // The server, and the separate daemon where the path has one.
      const pids = [started.ready.serverPid, ...(started.daemon ? [started.daemon.pid] : [])];
      const soon = pids.map(idleMemory);
      const [server, daemon] = soon as [IdleMemory, IdleMemory?];
      idleServerRssBytes.push(server.rssBytes);
      idleServerPrivateBytes.push(server.privateBytes);
      if (daemon !== undefined) {
        idleDaemonRssBytes = daemon.rssBytes;
        idleDaemonPrivateBytes = daemon.privateBytes;
      }
      if (settle !== undefined && i === spawns - 1) {
        const read = () => pids.map(idleMemory);
        const { afterMs, memory } = await readSettled(read, soon, readyAt, settle);
        settled = { afterMs, server: memory[0] as IdleMemory, daemon: memory[1] };
      }
    } finally {
      await started.stop();
    }
  }
  return {
    key,
    startupMs,
    startupCpuMs,
    idleServerRssBytes,
    idleServerPrivateBytes,
    idleDaemonRssBytes,
    idleDaemonPrivateBytes,
    idleAfterMs: settleMs,
    settled,
  };
}

/** The idle floor (bench/load/idle-floor.mjs), sampled as the servers are: soon, and settled. */
export async function runIdleFloor(
  execArgv: string[],
  settleMs: number,
  settle?: SettleWindow,
): Promise<IdleFloor> {
  const script = fileURLToPath(new URL('../load/idle-floor.mjs', import.meta.url));
  const floor = spawn(process.execPath, [...execArgv, script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      floor.once('error', reject);
      floor.once('exit', (code) => reject(new Error(`the idle floor exited (${code})`)));
      floor.stdout.setEncoding('utf8').on('data', (text: string) => {
        if (text.includes('ready')) resolve();
      });
    });
    const readyAt = performance.now();
    await sleep(settleMs);
    const pid = floor.pid ?? -1;
    const soon = idleMemory(pid);
    if (settle === undefined) return soon;
    const { afterMs, memory } = await readSettled(() => [idleMemory(pid)], [soon], readyAt, settle);
    return { ...soon, settled: { ...(memory[0] as IdleMemory), afterMs } };
  } finally {
    floor.stdin.end();
    if (floor.exitCode === null) await new Promise((resolve) => floor.once('exit', resolve));
  }
}

/** One run: `updates` updates at `ratePerSecond` (0: a burst), to the tool result. */
export async function runMcpPath(
  key: McpKey,
  options: McpRunOptions,
  updates: number,
  ratePerSecond: number,
  timeoutMs: number,
): Promise<McpRunResult> {
  const started = await startPath(key, options);
  const worker = new Child('load/mcp-worker.ts');
  const { client } = started;
  try {
    const workerConfig = (socket: string, token: string | undefined): McpWorkerConfig => ({
      kind: started.workerKind,
      socket,
      token,
      intervalMs: started.workerIntervalMs,
      clientRoot: started.workerClientRoot,
    });
    if (started.workerSocket !== undefined) {
      worker.send({ type: 'config', config: workerConfig(started.workerSocket, TOKEN) });
      await worker.nextUnlessFailed('ready', 60_000);
    }
    const called = client.nextUnlessFailed('called', timeoutMs);
    called.catch(() => {});
    const firstSeen = client.next('first', timeoutMs);
    firstSeen.catch(() => {});
    if (started.workerSocket === undefined) {
      const route = client.next<{ type: 'route'; env: Record<string, string> }>('route', 60_000);
      client.send({ type: 'call', config: started.config });
      const { env } = await route;
      worker.send({
        type: 'config',
        config: workerConfig(env.MCP_PROGRESS_SOCKET ?? '', env.MCP_PROGRESS_TOKEN),
      });
      await worker.nextUnlessFailed('ready', 60_000);
    } else {
      client.send({ type: 'call', config: started.config });
    }
    // Warm-up updates until the call is known to be subscribed: its first notification.
    worker.send({ type: 'warmup' });
    await firstSeen;
    const warmMs = options.warmMs ?? 0;
    const batch = options.batch ?? 1;
    if (warmMs > 0) {
      worker.send({ type: 'warm', ratePerSecond, batch });
      await sleep(warmMs);
    }
    const pids = [
      { role: 'worker', pid: worker.pid },
      { role: 'client', pid: client.pid },
      ...started.system,
    ];
    const from = pids.map(({ pid }) => sampleProcess(pid));
    const machineFrom = sampleMachineCpu();
    const sentPromise = worker.nextUnlessFailed<McpWorkerDone>('sent', timeoutMs);
    worker.send({ type: 'go', count: updates, ratePerSecond, batch });
    const sent = await sentPromise;
    await called;
    const to = pids.map(({ pid }) => sampleProcess(pid));
    const machineTo = sampleMachineCpu();
    const resultPromise = client.next<McpClientResult>('result', 30_000);
    client.send({ type: 'finish' });
    const result = await resultPromise;
    const processes = pids.map(({ role }, i) => figures(role, from[i], to[i]));
    const own = processes.slice(2);
    const systemCpuSeconds = own.reduce((sum, p) => sum + p.cpuSeconds, 0);
    return {
      key,
      ratePerSecond,
      updates,
      latency: result.latency,
      steadyLatency: result.steadyLatency,
      steadyFromMs: options.steadyFromMs ?? 0,
      warmMs,
      batch,
      warmUpdates: sent.warmups,
      notifications: result.notifications,
      measured: result.measured,
      finalArrived: result.lastN === sent.sent && !result.isError,
      outOfOrder: result.outOfOrder,
      afterResult: result.afterResult,
      resultAfterLastUpdateMs: (result.resultAtUs - sent.lastUpdateUs) / 1000,
      finalAfterLastUpdateMs: (result.finalAtUs - sent.lastUpdateUs) / 1000,
      startupMs: started.ready.startupMs,
      processes,
      systemCpuSeconds,
      perRun: [{ systemCpuSeconds, p99Ms: result.latency.p99Ms }],
      systemPeakRssBytes: Math.max(...own.map((p) => p.peakRssBytes)),
      stolenShare: stolenShare(machineFrom, machineTo),
      errors: result.errors,
    };
  } finally {
    await worker.stop();
    await started.stop();
  }
}

/**
 * Runs of one path as one result: each figure (latency percentiles, CPU, memory, times) the
 * median over the runs, so that every cell of a `--repeat N` table is a median of N, not one
 * run's chosen by another figure; what was delivered is the worst run's, so that a run that lost
 * an update, or sent one after the result, shows.
 */
export function mergeMcpRuns(runs: McpRunResult[]): McpRunResult {
  const first = runs[0];
  if (first === undefined) throw new Error('no run to merge');
  const mid = (figure: (run: McpRunResult) => number) => median(runs.map(figure));
  const latency = (pick: (run: McpRunResult) => LatencySummary): LatencySummary => ({
    count: Math.min(...runs.map((run) => pick(run).count)),
    p50Ms: mid((run) => pick(run).p50Ms),
    p99Ms: mid((run) => pick(run).p99Ms),
    p999Ms: mid((run) => pick(run).p999Ms),
    maxMs: Math.max(...runs.map((run) => pick(run).maxMs)),
  });
  return {
    key: first.key,
    ratePerSecond: first.ratePerSecond,
    updates: first.updates,
    latency: latency((run) => run.latency),
    steadyLatency: latency((run) => run.steadyLatency),
    steadyFromMs: first.steadyFromMs,
    warmMs: first.warmMs,
    batch: first.batch,
    warmUpdates: Math.min(...runs.map((run) => run.warmUpdates)),
    notifications: Math.min(...runs.map((run) => run.notifications)),
    measured: Math.min(...runs.map((run) => run.measured)),
    finalArrived: runs.every((run) => run.finalArrived),
    outOfOrder: Math.max(...runs.map((run) => run.outOfOrder)),
    afterResult: Math.max(...runs.map((run) => run.afterResult)),
    resultAfterLastUpdateMs: mid((run) => run.resultAfterLastUpdateMs),
    finalAfterLastUpdateMs: mid((run) => run.finalAfterLastUpdateMs),
    startupMs: mid((run) => run.startupMs),
    processes: first.processes.map(({ role }, i) => ({
      role,
      cpuSeconds: mid((run) => run.processes[i]?.cpuSeconds ?? Number.NaN),
      kernelSeconds: mid((run) => run.processes[i]?.kernelSeconds ?? Number.NaN),
      peakRssBytes: mid((run) => run.processes[i]?.peakRssBytes ?? Number.NaN),
      readCalls: mid((run) => run.processes[i]?.readCalls ?? Number.NaN),
    })),
    systemCpuSeconds: mid((run) => run.systemCpuSeconds),
    perRun: runs.flatMap((run) => run.perRun),
    systemPeakRssBytes: mid((run) => run.systemPeakRssBytes),
    stolenShare: mid((run) => run.stolenShare),
    errors: [...new Set(runs.flatMap((run) => run.errors))],
  };
}

/** Waits for a process that is not our child (the client's server) to leave; SIGTERM, then SIGKILL. */
async function gone(pid: number): Promise<void> {
  const alive = () => existsSync(`/proc/${pid}`) && !/State:\s+Z/.test(readStatus(pid));
  for (const [signal, waitMs] of [
    [undefined, 2000],
    ['SIGTERM', 5000],
    ['SIGKILL', 5000],
  ] as const) {
    if (signal !== undefined && alive()) {
      try {
        process.kill(pid, signal);
      } catch {
        return;
      }
    }
    const deadline = Date.now() + waitMs;
    while (alive() && Date.now() < deadline) await sleep(20);
    if (!alive()) return;
  }
}

function readStatus(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return '';
  }
}

function figures(
  role: string,
  from: ProcSample | undefined,
  to: ProcSample | undefined,
): ProcessFigures {
  if (from === undefined || to === undefined) {
    const none = Number.NaN;
    const peakRssBytes = to?.peakRssBytes ?? none;
    return { role, cpuSeconds: none, kernelSeconds: none, peakRssBytes, readCalls: none };
  }
  return {
    role,
    cpuSeconds: secondsBetween(from, to, 'cpuSeconds'),
    kernelSeconds: secondsBetween(from, to, 'kernelSeconds'),
    peakRssBytes: to.peakRssBytes,
    readCalls: to.readCalls - from.readCalls,
  };
}
