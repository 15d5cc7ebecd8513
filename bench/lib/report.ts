/** The suite's table (Markdown, readable in a terminal) and the issue's targets, as ratios. */
import { p99Added } from './backplane.ts';
import {
  batchLabel,
  type IdleMemory,
  MCP_FLOOR,
  MCP_OWN_FLOOR,
  MCP_PATH_LABELS,
  MCP_PATHS,
  MCP_PEER,
  MCP_TARGET_SHAPE,
  type McpKey,
  type McpPath,
  type McpRunResult,
  type McpStartupResult,
  mcpKeyLabel,
  type ProcessFigures,
  splitKey,
} from './mcp-path.ts';
import { median, ratioOfMeans } from './stats.ts';
import type { Outcome, SuiteResult } from './suite.ts';
import { SYSTEM_LABELS, type SystemName } from './systems.ts';

export interface TargetCheck {
  name: string;
  value: string;
  target: string;
  met: boolean | undefined;
}

const KIB = 1024;
const MIB = 1024 * 1024;

function rate(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(0)}k`;
  return value.toFixed(0);
}

function ms(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : 'n/a';
}

function cpu(value: number): string {
  return Number.isFinite(value) ? ` (cpu ${(value * 100).toFixed(0)}%)` : '';
}

function cell<T>(outcome: Outcome<T> | undefined, show: (value: T) => string): string {
  if (outcome === undefined) return '—';
  return outcome.ok ? show(outcome.value) : 'failed';
}

/** Bridge over raw relay of the median rate per server CPU-second over all runs. */
function perCpuRatio(bridge: Outcome<unknown> | undefined, raw: Outcome<unknown> | undefined) {
  if (!bridge?.ok || !raw?.ok) return Number.NaN;
  return median(bridge.perCpuRuns) / median(raw.perCpuRuns);
}

function ratio(
  bridge: Outcome<unknown> | undefined,
  raw: Outcome<unknown> | undefined,
  figure: (value: never) => number,
): number {
  if (!bridge?.ok || !raw?.ok) return Number.NaN;
  return figure(bridge.value as never) / figure(raw.value as never);
}

export function targets(result: SuiteResult): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const [publishers, row] of Object.entries(result.ingest)) {
    // A run without the raw relay (--systems bridge,norate) has no such ratio to print.
    if (row.raw !== undefined) {
      const r = ratio(row.bridge, row.raw, (v: { framesPerSecond: number }) => v.framesPerSecond);
      const perCpu = perCpuRatio(row.bridge, row.raw);
      checks.push({
        name: `ingest, ${publishers} publisher(s): bridge / raw relay`,
        value: `${r.toFixed(2)} (${perCpu.toFixed(2)} per server CPU-second)`,
        target: '>= 0.70',
        met: Number.isFinite(r) ? r >= 0.7 : undefined,
      });
    }
    if (row.norate !== undefined) {
      // Issue 25: the rate/ETA estimator may cost at most 3% of ingest (same build without it).
      const cost = ratio(
        row.bridge,
        row.norate,
        (v: { framesPerSecond: number }) => v.framesPerSecond,
      );
      const costPerCpu = perCpuRatio(row.bridge, row.norate);
      checks.push({
        name: `ingest, ${publishers} publisher(s): bridge / bridge without rate/ETA`,
        value: `${cost.toFixed(3)} (${costPerCpu.toFixed(3)} per server CPU-second)`,
        target: '>= 0.97',
        met: Number.isFinite(cost) ? cost >= 0.97 : undefined,
      });
    }
  }
  if (result.e2e.bridge !== undefined) {
    const r = ratio(
      result.e2e.bridge,
      result.e2e.raw,
      (v: { framesPerSecond: number }) => v.framesPerSecond,
    );
    const perCpu = perCpuRatio(result.e2e.bridge, result.e2e.raw);
    checks.push({
      name: 'end to end, coalescing off: bridge / raw relay',
      value: `${r.toFixed(2)} (${perCpu.toFixed(2)} per server CPU-second)`,
      target: '>= 0.60',
      met: Number.isFinite(r) ? r >= 0.6 : undefined,
    });
  }
  const at10k = result.latency[10_000];
  if (at10k?.bridge?.ok) {
    const bridgeP99 = at10k.bridge.value.p99Ms;
    const rawP99 = at10k.raw?.ok ? at10k.raw.value.p99Ms : Number.NaN;
    const added = bridgeP99 - rawP99;
    checks.push({
      name: 'p99 latency added over the raw relay at 10k frames/s',
      value: `${ms(added)} ms (bridge p99 ${ms(bridgeP99)} ms, raw ${ms(rawP99)} ms)`,
      target: '<= 1 ms',
      met: Number.isFinite(added) ? added <= 1 : undefined,
    });
  }
  const flood = result.flood.bridge;
  if (flood?.ok) {
    const f = flood.value;
    checks.push({
      name: 'flood: notifications per subscriber per second (highest)',
      value: f.perSubscriberMax.toFixed(1),
      target: '<= 11',
      met: f.perSubscriberMax <= 11,
    });
    checks.push({
      name: 'flood: final value delivered',
      value: `${f.finalDelivered}/${f.sessions} subscribers`,
      target: 'all',
      met: f.finalDelivered === f.sessions && f.outOfOrder === 0,
    });
    checks.push({
      name: 'flood: daemon memory (RSS at 1/4, 1/2 and the end of the flood)',
      value: `${(f.rssStartBytes / MIB).toFixed(0)} -> ${(f.rssMidBytes / MIB).toFixed(0)} -> ${(f.rssEndBytes / MIB).toFixed(0)} MiB over ${rate(f.framesSent)} frames; second half ${f.rssBytesPerFrame.toFixed(3)} B/frame`,
      target: 'flat (second half < 1 B/frame)',
      met: Number.isFinite(f.rssBytesPerFrame) ? f.rssBytesPerFrame < 1 : undefined,
    });
  }
  const scale = result.scale.bridge;
  if (scale?.ok) {
    const perWorker = scale.value.rssPerWorkerBytes;
    checks.push({
      name: `${scale.value.workers.count} idle workers: RSS per connection`,
      value: `${(perWorker / KIB).toFixed(1)} KiB`,
      target: '<= 16 KiB',
      met: scale.value.workers.failures === 0 && perWorker <= 16 * KIB,
    });
  }
  checks.push(...mcpTargets(result));
  // Issue 28: what the backplane adds to the settled path's p99, at each offered rate.
  for (const [offered, row] of Object.entries(result.backplane)) {
    const local = row.local;
    const cross = row.backplane;
    if (!local?.ok || !cross?.ok) continue;
    const added = p99Added(local.value, cross.value);
    checks.push({
      name: `backplane: p99 added over the local path at ${offered} frames/s (settled)`,
      value: `${ms(added.settled)} ms (backplane ${ms(cross.value.p99Ms)} ms, local ${ms(local.value.p99Ms)} ms; fresh processes' first seconds: ${ms(added.early)} ms added)`,
      target: '<= 1 ms',
      met: Number.isFinite(added.settled) ? added.settled <= 1 : undefined,
    });
  }
  return checks;
}

