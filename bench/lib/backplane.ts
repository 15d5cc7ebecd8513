/**
 * The cross-host workload (issue 11, docs/BACKPLANE.md): a paced worker on
 * daemon A, one WebSocket session on daemon B, the two joined by a real
 * `nats-server -js`; beside it, in the same run, the local path (worker and
 * session on one daemon without --nats). Latency as the `latency` workload
 * measures it (stamped on the host clock, coalescing off), delivered
 * notifications per second, and the CPU each daemon spends per frame.
 *
 * Each run starts fresh processes and offers its rate for `backplaneSettleMs`
 * before the measured window: V8 optimises the hot path of each Node process
 * on the way (daemons, publisher, subscriber) in those seconds, and its
 * compiles, on two cores shared by five processes, are their tail. A daemon in
 * the field runs for days, so the window measures the settled path; the
 * settling seconds' latency is reported too (`early`), for a fresh daemon.
 *
 * Its workers are staggered: each of the four tokens' frames falls due a quarter
 * of a period after the previous one's, as independent workers' do. With every
 * worker's frame due on the same tick (the `latency` workload's shape) four
 * frames cross five processes at once, and their queueing for two cores is the
 * p99: a chain of trivial Node relays through the same nats-server shows it too
 * (docs/BACKPLANE.md, Latency).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Child } from './child.ts';
import { nowUs } from './frames.ts';
import { natsPorts } from './nats-ports.ts';
import { cpuShare, type ProcSample, sampleProcess, sleep } from './proc.ts';
import type { LatencySummary } from './stats.ts';
import {
  BIN,
  natsServerPath,
  removeScratch,
  type StartOptions,
  scratchDir,
  spawnServer,
  startDaemonProcess,
  startSystem,
  stopProcess,
  untilReady,
} from './systems.ts';
import type {
  PublisherConfig,
  PublisherDone,
  SubscriberConfig,
  SubscriberResult,
  SubscriberTarget,
  WorkerTarget,
} from './targets.ts';
import type { Sizes } from './workloads.ts';

/** Offered frames per second, by size of run: the 1k and 10k. */
export const BACKPLANE_RATES: Record<string, number[]> = {
  full: [1000, 10_000],
  quick: [1000, 10_000],
  profile: [10_000],
  smoke: [200],
};

/** `backplane (before)`: the same two hosts on the build of `--before DIR`, in the same run. */
export type BackplanePath = 'local' | 'backplane' | 'backplane (before)';

/** The paths of one row: the before build's backplane too when there is one. */
export function backplanePaths(beforeRoot: string | undefined): BackplanePath[] {
  return beforeRoot === undefined
    ? ['local', 'backplane']
    : ['local', 'backplane', 'backplane (before)'];
}

/** A window's latency figures; NaN where it had no samples. */
type Latency = Pick<LatencySummary, 'p50Ms' | 'p99Ms' | 'maxMs'>;

function latencyOf(figures: LatencySummary | undefined): Latency {
  return {
    p50Ms: figures?.p50Ms ?? Number.NaN,
    p99Ms: figures?.p99Ms ?? Number.NaN,
    maxMs: figures?.maxMs ?? Number.NaN,
  };
}

/**
 * What the backplane adds to the local path's p99: over the measured, settled window (the
 * target) and over the settling seconds of fresh processes. The table and the target check both.
 */
export function p99Added(
  local: BackplaneResult,
  cross: BackplaneResult,
): { settled: number; early: number } {
  return {
    settled: cross.p99Ms - local.p99Ms,
    early: cross.early.p99Ms - local.early.p99Ms,
  };
}

export interface BackplaneResult {
  path: BackplanePath;
  offeredPerSecond: number;
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Latency over the settling seconds, from the first frame of fresh processes. */
  early: Latency;
  /** Notifications per second the session received over the measured window. */
  deliveredPerSecond: number;
  /** Every frame reached the session, in order, the last with the final value. */
  allDelivered: boolean;
  /** CPU per frame, in microseconds: the publishing daemon (A), the session's (B; the same one locally), NATS. */
  cpuUsPerFrame: { a: number; b: number; nats: number };
  errors: string[];
}

interface Daemon {
  readonly pid: number;
  readonly workers: WorkerTarget;
  readonly subscribers: SubscriberTarget;
  stop(): Promise<void>;
}

