/**
 * One run of the suite: every selected workload against every selected
 * system, systems interleaved within each workload so that a noisy machine
 * hurts them alike. A failed run is recorded, not fatal.
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import {
  BACKPLANE_RATES,
  type BackplanePath,
  type BackplaneResult,
  backplanePaths,
  runBackplane,
} from './backplane.ts';
import { type FloodProbeResult, PROBE_FLOODERS, runFloodProbe } from './flood-probe.ts';
import {
  batchLabel,
  type IdleFloor,
  MCP_PATHS,
  MCP_TARGET_SHAPE,
  type McpKey,
  type McpPath,
  type McpRunResult,
  type McpStartupResult,
  mcpKeys,
  mergeMcpRuns,
  runIdleFloor,
  runMcpPath,
  runMcpStartup,
} from './mcp-path.ts';
import { sampleMachineCpu, stolenShare } from './proc.ts';
import { natsServerPath, type SystemName } from './systems.ts';
import {
  type FloodResult,
  type IngestResult,
  type LatencyResult,
  runFlood,
  runIngest,
  runLatency,
  runScale,
  runThroughput,
  type ScaleResult,
  type Sizes,
  type ThroughputResult,
} from './workloads.ts';

export const WORKLOADS = [
  'ingest',
  'e2e',
  'latency',
  'fanout',
  'flood',
  'scale',
  'startup',
  'mcp',
  'probe',
  'backplane',
] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
export const ALL_SYSTEMS: SystemName[] = ['bridge', 'norate', 'raw', 'nodeipc', 'nats'];

/** Systems that exist for one comparison only: the bridge without rate/ETA runs the ingest workload. */
const INGEST_ONLY: readonly SystemName[] = ['norate'];

/**
 * The median run's figures, with every run's key figure kept alongside, and
 * the same divided by the server's CPU share (NaN where there is none).
 */
export type Outcome<T> =
  | { ok: true; value: T; runs: number[]; perCpuRuns: number[] }
  | { ok: false; error: string };

export interface SuiteOptions {
  sizes: Sizes;
  sizeName: string;
  systems: SystemName[];
  workloads: readonly WorkloadName[];
  /** Runs of each measurement; the median run is reported. */
  repeat: number;
  /** Runs of the MCP targets' shape (MCP_TARGET_SHAPE), when not `repeat` (Sizes.mcpTargetRuns). */
  mcpTargetRepeat?: number | undefined;
  /** Node flags for server processes, e.g. --cpu-prof. */
  serverExecArgv: string[];
  /** Paths of the MCP workloads (startup, mcp); default all, the peer included. */
  paths?: readonly McpPath[] | undefined;
  /** MCP-path shapes to run, by key ("1000", "10000", "burst"); all of the size's when absent. */
  mcpShapes?: readonly string[] | undefined;
  /** Another build of the bridge to run beside this one as `before`. */
  beforeRoot?: string | undefined;
  /** Write the MCP workload's per-update latency samples under this directory, one file per run. */
  samplesDir?: string | undefined;
  /** Warm-up at the measured rate before each MCP-path window (McpRunOptions.warmMs). */
  mcpWarmMs?: number | undefined;
  /** Updates the MCP-path worker sends together (McpRunOptions.batch). */
  mcpBatch?: number | undefined;
  log: (line: string) => void;
}

export interface SuiteResult {
  conditions: {
    date: string;
    node: string;
    cpu: string;
    cores: number;
    memoryGiB: number;
    loadAverageBefore: number[];
    loadAverageAfter: number[];
    /** Share of the machine's CPU time the host took (steal) over the whole run. */
    stolenShare: number;
    sizes: string;
    repeat: number;
    skipped: string[];
  };
  systems: SystemName[];
  ingest: Record<number, Partial<Record<SystemName, Outcome<IngestResult>>>>;
  e2e: Partial<Record<SystemName, Outcome<ThroughputResult>>>;
  latency: Record<number, Partial<Record<SystemName, Outcome<LatencyResult>>>>;
  fanout: Partial<Record<SystemName, Outcome<ThroughputResult>>>;
  flood: Partial<Record<SystemName, Outcome<FloodResult>>>;
  scale: Partial<Record<SystemName, Outcome<ScaleResult>>>;
  /** Spawn -> initialize and idle memory of each MCP path's server. */
  startup: Partial<Record<McpKey, Outcome<McpStartupResult>>>;
  /** A bare Node process listening as an idle daemon must: the floor under idle memory. */
  idleFloor?: { ok: true; value: IdleFloor } | { ok: false; error: string };
  /** The MCP path, keyed by offered rate ("1000", "10000") or "burst". */
  mcp: Record<string, Partial<Record<McpKey, Outcome<McpRunResult>>>>;
  /** Flood plus probe (bench/lib/flood-probe.ts), by number of flooding connections. */
  probe: Record<number, Partial<Record<SystemName, Outcome<FloodProbeResult>>>>;
  /** Across hosts over NATS against the local path (bench/lib/backplane.ts), by offered rate. */
  backplane: Record<number, Partial<Record<BackplanePath, Outcome<BackplaneResult>>>>;
}

