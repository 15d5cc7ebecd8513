/**
 * "Flood plus probe" (issue 13, fairness between workers): N connections
 * flood the worker socket as fast as it accepts (the ingest publisher), and
 * meanwhile a probe measures what everyone else sees: a new connection's
 * connect + ping -> pong, and an honest worker's frame reaching an honest
 * subscriber (coalescing off). Reported beside the flood's own throughput,
 * so a fairness change shows what it costs. Bridge builds only (`bridge`,
 * `before`): the baselines answer no ping.
 */
import type { ProbeConfig } from '../load/probe.ts';
import { Child } from './child.ts';
import { cpuShare, sampleProcess, sleep } from './proc.ts';
import type { LatencySummary } from './stats.ts';
import { type StartOptions, type SystemName, startSystem } from './systems.ts';
import type { PublisherConfig, PublisherDone } from './targets.ts';
import type { Sizes } from './workloads.ts';

/** Flooding connections per size of run. */
export const PROBE_FLOODERS: Record<string, number[]> = {
  full: [24, 64],
  quick: [24, 64],
  profile: [64],
  smoke: [2],
};

/** One probe of each kind every this many ms (the measurement: one every ~50 ms). */
export const PROBE_INTERVAL_MS = 50;

export interface FloodProbeResult {
  flooders: number;
  /** Frames per second the server took in from the flood over the window, on its own clock. */
  floodFramesPerSecond: number;
  serverCpu: number;
  /** A new connection: connect, ping, pong. */
  ping: LatencySummary;
  /** An honest worker's frame until the honest subscriber has it. */
  honest: LatencySummary;
  rejected: number;
  errors: string[];
}

interface ProbeDone {
  type: 'result';
  ping: LatencySummary;
  honest: LatencySummary;
  errors: string[];
}

export async function runFloodProbe(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
  flooders: number,
): Promise<FloodProbeResult> {
  const system = await startSystem(name, options);
  const children: Child[] = [];
  try {
    if (system.workers.kind !== 'unix' || system.subscribers.kind !== 'bridge')
      throw new Error(`${name}: the probe needs the bridge's worker socket and gateway`);
    const flood = new Child('load/publisher.ts');
    children.push(flood);
    const floodConfig: PublisherConfig = {
      target: system.workers,
      tokens: Array.from({ length: flooders }, (_, i) => `flood-${i + 1}`),
      mode: 'flood',
      durationMs: 600_000,
      framesPerChunk: sizes.framesPerChunk,
    };
    flood.send({ type: 'config', config: floodConfig });
    await flood.ready();
    const probe = new Child('load/probe.ts');
    children.push(probe);
    const probeConfig: ProbeConfig = {
      socketPath: system.workers.path,
      url: system.subscribers.url,
      secret: system.subscribers.secret,
      token: 'honest-probe',
      intervalMs: PROBE_INTERVAL_MS,
    };
    probe.send({ type: 'config', config: probeConfig });
    await probe.ready();

    const floodDone = flood.next<PublisherDone>('done', 720_000);
    flood.send({ type: 'go' });
    await sleep(sizes.warmupMs);
    const from = await system.ingested();
    const cpuFrom = sampleProcess(system.pid);
    probe.send({ type: 'go' });
    await sleep(sizes.measureMs);
    const probeDone = probe.next<ProbeDone>('result', 30_000);
    probe.send({ type: 'stop' });
    const probed = await probeDone;
    const to = await system.ingested();
    const cpuTo = sampleProcess(system.pid);
    flood.send({ type: 'stop' });
    const flooded = await floodDone;
    return {
      flooders,
      // The probe's own frames (a few dozen) are within the count; against a flood they are noise.
      floodFramesPerSecond: (to.frames - from.frames) / ((to.atMs - from.atMs) / 1000),
      serverCpu: cpuShare(cpuFrom, cpuTo),
      ping: probed.ping,
      honest: probed.honest,
      rejected: flooded.rejected,
      errors: [...flooded.errors, ...probed.errors],
    };
  } finally {
    for (const child of children) await child.stop();
    await system.stop();
  }
}

/** The workload's table: one row per system and flood size. */
export function floodProbeTable(
  rows: Record<
    number,
    Partial<
      Record<SystemName, { ok: true; value: FloodProbeResult } | { ok: false; error: string }>
    >
  >,
  labels: Record<SystemName, string>,
): string {
  const lines = [
    'flood plus probe: N connections flood; a new connection pings, an honest frame goes to an honest subscriber',
    '| system | flooders | flood frames/s | server cpu | ping p50 | ping p99 | honest p50 | honest p99 | probes |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: |',
  ];
  const ms = (value: number) => (Number.isNaN(value) ? '-' : `${value.toFixed(1)} ms`);
  for (const [flooders, row] of Object.entries(rows)) {
    for (const [system, outcome] of Object.entries(row) as Array<
      [SystemName, { ok: true; value: FloodProbeResult } | { ok: false; error: string }]
    >) {
      if (!outcome.ok) {
        lines.push(
          `| ${labels[system]} | ${flooders} | failed: ${outcome.error.slice(0, 80)} | | | | | | |`,
        );
        continue;
      }
      const v = outcome.value;
      lines.push(
        `| ${labels[system]} | ${flooders} | ${Math.round(v.floodFramesPerSecond).toLocaleString('en-US')} | ${Math.round(v.serverCpu * 100)}% | ${ms(v.ping.p50Ms)} | ${ms(v.ping.p99Ms)} | ${ms(v.honest.p50Ms)} | ${ms(v.honest.p99Ms)} | ${v.ping.count}/${v.honest.count} |`,
      );
    }
  }
  return lines.join('\n');
}