/** The workload's nats-server: JetStream in a scratch dir, a port of its own, the bench's limits. */
export async function startNatsServer(): Promise<{
  url: string;
  pid: number;
  stop(): Promise<void>;
}> {
  const binary = natsServerPath();
  if (binary === undefined) throw new Error('nats-server is not installed');
  const dir = scratchDir('backplane-nats');
  const config = join(dir, 'nats.conf');
  writeFileSync(config, 'max_pending: 1073741824\nwrite_deadline: "60s"\n');
  // A port of its own choosing, read from its log (nats-ports.ts says why).
  const server = spawnServer(binary, [
    '-a',
    '127.0.0.1',
    '-p',
    '-1',
    '-js',
    '-sd',
    dir,
    '-c',
    config,
  ]);
  const { child } = server;
  await untilReady(server, 'nats-server', () => server.stderr().includes('Server is ready'));
  const port = natsPorts(server.stderr()).client;
  if (port === undefined) throw new Error(`nats-server did not say its port: ${server.stderr()}`);
  return {
    url: `nats://127.0.0.1:${port}`,
    pid: child.pid ?? -1,
    async stop() {
      await stopProcess(child);
      removeScratch(dir);
    },
  };
}

/** A daemon on the backplane, ready once it has joined. */
async function startHost(
  bin: string,
  options: StartOptions,
  url: string,
  name: string,
): Promise<Daemon> {
  const runtimeDir = scratchDir(`backplane-${name}`);
  const { server, info } = await startDaemonProcess(
    bin,
    options,
    runtimeDir,
    [
      '--min-interval-ms',
      '0',
      '--max-session-buffer-bytes',
      String(1024 * 1024 * 1024),
      '--nats',
      url,
      '--nats-name',
      name,
    ],
    `daemon ${name} (joining the backplane)`,
    (stderr) => stderr.includes('backplane: joined'),
  );
  const { child } = server;
  return {
    pid: child.pid ?? -1,
    workers: { kind: 'unix', path: info.socket },
    subscribers: { kind: 'bridge', url: info.url, secret: info.secret },
    async stop() {
      await stopProcess(child);
      removeScratch(runtimeDir);
    },
  };
}

async function load(script: string, config: PublisherConfig | SubscriberConfig): Promise<Child> {
  const child = new Child(script);
  child.send({ type: 'config', config });
  await child.ready();
  return child;
}

