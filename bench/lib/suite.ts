/**
 * One run of the suite: every selected workload against every selected
 * system, systems interleaved within each workload so that a noisy machine
 * hurts them alike. A failed run is recorded, not fatal.
 */
import { cpus, loadavg, totalmem } from 'node:os';
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

export const WORKLOADS = ['ingest', 'e2e', 'latency', 'fanout', 'flood', 'scale'] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
export const ALL_SYSTEMS: SystemName[] = ['bridge', 'raw', 'nodeipc', 'nats'];

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

export interface SuiteOptions {
  sizes: Sizes;
  sizeName: string;
  systems: SystemName[];
  workloads: readonly WorkloadName[];
  /** Node flags for server processes, e.g. --cpu-prof. */
  serverExecArgv: string[];
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
    sizes: string;
    skipped: string[];
  };
  systems: SystemName[];
  ingest: Record<number, Partial<Record<SystemName, Outcome<IngestResult>>>>;
  e2e: Partial<Record<SystemName, Outcome<ThroughputResult>>>;
  latency: Record<number, Partial<Record<SystemName, Outcome<LatencyResult>>>>;
  fanout: Partial<Record<SystemName, Outcome<ThroughputResult>>>;
  flood: Partial<Record<SystemName, Outcome<FloodResult>>>;
  scale: Partial<Record<SystemName, Outcome<ScaleResult>>>;
}

async function attempt<T>(what: string, log: (line: string) => void, run: () => Promise<T>) {
  const started = performance.now();
  try {
    const value = await run();
    log(`  ${what}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return { ok: true as const, value };
  } catch (error) {
    log(`  ${what}: FAILED: ${(error as Error).message}`);
    return { ok: false as const, error: (error as Error).message };
  }
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
  const result: SuiteResult = {
    conditions: {
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      loadAverageBefore: loadavg(),
      loadAverageAfter: [],
      sizes: options.sizeName,
      skipped,
    },
    systems,
    ingest: {},
    e2e: {},
    latency: {},
    fanout: {},
    flood: {},
    scale: {},
  };
  const start = { minIntervalMs: 0, execArgv: options.serverExecArgv };
  const want = (name: WorkloadName) => options.workloads.includes(name);

  if (want('ingest')) {
    for (const publishers of sizes.ingestPublishers) {
      log(`ingest, ${publishers} publisher(s)`);
      const row: SuiteResult['ingest'][number] = {};
      for (const name of systems) {
        row[name] = await attempt(name, log, () => runIngest(name, start, sizes, publishers));
      }
      result.ingest[publishers] = row;
    }
  }
  if (want('e2e')) {
    log(`end to end, ${sizes.e2ePublishers} publishers -> 1 session`);
    for (const name of systems) {
      result.e2e[name] = await attempt(name, log, () =>
        runThroughput(name, start, sizes, {
          publishers: sizes.e2ePublishers,
          sessions: 1,
          window: sizes.e2eWindow,
          prefix: 'e2e',
        }),
      );
    }
  }
  if (want('latency')) {
    for (const rate of sizes.latencyRates) {
      log(`latency at ${rate} frames/s`);
      const row: SuiteResult['latency'][number] = {};
      for (const name of systems) {
        row[name] = await attempt(name, log, () => runLatency(name, start, sizes, rate));
      }
      result.latency[rate] = row;
    }
  }
  if (want('fanout')) {
    log(`fan-out, 1 stream -> ${sizes.fanoutSubscribers} sessions`);
    for (const name of systems) {
      result.fanout[name] = await attempt(name, log, () =>
        runThroughput(name, start, sizes, {
          publishers: 1,
          sessions: sizes.fanoutSubscribers,
          window: sizes.fanoutWindow,
          prefix: 'fan',
        }),
      );
    }
  }
  if (want('flood') && systems.includes('bridge')) {
    log(`flood, coalescing ${sizes.floodIntervalMs} ms, ${sizes.floodSubscribers} sessions`);
    result.flood.bridge = await attempt('bridge', log, () => runFlood('bridge', start, sizes));
  }
  if (want('scale')) {
    log(`scale, ${sizes.scaleWorkers} idle workers and ${sizes.scaleSessions} sessions`);
    for (const name of systems) {
      result.scale[name] = await attempt(name, log, () => runScale(name, start, sizes));
    }
  }
  result.conditions.loadAverageAfter = loadavg();
  return result;
}