/** The issue's bounds (27) as ratios to the peer, by path: one process 1.2x, two processes 2x. */
const MCP_BOUNDS: ReadonlyArray<{ path: McpPath; peerRatio: number }> = [
  { path: 'embedded', peerRatio: 1.2 },
  { path: 'http', peerRatio: 1.2 },
  { path: 'stdio', peerRatio: 2 },
];
/**
 * Paths that deliver every update (coalescing off): the bridge's must, and the floors must for the
 * run to mean anything; the peer's delivery is shown beside them as its figure, not judged.
 */
const FULL_DELIVERY: readonly McpPath[] = [
  'floor',
  'floor-pair',
  'http-floor',
  'telemetry',
  'embedded',
  'http',
  'stdio',
  'relay',
];

/** From this many rounds on, a target's line also gives the ratio of means and its 95% interval. */
const INTERVAL_MIN_ROUNDS = 5;

/**
 * With several runs: the medians' ratio is judged, and each run's ratio to the peer's run of the
 * same round follows it (the paths' runs interleave, so a round's runs shared the machine's
 * moment), so that a target met by one run and missed by the next shows as such. With
 * INTERVAL_MIN_ROUNDS or more, the ratio of the means over the rounds and its 95% interval
 * follow too: how far a verdict of three rounds' medians can be trusted on this machine.
 */