/** One measurement of one path at one rate. */
export async function runBackplane(
  path: BackplanePath,
  options: StartOptions,
  sizes: Sizes,
  ratePerSecond: number,
): Promise<BackplaneResult> {
  const stops: Array<() => Promise<void>> = [];
  try {
    let a: Daemon;
    let b: Daemon;
    let natsPid = -1;
    if (path === 'local') {
      const system = await startSystem('bridge', { ...options, minIntervalMs: 0 });
      stops.push(() => system.stop());
      a = { ...system, stop: () => system.stop() };
      b = a;
    } else {
      const nats = await startNatsServer();
      stops.push(() => nats.stop());
      natsPid = nats.pid;
      const bin = path === 'backplane' ? BIN : beforeBin(options);
      [a, b] = await Promise.all([
        startHost(bin, options, nats.url, 'bench-a'),
        startHost(bin, options, nats.url, 'bench-b'),
      ]);
      stops.push(
        () => a.stop(),
        () => b.stop(),
      );
    }
    const run = `${path.replace(/\W+/g, '-')}-${process.pid}-${Date.now()}`;
    const tokens = Array.from({ length: sizes.e2ePublishers }, (_, i) => `${run}-${i + 1}`);
    const sub = await load('load/subscriber.ts', {
      target: b.subscribers,
      sessions: 1,
      tokens,
      minIntervalMs: 0,
      mode: 'parse',
      reportEveryMs: 100,
    });
    stops.push(() => sub.stop());
    const pub = await load('load/publisher.ts', {
      target: a.workers,
      tokens,
      mode: 'paced',
      phases: 'staggered',
      ratePerSecond,
      durationMs: sizes.backplaneSettleMs + sizes.measureMs,
      framesPerChunk: sizes.framesPerChunk,
    });
    stops.push(() => pub.stop());
    const done = pub.next<PublisherDone>('done', 120_000);
    const goUs = nowUs();
    const settledUs = goUs + sizes.backplaneSettleMs * 1000;
    sub.send({ type: 'record-early', fromUs: goUs, toUs: settledUs });
    sub.send({ type: 'record-from', fromUs: settledUs });
    pub.send({ type: 'go' });
    await sleep(sizes.backplaneSettleMs);
    const pids = [a.pid, b.pid, natsPid];
    const sample = (pid: number): ProcSample | undefined =>
      pid > 0 ? sampleProcess(pid) : undefined;
    const from = pids.map(sample);
    await sleep(sizes.measureMs);
    const to = pids.map(sample);
    const share = (i: number) => {
      const start = from[i];
      const end = to[i];
      return start === undefined || end === undefined ? 0 : cpuShare(start, end);
    };
    const sent = await done;
    sub.send({ type: 'expect', count: sent.sent, final: sent.lastProgress, timeoutMs: 60_000 });
    const result = await sub.next<SubscriberResult>('result', 90_000);
    const session = result.sessions[0];
    const latency = result.latency;
    const perFrameUs = (cpu: number) => (cpu / ratePerSecond) * 1e6;
    const allDelivered =
      result.complete &&
      sent.rejected === 0 &&
      session !== undefined &&
      session.count === sent.sent &&
      session.outOfOrder === 0 &&
      Object.entries(session.lastProgress).every(
        ([token, progress]) => sent.lastProgress[token] === progress,
      );
    const deliveredPerSecond =
      session !== undefined && session.lastAtMs > session.firstAtMs
        ? ((session.count - 1) * 1000) / (session.lastAtMs - session.firstAtMs)
        : Number.NaN;
    return {
      path,
      offeredPerSecond: ratePerSecond,
      count: latency?.count ?? 0,
      ...latencyOf(latency),
      early: latencyOf(result.earlyLatency),
      deliveredPerSecond,
      allDelivered,
      cpuUsPerFrame: {
        a: perFrameUs(share(0)),
        // Locally A and B are one daemon: its CPU is counted once, as A's.
        b: path === 'local' ? Number.NaN : perFrameUs(share(1)),
        nats: path === 'local' ? Number.NaN : perFrameUs(share(2)),
      },
      errors: [...sent.errors, ...result.errors],
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

function beforeBin(options: StartOptions): string {
  if (options.beforeRoot === undefined) throw new Error('backplane (before) needs --before DIR');
  return join(options.beforeRoot, 'bin/mcp-progress');
}

type Outcome = { ok: true; value: BackplaneResult } | { ok: false; error: string };

/**
 * The workload's table: per rate, the local path and the backplane, and what the backplane adds,
 * settled (the target) and over the settling seconds of fresh processes.
 */
export function backplaneTable(
  rows: Record<number, Partial<Record<BackplanePath, Outcome>>>,
  settleMs: number,
): string {
  const early = `first ${settleMs / 1000} s`;
  const lines = [
    `across hosts: workers on daemon A (one per token, staggered), a WebSocket session on daemon B, over nats-server -js (local: both on one daemon without --nats); measured after ${settleMs / 1000} s at the rate, which fresh processes spend optimising their hot path ("${early}": latency over those seconds)`,
    `| path | offered/s | p50 | p99 | max | p99 ${early} | max ${early} | delivered/s | all delivered | cpu/frame A | cpu/frame B | cpu/frame NATS |`,
    '| --- | --: | --: | --: | --: | --: | --: | --: | --- | --: | --: | --: |',
  ];
  const ms = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(2)} ms`);
  const us = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(1)} µs`);
  for (const [offered, row] of Object.entries(rows)) {
    for (const path of ['local', 'backplane', 'backplane (before)'] as const) {
      const outcome = row[path];
      if (outcome === undefined) continue;
      if (!outcome.ok) {
        lines.push(
          `| ${path} | ${offered} | failed: ${outcome.error.slice(0, 80)} | | | | | | | | | |`,
        );
        continue;
      }
      const v = outcome.value;
      lines.push(
        `| ${path} | ${offered} | ${ms(v.p50Ms)} | ${ms(v.p99Ms)} | ${ms(v.maxMs)} | ${ms(v.early.p99Ms)} | ${ms(v.early.maxMs)} | ${Math.round(v.deliveredPerSecond).toLocaleString('en-US')} | ${v.allDelivered ? 'yes' : 'NO'} | ${us(v.cpuUsPerFrame.a)} | ${us(v.cpuUsPerFrame.b)} | ${us(v.cpuUsPerFrame.nats)} |`,
      );
    }
    const local = row.local;
    for (const path of ['backplane', 'backplane (before)'] as const) {
      const cross = row[path];
      if (local?.ok && cross?.ok) {
        const what = path === 'backplane' ? 'the backplane' : 'the backplane (before)';
        const added = p99Added(local.value, cross.value);
        lines.push(
          `| p99 added by ${what} | ${offered} | | ${ms(added.settled)} | | ${ms(added.early)} | | | | | | |`,
        );
      }
    }
  }
  return lines.join('\n');
}