/** Every workload's results, none measured yet: what a run fills in, by workload. */
export function noMeasurements(): Omit<SuiteResult, 'conditions' | 'systems' | 'idleFloor'> {
  return {
    ingest: {},
    e2e: {},
    latency: {},
    fanout: {},
    flood: {},
    scale: {},
    startup: {},
    mcp: {},
    probe: {},
    backplane: {},
  };
}

async function attempt<T>(
  what: string,
  log: (line: string) => void,
  run: () => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: string }> {
  const started = performance.now();
  try {
    const value = await run();
    log(`  ${what}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return { ok: true, value };
  } catch (error) {
    log(`  ${what}: FAILED: ${(error as Error).message}`);
    return { ok: false, error: (error as Error).message };
  }
}

/**
 * One row of the table: each system `repeat` times, the systems interleaved
 * so that a burst of load elsewhere on the machine hurts them alike; the run
 * with the median key figure stands for the system, or, with `merge`, the
 * runs merged into one (each figure its median over the runs).
 */
async function measureRow<T, N extends string = SystemName>(
  systems: readonly N[],
  repeat: number,
  log: (line: string) => void,
  run: (name: N) => Promise<T>,
  figure: (value: T) => number,
  merge?: (runs: T[]) => T,
): Promise<Partial<Record<N, Outcome<T>>>> {
  const runs = new Map<N, Array<{ ok: true; value: T } | { ok: false; error: string }>>();
  for (let round = 1; round <= repeat; round++) {
    for (const name of systems) {
      const what = repeat > 1 ? `${name} (run ${round}/${repeat})` : name;
      const list = runs.get(name) ?? [];
      list.push(await attempt(what, log, () => run(name)));
      runs.set(name, list);
    }
  }
  const row: Partial<Record<N, Outcome<T>>> = {};
  for (const [name, list] of runs) {
    const good = list.flatMap((outcome) => (outcome.ok ? [outcome.value] : []));
    const failed = list.find((outcome) => !outcome.ok);
    if (good.length === 0) {
      row[name] = failed ?? { ok: false, error: 'no run' };
      continue;
    }
    const sorted = [...good].sort((a, b) => figure(a) - figure(b));
    const middle = sorted[Math.floor((sorted.length - 1) / 2)] as T;
    row[name] = {
      ok: true,
      value: merge === undefined ? middle : merge(good),
      runs: good.map(figure),
      perCpuRuns: good.map((value) => {
        const cpu = (value as { serverCpu?: number }).serverCpu;
        return typeof cpu === 'number' && cpu > 0 ? figure(value) / cpu : Number.NaN;
      }),
    };
  }
  return row;
}

/**
 * Start-up, one spawn of each path per round, `spawns` rounds: a drift in the machine's load
 * (others share it) then weighs on every path alike, where five spawns of one path and then
 * five of the next put it between them. Each path's spawns are merged into one result.
 */
async function measureStartupRow(
  keys: readonly McpKey[],
  spawns: number,
  log: (line: string) => void,
  run: (key: McpKey, last: boolean) => Promise<McpStartupResult>,
): Promise<Partial<Record<McpKey, Outcome<McpStartupResult>>>> {
  const spawned = new Map<McpKey, McpStartupResult[]>();
  const failures = new Map<McpKey, string>();
  for (let round = 1; round <= spawns; round++) {
    for (const key of keys) {
      const outcome = await attempt(`${key} (spawn ${round}/${spawns})`, log, () =>
        run(key, round === spawns),
      );
      if (!outcome.ok) {
        failures.set(key, outcome.error);
        continue;
      }
      const results = spawned.get(key) ?? [];
      results.push(outcome.value);
      spawned.set(key, results);
    }
  }
  const row: Partial<Record<McpKey, Outcome<McpStartupResult>>> = {};
  for (const key of keys) {
    const results = spawned.get(key) ?? [];
    const last = results.at(-1);
    if (last === undefined) {
      row[key] = { ok: false, error: failures.get(key) ?? 'no run' };
      continue;
    }
    const value: McpStartupResult = {
      ...last,
      startupMs: results.flatMap((result) => result.startupMs),
      startupCpuMs: results.flatMap((result) => result.startupCpuMs),
      idleServerRssBytes: results.flatMap((result) => result.idleServerRssBytes),
      idleServerPrivateBytes: results.flatMap((result) => result.idleServerPrivateBytes),
    };
    row[key] = { ok: true, value, runs: value.startupMs, perCpuRuns: [] };
  }
  return row;
}

export async function runSuite(options: SuiteOptions): Promise<SuiteResult> {
  const { sizes, log } = options;
  const skipped: string[] = [];
  let systems = options.systems;
  if (systems.includes('nats') && natsServerPath() === undefined) {
    systems = systems.filter((name) => name !== 'nats');
    skipped.push(
      'NATS baseline skipped: nats-server is not installed (Debian: apt-get install nats-server)',
    );
    log(skipped.at(-1) ?? '');
  }
  // Every workload but ingest leaves out the systems that exist for the ingest A/B only.
  const full = systems.filter((name) => !INGEST_ONLY.includes(name));
  const machineAtStart = sampleMachineCpu();
  const result: SuiteResult = {
    conditions: {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      loadAverageBefore: loadavg(),
      loadAverageAfter: [],
      stolenShare: Number.NaN,
      sizes: options.sizeName,
      repeat: options.repeat,
      skipped,
    },
    systems,
    ...noMeasurements(),
  };
  const start = {
    minIntervalMs: 0,
    execArgv: options.serverExecArgv,
    beforeRoot: options.beforeRoot,
  };
  const want = (name: WorkloadName) => options.workloads.includes(name);

  if (want('ingest')) {
    for (const publishers of sizes.ingestPublishers) {
      log(`ingest, ${publishers} publisher(s)`);
      result.ingest[publishers] = await measureRow(
        systems,
        options.repeat,
        log,
        (name) => runIngest(name, start, sizes, publishers),
        (value) => value.framesPerSecond,
      );
    }
  }
  if (want('e2e')) {
    log(`end to end, ${sizes.e2ePublishers} publishers -> 1 session`);
    result.e2e = await measureRow(
      full,
      options.repeat,
      log,
      (name) =>
        runThroughput(name, start, sizes, {
          publishers: sizes.e2ePublishers,
          sessions: 1,
          window: sizes.e2eWindow,
          prefix: 'e2e',
        }),
      (value) => value.notificationsPerSecond,
    );
  }
  if (want('latency')) {
    for (const rate of sizes.latencyRates) {
      log(`latency at ${rate} frames/s`);
      result.latency[rate] = await measureRow(
        full,
        options.repeat,
        log,
        (name) => runLatency(name, start, sizes, rate),
        (value) => value.p99Ms,
      );
    }
  }
  if (want('fanout')) {
    log(`fan-out, 1 stream -> ${sizes.fanoutSubscribers} sessions`);
    result.fanout = await measureRow(
      full,
      options.repeat,
      log,
      (name) =>
        runThroughput(name, start, sizes, {
          publishers: 1,
          sessions: sizes.fanoutSubscribers,
          window: sizes.fanoutWindow,
          prefix: 'fan',
        }),
      (value) => value.notificationsPerSecond,
    );
  }
  if (want('flood') && systems.includes('bridge')) {
    log(`flood, coalescing ${sizes.floodIntervalMs} ms, ${sizes.floodSubscribers} sessions`);
    result.flood = await measureRow(
      ['bridge'],
      1,
      log,
      (name) => runFlood(name, start, sizes),
      (value) => value.perSubscriberMax,
    );
  }
  if (want('scale')) {
    log(`scale, ${sizes.scaleWorkers} idle workers and ${sizes.scaleSessions} sessions`);
    result.scale = await measureRow(
      full,
      1,
      log,
      (name) => runScale(name, start, sizes),
      (value) => value.rssPerWorkerBytes,
    );
  }
  const paths = options.paths ?? MCP_PATHS;
  if (want('startup')) {
    log(`MCP server start-up and idle memory, ${sizes.startupSpawns} spawns each`);
    result.startup = await measureStartupRow(
      mcpKeys(paths, 'startup', options.beforeRoot !== undefined),
      sizes.startupSpawns,
      log,
      (key, last) =>
        runMcpStartup(
          key,
          { execArgv: options.serverExecArgv, beforeRoot: options.beforeRoot },
          1,
          sizes.startupSettleMs,
          last ? sizes.startupSettled : undefined,
        ),
    );
    result.idleFloor = await runIdleFloor(
      options.serverExecArgv,
      sizes.startupSettleMs,
      sizes.startupSettled,
    ).then(
      (value) => ({ ok: true as const, value }),
      (error: Error) => ({ ok: false as const, error: error.message }),
    );
  }
  if (want('mcp')) {
    const shapes = [
      ...sizes.mcpRates.map((rate) => ({
        key: String(rate),
        rate,
        updates: Math.round((rate * sizes.mcpDurationMs) / 1000),
      })),
      ...(sizes.mcpBurst > 0 ? [{ key: 'burst', rate: 0, updates: sizes.mcpBurst }] : []),
    ].filter((shape) => options.mcpShapes?.includes(shape.key) ?? true);
    for (const shape of shapes) {
      const warm = options.mcpWarmMs ? `, after ${options.mcpWarmMs / 1000} s of warm-up` : '';
      const batched = batchLabel(options.mcpBatch);
      log(
        shape.rate === 0
          ? `MCP path, a burst of ${shape.updates} updates${warm}`
          : `MCP path, ${shape.updates} updates at ${shape.rate}/s${batched}${warm}`,
      );
      const samplesDir =
        options.samplesDir === undefined ? undefined : join(options.samplesDir, shape.key);
      result.mcp[shape.key] = await measureRow(
        mcpKeys(paths, 'mcp', options.beforeRoot !== undefined),
        shape.key === MCP_TARGET_SHAPE
          ? (options.mcpTargetRepeat ?? options.repeat)
          : options.repeat,
        log,
        (key) =>
          runMcpPath(
            key,
            {
              execArgv: options.serverExecArgv,
              beforeRoot: options.beforeRoot,
              samplesDir,
              steadyFromMs: sizes.mcpSteadyFromMs,
              warmMs: options.mcpWarmMs,
              batch: options.mcpBatch,
            },
            shape.updates,
            shape.rate,
            sizes.mcpTimeoutMs,
          ),
        (value) => value.latency.p99Ms,
        mergeMcpRuns,
      );
    }
  }
  const probed = full.filter((name) => name === 'bridge' || name === 'before');
  if (want('probe') && probed.length > 0) {
    for (const flooders of PROBE_FLOODERS[options.sizeName] ?? PROBE_FLOODERS.full ?? []) {
      log(`flood plus probe, ${flooders} flooding connections`);
      result.probe[flooders] = await measureRow(
        probed,
        options.repeat,
        log,
        (name) => runFloodProbe(name, start, sizes, flooders),
        (value) => value.ping.p99Ms,
      );
    }
  }
  if (want('backplane')) {
    if (natsServerPath() === undefined) {
      skipped.push('backplane workload skipped: nats-server is not installed');
      log(skipped.at(-1) ?? '');
    } else {
      for (const rate of BACKPLANE_RATES[options.sizeName] ?? BACKPLANE_RATES.full ?? []) {
        log(`across hosts over NATS at ${rate} frames/s, against the local path`);
        result.backplane[rate] = await measureRow(
          backplanePaths(options.beforeRoot),
          options.repeat,
          log,
          (path) => runBackplane(path, start, sizes, rate),
          (value) => value.p99Ms,
        );
      }
    }
  }
  result.conditions.loadAverageAfter = loadavg();
  result.conditions.stolenShare = stolenShare(machineAtStart, sampleMachineCpu());
  return result;
}