function eachRun(
  path: McpRunResult,
  peer: McpRunResult,
  figure: (run: McpRunResult['perRun'][number]) => number,
): string {
  const rounds = path.perRun.length;
  if (rounds < 2 || rounds !== peer.perRun.length) return '';
  const ratios = path.perRun.map((run, i) => {
    const peerRun = peer.perRun[i];
    return peerRun === undefined ? 'n/a' : times(figure(run), figure(peerRun));
  });
  const each = `; median of ${rounds} runs, each: ${ratios.join(', ')}`;
  if (rounds < INTERVAL_MIN_ROUNDS) return each;
  const { ratio, low, high } = ratioOfMeans(path.perRun.map(figure), peer.perRun.map(figure));
  return `${each}; over the ${rounds} rounds ${ratio.toFixed(2)}x (95% interval ${low.toFixed(2)}-${high.toFixed(2)})`;
}

function mcpTargets(result: SuiteResult): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const at1k = result.mcp[MCP_TARGET_SHAPE];
  const peer = at1k?.[MCP_PEER];
  // The issue's ratios are of a cold window, one update at a time (the record's shape); a --warm
  // or --batch run is not checked.
  if (at1k !== undefined && peer?.ok && peer.value.warmMs === 0 && peer.value.batch === 1) {
    const p = peer.value;
    for (const { path, peerRatio } of MCP_BOUNDS) {
      const bridge = at1k[path];
      if (!bridge?.ok) continue;
      const b = bridge.value;
      checks.push({
        name: `MCP path at 1k updates/s: p99, ${MCP_PATH_LABELS[path]} vs ${MCP_PATH_LABELS[MCP_PEER]}`,
        value: `${ms(b.latency.p99Ms)} vs ${ms(p.latency.p99Ms)} ms (${times(b.latency.p99Ms, p.latency.p99Ms)}${eachRun(b, p, (run) => run.p99Ms)})`,
        target: `<= ${peerRatio}x the peer`,
        met: b.latency.p99Ms <= peerRatio * p.latency.p99Ms,
      });
      checks.push({
        name: `MCP path at 1k updates/s: CPU, ${MCP_PATH_LABELS[path]} vs ${MCP_PATH_LABELS[MCP_PEER]}`,
        value: `${b.systemCpuSeconds.toFixed(2)} vs ${p.systemCpuSeconds.toFixed(2)} s (${times(b.systemCpuSeconds, p.systemCpuSeconds)}${eachRun(b, p, (run) => run.systemCpuSeconds)})`,
        target: `<= ${peerRatio}x the peer`,
        met: b.systemCpuSeconds <= peerRatio * p.systemCpuSeconds,
      });
    }
    const defaults = at1k.defaults;
    if (defaults?.ok) {
      const d = defaults.value;
      checks.push({
        name: `MCP path at 1k updates/s: CPU, ${MCP_PATH_LABELS.defaults} vs ${MCP_PATH_LABELS[MCP_PEER]}`,
        value: `${d.systemCpuSeconds.toFixed(2)} vs ${p.systemCpuSeconds.toFixed(2)} s (${times(d.systemCpuSeconds, p.systemCpuSeconds)}${eachRun(d, p, (run) => run.systemCpuSeconds)})`,
        target: '<= 0.5x the peer',
        met: d.systemCpuSeconds <= 0.5 * p.systemCpuSeconds,
      });
      checks.push({
        name: `MCP path at 1k updates/s: ${MCP_PATH_LABELS.defaults}, last update -> its value at onprogress`,
        value: `${ms(d.finalAfterLastUpdateMs)} ms, before the result: ${d.finalArrived ? 'yes' : 'NO'}`,
        target: '<= 150 ms, yes',
        met: d.finalArrived && d.finalAfterLastUpdateMs <= 150,
      });
    }
  }
  const http = at1k?.http;
  if (http?.ok) {
    checks.push({
      name: `MCP path at 1k updates/s: peak RSS of ${MCP_PATH_LABELS.http}'s daemon`,
      value: mib(http.value.systemPeakRssBytes),
      target: '<= 100 MiB',
      met: http.value.systemPeakRssBytes <= 100 * MIB,
    });
  }
  for (const [shape, row] of Object.entries(result.mcp)) {
    for (const path of FULL_DELIVERY) {
      const outcome = row[path];
      if (!outcome?.ok) continue;
      const v = outcome.value;
      // A burst promises the final value, in order, and nothing after the result: the bridge's
      // worker client sends the newest value each time its socket drains (bounded memory).
      const burst = shape === 'burst';
      checks.push({
        name: burst
          ? `MCP path burst: ${MCP_PATH_LABELS[path]} delivered the final value, in order, nothing after the result`
          : `MCP path at ${rate(Number(shape))}/s: ${MCP_PATH_LABELS[path]} delivered every value, the final one, nothing after the result`,
        value: `${v.measured} / ${v.updates}, final ${v.finalArrived ? 'yes' : 'NO'}, ${v.afterResult} after`,
        target: burst ? 'final yes, 0 after (any number before it)' : 'all, yes, 0',
        met:
          path === MCP_PEER
            ? undefined
            : (burst || v.measured === v.updates) &&
              v.finalArrived &&
              v.afterResult === 0 &&
              v.outOfOrder === 0,
      });
    }
  }
  const bare = result.startup.sdk;
  for (const path of ['embedded', 'stdio'] as const) {
    const startup = result.startup[path];
    if (!startup?.ok) continue;
    const startMs = median(startup.value.startupMs);
    const bareMs = bare?.ok ? median(bare.value.startupMs) : Number.NaN;
    checks.push({
      name: `${MCP_PATH_LABELS[path]}: spawn -> initialize result (median of ${startup.value.startupMs.length}) vs ${MCP_PATH_LABELS.sdk}`,
      value: `${startMs.toFixed(0)} vs ${bareMs.toFixed(0)} ms (${times(startMs, bareMs)}; server CPU ${median(startup.value.startupCpuMs).toFixed(0)} ms)`,
      target: '<= 1.15x the bare SDK server',
      met: Number.isFinite(bareMs) ? startMs <= 1.15 * bareMs : undefined,
    });
    // Held to the settled figure, the one a host lives with, where it was read; start-up's beside it.
    const v = startup.value;
    const soon = {
      rssBytes: median(v.idleServerRssBytes),
      privateBytes: median(v.idleServerPrivateBytes),
    };
    const server = v.settled?.server ?? soon;
    checks.push({
      name: `${MCP_PATH_LABELS[path]}: idle RSS of the mcp process`,
      value: idleFigures(server, soon, v),
      target: '<= 70 MiB',
      met: server.rssBytes <= 70 * MIB,
    });
    if (Number.isFinite(v.idleDaemonRssBytes)) {
      const soonDaemon = { rssBytes: v.idleDaemonRssBytes, privateBytes: v.idleDaemonPrivateBytes };
      const daemon = v.settled?.daemon ?? soonDaemon;
      checks.push({
        name: 'idle daemon RSS (after start, no connections)',
        value: `${idleFigures(daemon, soonDaemon, v)}${floorNote(result)}`,
        target: '<= 55 MiB',
        met: daemon.rssBytes <= 55 * MIB,
      });
    }
  }
  return checks;
}

/** `70 MiB (private 22) after 12 s; 80 MiB (private 32) after 1 s`: the settled figure first, when read. */
function idleFigures(held: IdleMemory, soon: IdleMemory, startup: McpStartupResult): string {
  const figure = (m: IdleMemory) => `${mib(m.rssBytes)} MiB (private ${mib(m.privateBytes)})`;
  const soonText = `${figure(soon)} after ${seconds(startup.idleAfterMs)}`;
  return startup.settled === undefined
    ? soonText
    : `${figure(held)} after ${seconds(startup.settled.afterMs)}; ${soonText}`;
}

/** Whole seconds as they are, others to a tenth (`--quick`'s 1,500 ms is 1.5 s, not 2). */
function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;
}

/** value / base, two decimals and its `x`; `n/a` where the base is 0 (a floor too short to tick). */
function times(value: number, base: number): string {
  const r = value / base;
  return Number.isFinite(r) ? `${r.toFixed(2)}x` : 'n/a';
}

/** The idle floor beside the daemon's figure: what any Node process that listens as it does holds. */
function floorNote(result: SuiteResult): string {
  const floor = result.idleFloor;
  if (!floor?.ok) return '';
  const held = floor.value.settled ?? floor.value;
  return `; floor ${mib(held.rssBytes)} (private ${mib(held.privateBytes)})`;
}

/** `server; daemon` in MiB, the daemon's left out where the path has none (NaN or undefined). */
function serverAndDaemon(server: number, daemon: number | undefined): string {
  return `${mib(server)}${daemon !== undefined && Number.isFinite(daemon) ? `; ${mib(daemon)}` : ''}`;
}

/** `12%`, `5.4%` (a tenth under 10%, where the quiet line is), or `n/a` where /proc/stat was not read. */
function percent(share: number): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(share < 0.1 ? 1 : 0)}%` : 'n/a';
}

function mib(bytes: number): string {
  return Number.isFinite(bytes) ? (bytes / MIB).toFixed(0) : 'n/a';
}

/**
 * `value (a.bx floor, c.dx peer)`: a figure with its ratios to the floor and the peer of the same
 * row, and to the floor of its own transport where it has one (`e.fx HTTP floor`).
 */
function withRatios(
  row: Partial<Record<McpKey, Outcome<McpRunResult>>>,
  key: McpKey,
  figure: (value: McpRunResult) => number,
  show: (value: number) => string,
): string {
  return cell(row[key], (value) => {
    const own = figure(value);
    const against = (other: McpPath | undefined, name: string) => {
      const base = other === undefined ? undefined : row[other];
      return other === key || !base?.ok ? '' : `${times(own, figure(base.value))} ${name}`;
    };
    const ownFloor = MCP_OWN_FLOOR[splitKey(key).path];
    const ratios = [
      against(MCP_FLOOR, 'floor'),
      against(ownFloor?.path, ownFloor?.name ?? ''),
      against(MCP_PEER, 'peer'),
    ].filter((text) => text !== '');
    return ratios.length === 0 ? show(own) : `${show(own)} (${ratios.join(', ')})`;
  });
}

/** One figure of each process of a run, by role: `worker 0.55, client 2.02, daemon 1.04`. */
function eachProcess(run: McpRunResult, figure: (process: ProcessFigures) => string): string {
  return run.processes.map((p) => `${p.role} ${figure(p)}`).join(', ');
}

/**
 * The MCP-path table: each path (and its --before build) beside the floor and
 * the peer, the p99, CPU and peak RSS with their ratios to both.
 */
export function mcpTable(result: SuiteResult): string {
  const present = new Set<string>([
    ...Object.keys(result.startup),
    ...Object.values(result.mcp).flatMap((shape) => Object.keys(shape)),
  ]);
  const keys = MCP_PATHS.flatMap((path): McpKey[] => [`${path}@before`, path]).filter((key) =>
    present.has(key),
  );
  if (keys.length === 0) return '';
  const header = ['MCP path', ...keys.map(mcpKeyLabel)];
  const lines = [row(header), row(header.map(() => '---'))];
  for (const [key, shape] of Object.entries(result.mcp)) {
    const sample = Object.values(shape).find((outcome) => outcome?.ok);
    const updates = sample?.ok ? sample.value.updates : 0;
    const warmMs = sample?.ok ? sample.value.warmMs : 0;
    const warm = warmMs > 0 ? `, after ${seconds(warmMs)} warm` : '';
    const batched = batchLabel(sample?.ok ? sample.value.batch : 1);
    const runs = sample?.ok && sample.value.perRun.length > 1 ? sample.value.perRun.length : 0;
    const medians = runs > 0 ? `, median of ${runs} runs` : '';
    const label =
      key === 'burst'
        ? `burst of ${rate(updates)}${warm}${medians}`
        : `${rate(updates)} at ${rate(Number(key))}/s${batched}${warm}${medians}`;
    const add = (what: string, cells: (key: McpKey) => string) => {
      lines.push(row([`${label}: ${what}`, ...keys.map(cells)]));
    };
    add('update -> onprogress p50 / p99 / p99.9 (ms)', (k) =>
      cell(
        shape[k],
        (v) => `${ms(v.latency.p50Ms)} / ${ms(v.latency.p99Ms)} / ${ms(v.latency.p999Ms)}`,
      ),
    );
    add('p99 against the floor and the peer', (k) =>
      withRatios(shape, k, (v) => v.latency.p99Ms, ms),
    );
    if (key !== 'burst') {
      const from = sample?.ok ? seconds(sample.value.steadyFromMs) : '';
      add(`p99 from ${from} on (warm-up left out), against the floor and the peer`, (k) =>
        withRatios(shape, k, (v) => v.steadyLatency.p99Ms, ms),
      );
    }
    add('delivered / updates, final value before the result, after the result', (k) =>
      cell(
        shape[k],
        (v) =>
          `${v.measured} / ${v.updates}, ${v.finalArrived ? 'yes' : 'NO'}, ${v.afterResult}${v.outOfOrder ? `, ${v.outOfOrder} out of order` : ''}`,
      ),
    );
    add('last update -> its value at onprogress; -> tool result (ms)', (k) =>
      cell(shape[k], (v) => `${ms(v.finalAfterLastUpdateMs)}; ${ms(v.resultAfterLastUpdateMs)}`),
    );
    add('CPU s of the system processes, against the floor and the peer', (k) =>
      withRatios(
        shape,
        k,
        (v) => v.systemCpuSeconds,
        (value) => value.toFixed(2),
      ),
    );
    add('CPU s of every process (worker and client too)', (k) =>
      cell(shape[k], (v) => v.processes.reduce((sum, p) => sum + p.cpuSeconds, 0).toFixed(2)),
    );
    // Which process of a path the CPU is in (daemon + `mcp`: the daemon's, or `mcp`'s).
    add('CPU s, each process', (k) =>
      cell(shape[k], (v) => eachProcess(v, (p) => p.cpuSeconds.toFixed(2))),
    );
    // The kernel's share: what the transport costs (loopback TCP more than a pipe), apart from
    // the process's own work, which is the rest (user time).
    add('of which in the kernel (system), each process', (k) =>
      cell(shape[k], (v) => eachProcess(v, (p) => p.kernelSeconds.toFixed(2))),
    );
    // Per update: about 1 where each update wakes the process alone; less where --batch lets it read several at once.
    add('read calls per update, each process', (k) =>
      cell(shape[k], (v) => eachProcess(v, (p) => (p.readCalls / v.updates).toFixed(2))),
    );
    add('peak RSS MiB, each process', (k) =>
      cell(shape[k], (v) => eachProcess(v, (p) => mib(p.peakRssBytes))),
    );
    // A path measured while the host took CPU time away (steal) is not comparable with one that was not.
    add('CPU time the host took (steal) over the window', (k) =>
      cell(shape[k], (v) => percent(v.stolenShare)),
    );
  }
  if (Object.keys(result.startup).length > 0) {
    const startupRow = (what: string, show: (value: McpStartupResult) => string) =>
      row([what, ...keys.map((key) => cell(result.startup[key], show))]);
    lines.push(
      startupRow(
        'spawn -> initialize result, median (ms); server CPU by then (ms)',
        (v) => `${median(v.startupMs).toFixed(0)}; ${median(v.startupCpuMs).toFixed(0)}`,
      ),
      startupRow(
        'idle RSS soon after start (MiB): server; separate daemon',
        (v) =>
          `${serverAndDaemon(median(v.idleServerRssBytes), v.idleDaemonRssBytes)} (${seconds(v.idleAfterMs)})`,
      ),
      startupRow(
        'idle private memory soon after start, RssAnon (MiB): server; separate daemon',
        (v) => serverAndDaemon(median(v.idleServerPrivateBytes), v.idleDaemonPrivateBytes),
      ),
      startupRow('idle RSS settled (MiB): server; separate daemon', (v) =>
        v.settled === undefined
          ? 'n/a'
          : `${serverAndDaemon(v.settled.server.rssBytes, v.settled.daemon?.rssBytes)} (${seconds(v.settled.afterMs)})`,
      ),
      startupRow('idle private memory settled, RssAnon (MiB): server; separate daemon', (v) =>
        v.settled === undefined
          ? 'n/a'
          : serverAndDaemon(v.settled.server.privateBytes, v.settled.daemon?.privateBytes),
      ),
    );
  }
  return lines.join('\n');
}

function row(cells: string[]): string {
  return `| ${cells.join(' | ')} |`;
}

export function table(result: SuiteResult): string {
  const systems = result.systems;
  const header = ['workload', ...systems.map((name) => SYSTEM_LABELS[name]), 'bridge / raw'];
  const lines = [row(header), row(header.map(() => '---'))];
  const add = <T>(
    label: string,
    outcomes: Partial<Record<SystemName, Outcome<T>>>,
    show: (value: T) => string,
    compare: ((value: T) => number) | undefined,
  ) => {
    const r =
      compare === undefined
        ? ''
        : (() => {
            const value = ratio(outcomes.bridge, outcomes.raw, compare as (value: never) => number);
            if (!Number.isFinite(value)) return '';
            const perCpu = perCpuRatio(outcomes.bridge, outcomes.raw);
            return Number.isFinite(perCpu)
              ? `${value.toFixed(2)} (${perCpu.toFixed(2)} per CPU-s)`
              : value.toFixed(2);
          })();
    lines.push(row([label, ...systems.map((name) => cell(outcomes[name], show)), r]));
  };
  for (const [publishers, outcomes] of Object.entries(result.ingest)) {
    add(
      `ingest, ${publishers} publisher${publishers === '1' ? '' : 's'} (frames/s)`,
      outcomes,
      (v) =>
        `${rate(v.framesPerSecond)}${cpu(v.serverCpu)}${v.rejected ? ` ${v.rejected} rejected` : ''}`,
      (v) => v.framesPerSecond,
    );
  }
  if (Object.keys(result.e2e).length > 0) {
    const sample = Object.values(result.e2e).find((o) => o?.ok);
    const publishers = sample?.ok ? sample.value.publishers : '?';
    add(
      `end to end, ${publishers} publishers -> 1 session, coalescing off (notifications/s)`,
      result.e2e,
      (v) =>
        `${rate(v.notificationsPerSecond)}${cpu(v.serverCpu)}${v.allDelivered ? '' : ' INCOMPLETE'}`,
      (v) => v.notificationsPerSecond,
    );
  }
  for (const [offered, outcomes] of Object.entries(result.latency)) {
    add(
      `latency at ${rate(Number(offered))} frames/s: p50 / p99 / p99.9 (ms)`,
      outcomes,
      (v) =>
        `${ms(v.p50Ms)} / ${ms(v.p99Ms)} / ${ms(v.p999Ms)}${v.allDelivered ? '' : ' INCOMPLETE'}`,
      undefined,
    );
  }
  if (Object.keys(result.fanout).length > 0) {
    const sample = Object.values(result.fanout).find((o) => o?.ok);
    const sessions = sample?.ok ? sample.value.sessions : '?';
    add(
      `fan-out, 1 stream -> ${sessions} sessions (notifications/s, all sessions)`,
      result.fanout,
      (v) =>
        `${rate(v.notificationsPerSecond)}${cpu(v.serverCpu)}${v.allDelivered ? '' : ' INCOMPLETE'}`,
      (v) => v.notificationsPerSecond,
    );
  }
  if (Object.keys(result.flood).length > 0) {
    add(
      'flood, coalescing 100 ms: notifications/s per subscriber (highest), final value',
      result.flood,
      (v) =>
        `${v.perSubscriberMax.toFixed(1)}/s from ${rate(v.framesPerSecond)} frames/s, final ${v.finalDelivered}/${v.sessions}`,
      undefined,
    );
    add(
      'flood: daemon RSS at 1/4, 1/2, end of the flood; growth over the second half',
      result.flood,
      (v) =>
        `${(v.rssStartBytes / MIB).toFixed(0)} / ${(v.rssMidBytes / MIB).toFixed(0)} / ${(v.rssEndBytes / MIB).toFixed(0)} MiB; ${v.rssBytesPerFrame.toFixed(3)} B/frame`,
      undefined,
    );
  }
  if (Object.keys(result.scale).length > 0) {
    const sample = Object.values(result.scale).find((o) => o?.ok);
    const workers = sample?.ok ? sample.value.workers.count + sample.value.workers.failures : '?';
    const sessions =
      sample?.ok && sample.value.sessions
        ? sample.value.sessions.count + sample.value.sessions.failures
        : '?';
    add(
      'RSS before any connection; the first worker and session added (MiB)',
      result.scale,
      (v) =>
        `${((v.rssBaseBytes - v.rssFirstConnectionsBytes) / MIB).toFixed(0)}; +${(v.rssFirstConnectionsBytes / MIB).toFixed(1)}`,
      undefined,
    );
    add(
      `${workers} idle workers: RSS per connection (KiB)`,
      result.scale,
      (v) =>
        `${(v.rssPerWorkerBytes / KIB).toFixed(1)}${v.workers.failures ? ` ${v.workers.failures} failed` : ''}`,
      (v) => v.rssPerWorkerBytes,
    );
    add(
      `${workers} idle workers: connect time, all (s) / p99 one (ms)`,
      result.scale,
      (v) => `${(v.workers.elapsedMs / 1000).toFixed(2)} / ${ms(v.workers.p99Ms)}`,
      undefined,
    );
    add(
      `${sessions} WebSocket sessions: RSS per session (KiB)`,
      result.scale,
      (v) =>
        v.sessions === undefined
          ? '—'
          : `${(v.rssPerSessionBytes / KIB).toFixed(1)}${v.sessions.failures ? ` ${v.sessions.failures} failed` : ''}`,
      undefined,
    );
    add(
      `${sessions} WebSocket sessions: connect time, all (s) / p99 one (ms)`,
      result.scale,
      (v) =>
        v.sessions === undefined
          ? '—'
          : `${(v.sessions.elapsedMs / 1000).toFixed(2)} / ${ms(v.sessions.p99Ms)}`,
      undefined,
    );
  }
  // Nothing but the header when only the MCP workloads ran.
  return lines.length > 2 ? lines.join('\n') : '';
}

export function targetTable(checks: TargetCheck[]): string {
  const lines = [row(['target', 'measured', 'wanted', '']), row(['---', '---', '---', '---'])];
  for (const check of checks) {
    const verdict = check.met === undefined ? 'n/a' : check.met ? 'met' : 'MISSED';
    lines.push(row([check.name, check.value, check.target, verdict]));
  }
  return lines.join('\n');
}

/**
 * Steal above this share of the machine's CPU time makes a run not a quiet one: on this 2-vCPU VM,
 * idle, it reads 0-2%; under a busy host, 20-28% during the mcp windows, and the same build's
 * p99 went from 2 to 15-20 ms and its CPU moved by a tenth from one run to the next.
 */
export const QUIET_STEAL_SHARE = 0.05;

/**
 * The most the host took in one MCP window: a run is mostly idle waits (start-up's settling), so
 * its share over the run can be 2% while the 1k/s windows lost 11-24%.
 */
function mostStolenInAWindow(result: SuiteResult): number {
  const shares = Object.values(result.mcp)
    .flatMap((shape) => Object.values(shape))
    .flatMap((outcome) => (outcome?.ok ? [outcome.value.stolenShare] : []))
    .filter((share) => Number.isFinite(share));
  return shares.length === 0 ? Number.NaN : Math.max(...shares);
}

export function conditions(result: SuiteResult): string {
  const c = result.conditions;
  const window = mostStolenInAWindow(result);
  const steal = `the host took ${percent(c.stolenShare)} of the machine's CPU time over the run (steal)${Number.isFinite(window) ? `, at most ${percent(window)} in an MCP window` : ''}`;
  const quiet = !(c.stolenShare > QUIET_STEAL_SHARE || window > QUIET_STEAL_SHARE);
  return [
    `${c.date}, Node ${c.node}, ${c.cores} x ${c.cpu}, ${c.memoryGiB} GiB, sizes "${c.sizes}"`,
    `load average before ${c.loadAverageBefore.map((l) => l.toFixed(2)).join(' ')}, after ${c.loadAverageAfter.map((l) => l.toFixed(2)).join(' ')}`,
    quiet
      ? steal
      : `NOT A QUIET RUN: ${steal}, more than ${percent(QUIET_STEAL_SHARE)}: its latency and CPU figures move with the host's load; run again when it is quiet`,
    ...c.skipped,
    'cpu: CPU of the server process over the measured window, as a share of one core. "per CPU-s" divides',
    'each rate by it: on a machine shared with other work, that ratio is the steadier one.',
  ].join('\n');
}
