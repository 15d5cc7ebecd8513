/**
 * The harness's statistics, what every latency figure in the benchmark report rests on, its
 * reading of nats-server's log, and when it takes an idle process's memory as settled.
 */
import { spawn, spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { framesDue } from '../../bench/lib/frames.ts';
import { type McpRunResult, mergeMcpRuns } from '../../bench/lib/mcp-path.ts';
import { natsPorts } from '../../bench/lib/nats-ports.ts';
import {
  sampleMachineCpu,
  sampleProcess,
  secondsBetween,
  stolenShare,
} from '../../bench/lib/proc.ts';
import { conditions, mcpTable, QUIET_STEAL_SHARE, targets } from '../../bench/lib/report.ts';
import {
  hasSettled,
  readSettled,
  SETTLE_DROP_BYTES,
  SETTLE_EVERY_MS,
  type SettleWindow,
} from '../../bench/lib/settle.ts';
import { median, ratioOfMeans, summariseLatencies } from '../../bench/lib/stats.ts';
import { noMeasurements, type SuiteResult } from '../../bench/lib/suite.ts';
import { ROOT } from '../helpers/daemon.js';
import {
  asOtherUserOptions,
  letOthersReachCheckout,
  OTHER_USER,
  otherUser,
} from '../helpers/other-user.js';

describe('bench statistics', () => {
  it('percentiles are the nearest-rank ones of the samples, whatever their order', () => {
    // 1..2000 µs, shuffled: the q-th percentile is the sample of rank ceil(q * n).
    const samples = Array.from({ length: 2000 }, (_, i) => i + 1);
    for (let i = samples.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [samples[i], samples[j]] = [samples[j] ?? 0, samples[i] ?? 0];
    }
    expect(summariseLatencies(Float64Array.from(samples))).toEqual({
      count: 2000,
      p50Ms: 1,
      p99Ms: 1.98,
      p999Ms: 1.998,
      maxMs: 2,
    });
    expect(summariseLatencies(Float64Array.from([5000]))).toMatchObject({ p50Ms: 5, p999Ms: 5 });
    expect(summariseLatencies(new Float64Array(0)).p99Ms).toBeNaN();
  });

  it('the ratio of means over paired rounds, with a 95% interval that resamples whole rounds', () => {
    // Every round 2x: no resample can say otherwise.
    expect(ratioOfMeans([2, 4, 6, 8, 10], [1, 2, 3, 4, 5])).toEqual({ ratio: 2, low: 2, high: 2 });
    // A machine that slows both in one round moves the ratio little: rounds stay paired.
    const steady = ratioOfMeans([1.2, 2.4, 1.2, 1.2, 1.2, 1.2], [1, 2, 1, 1, 1, 1]);
    expect(steady.low).toBeCloseTo(1.2, 10);
    expect(steady.high).toBeCloseTo(1.2, 10);
    // Rounds that disagree: the interval holds the ratio, and is as wide as they disagree.
    const a = [1.26, 1.05, 1.33, 1.22, 1.43, 1.32, 1.1, 1.15];
    const b = [1, 1, 1, 1, 1, 1, 1, 1];
    const noisy = ratioOfMeans(a, b);
    expect(noisy.ratio).toBeCloseTo(1.2325, 10);
    expect(noisy.low).toBeGreaterThan(1.1);
    expect(noisy.low).toBeLessThan(noisy.ratio);
    expect(noisy.high).toBeGreaterThan(noisy.ratio);
    expect(noisy.high).toBeLessThan(1.36);
    // Seeded: the same figures, the same interval.
    expect(ratioOfMeans(a, b)).toEqual(noisy);
    expect(ratioOfMeans([], [])).toMatchObject({ ratio: Number.NaN });
    expect(ratioOfMeans([1, 2], [1])).toMatchObject({ low: Number.NaN });
  });

  it('the median of an even count is the mean of the middle two, and NaN is left out', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([9, Number.NaN, 1, 5])).toBe(5);
    expect(median([])).toBeNaN();
  });
});

describe('framesDue: when a paced connection writes', () => {
  /** For each of `count` connections at `perSecond`, the instants (ms, on a 0.1 ms grid) its frames fall due in the first second. */
  const dueTimes = (perSecond: number, count: number, phases: 'aligned' | 'staggered') =>
    Array.from({ length: count }, (_, index) => {
      const times: number[] = [];
      let sent = 0;
      for (let tenths = 0; tenths < 10_000; tenths++) {
        const due = framesDue(perSecond, tenths / 10_000, index, count, phases);
        for (; sent < due; sent++) times.push(tenths / 10);
      }
      return times;
    });

  it('aligned: every connection has its frame due at the same instant', () => {
    const [first, ...others] = dueTimes(250, 4, 'aligned');
    expect(first?.slice(0, 3)).toEqual([4, 8, 12]);
    for (const times of others) expect(times).toEqual(first);
  });

  it('staggered: four connections at 250/s have theirs due a millisecond apart, each at its rate', () => {
    const all = dueTimes(250, 4, 'staggered');
    // Connection k is k quarters of its 4 ms period ahead of connection 0.
    expect(all.map((times) => times.slice(0, 2))).toEqual([
      [4, 8],
      [3, 7],
      [2, 6],
      [1, 5],
    ]);
    for (const times of all) expect(times.length).toBeGreaterThanOrEqual(249);
    const merged = all.flat().sort((a, b) => a - b);
    expect(new Set(merged).size).toBe(merged.length);
  });
});

describe('natsPorts: the ports a nats-server given -1 chose, from its log', () => {
  // Lines as nats-server 2.9 (Debian's) writes them.
  const log = [
    '[3604] 2026/12/05 08:46:03.559442 [INF] Starting http monitor on 127.0.0.1:38965',
    '[3604] 2026/12/05 08:46:03.560496 [INF] Listening for client connections on 127.0.0.1:33795',
    '[3604] 2026/12/05 08:46:03.560500 [INF] Listening for route connections on 127.0.0.1:6222',
    '[3604] 2026/12/05 08:46:03.560661 [INF] Server is ready',
  ].join('\n');

  it('reads the client and monitor ports, not the route port', () => {
    expect(natsPorts(log)).toEqual({ client: 33795, monitor: 38965 });
  });

  it('has neither before the server logged them', () => {
    expect(natsPorts('[1] [INF] Starting nats-server\n')).toEqual({});
  });
});

describe('mergeMcpRuns: the runs of one MCP path as one result', () => {
  const run = (cpu: number, p99: number, delivered: Partial<McpRunResult> = {}): McpRunResult => ({
    key: 'http',
    ratePerSecond: 1000,
    updates: 100,
    latency: { count: 100, p50Ms: p99 / 4, p99Ms: p99, p999Ms: p99 * 2, maxMs: p99 * 3 },
    steadyLatency: { count: 60, p50Ms: p99 / 8, p99Ms: p99 / 2, p999Ms: p99, maxMs: p99 * 3 },
    steadyFromMs: 4000,
    warmMs: 5000,
    batch: 1,
    warmUpdates: Math.round(cpu * 5000),
    notifications: 100,
    measured: 100,
    finalArrived: true,
    outOfOrder: 0,
    afterResult: 0,
    resultAfterLastUpdateMs: 50 + cpu,
    finalAfterLastUpdateMs: 1,
    startupMs: 200,
    processes: [
      { role: 'worker', cpuSeconds: 0.5, kernelSeconds: 0.2, peakRssBytes: 1, readCalls: 10 },
      {
        role: 'daemon',
        cpuSeconds: cpu,
        kernelSeconds: cpu / 4,
        peakRssBytes: cpu * 100,
        readCalls: cpu * 1000,
      },
    ],
    systemCpuSeconds: cpu,
    perRun: [{ systemCpuSeconds: cpu, p99Ms: p99 }],
    systemPeakRssBytes: cpu * 100,
    stolenShare: cpu / 10,
    errors: [],
    ...delivered,
  });

  /** A run's results with only the MCP workload's, for the report's targets and table. */
  const suite = (result: Pick<SuiteResult, 'mcp'>) =>
    ({ ...noMeasurements(), ...result }) as SuiteResult;

  it('gives each figure its own median: the CPU is not the run of the median p99', () => {
    // The median p99 (2) is the run with the highest CPU (1.3); the median CPU is 1.0.
    const merged = mergeMcpRuns([run(1.3, 2), run(1.0, 1), run(0.9, 3)]);
    expect(merged.systemCpuSeconds).toBe(1.0);
    expect(merged.latency).toEqual({ count: 100, p50Ms: 0.5, p99Ms: 2, p999Ms: 4, maxMs: 9 });
    expect(merged.steadyLatency).toEqual({ count: 60, p50Ms: 0.25, p99Ms: 1, p999Ms: 2, maxMs: 9 });
    expect(merged.steadyFromMs).toBe(4000);
    // Warm-up: the length the runs shared, and the fewest warm-up updates any of them sent.
    expect(merged.warmMs).toBe(5000);
    expect(merged.warmUpdates).toBe(4500);
    expect(merged.processes).toEqual([
      { role: 'worker', cpuSeconds: 0.5, kernelSeconds: 0.2, peakRssBytes: 1, readCalls: 10 },
      { role: 'daemon', cpuSeconds: 1.0, kernelSeconds: 0.25, peakRssBytes: 100, readCalls: 1000 },
    ]);
    expect(merged.systemPeakRssBytes).toBe(100);
    expect(merged.resultAfterLastUpdateMs).toBe(51);
    expect(merged.stolenShare).toBe(0.1);
  });

  it("keeps each run's CPU and p99, in the order the runs ran", () => {
    const merged = mergeMcpRuns([run(1.3, 2), run(1.0, 1), run(0.9, 3)]);
    expect(merged.perRun).toEqual([
      { systemCpuSeconds: 1.3, p99Ms: 2 },
      { systemCpuSeconds: 1.0, p99Ms: 1 },
      { systemCpuSeconds: 0.9, p99Ms: 3 },
    ]);
  });

  it("judges the targets on the medians, and shows each round's ratio to the peer's run beside them", () => {
    const shape = (peer: McpRunResult[], http: McpRunResult[]): Pick<SuiteResult, 'mcp'> => ({
      mcp: {
        '1000': {
          telemetry: { ok: true, value: mergeMcpRuns(peer), runs: [], perCpuRuns: [] },
          http: { ok: true, value: mergeMcpRuns(http), runs: [], perCpuRuns: [] },
        },
      },
    });
    const cpuCheck = (result: Pick<SuiteResult, 'mcp'>) =>
      targets(suite(result)).find((check) => check.name.includes('CPU, /mcp'));
    // Peer 1.0, 0.8, 1.0; /mcp 1.1, 1.0, 1.3: medians 1.0 and 1.1, met; round two's 1.25x shows.
    const peer = [
      run(1.0, 1, { warmMs: 0 }),
      run(0.8, 1, { warmMs: 0 }),
      run(1.0, 1, { warmMs: 0 }),
    ];
    const three = cpuCheck(shape(peer, [run(1.1, 1), run(1.0, 1), run(1.3, 1)]));
    expect(three).toMatchObject({
      value: '1.10 vs 1.00 s (1.10x; median of 3 runs, each: 1.10x, 1.25x, 1.30x)',
      met: true,
    });
    expect(cpuCheck(shape(peer, [run(1.1, 1), run(1.3, 1), run(1.3, 1)]))?.met).toBe(false);
    // The table says its cells are medians.
    const table = mcpTable(suite(shape(peer, [run(1.1, 1), run(1.0, 1), run(1.3, 1)])));
    expect(table).toContain('| 100 at 1k/s, median of 3 runs: CPU s of the system processes');
    // Five rounds or more: the ratio of means over them and its interval follow.
    const five = (cpu: number[]) => cpu.map((seconds) => run(seconds, 1, { warmMs: 0 }));
    expect(cpuCheck(shape(five([1, 1, 1, 1, 1]), five([1.1, 1.2, 1.3, 1.2, 1.2])))?.value).toBe(
      '1.20 vs 1.00 s (1.20x; median of 5 runs, each: 1.10x, 1.20x, 1.30x, 1.20x, 1.20x; over the 5 rounds 1.20x (95% interval 1.14-1.26))',
    );
    // One run: its own ratio, nothing more.
    expect(cpuCheck(shape([run(1.0, 1, { warmMs: 0 })], [run(1.1, 1)]))?.value).toBe(
      '1.10 vs 1.00 s (1.10x)',
    );
  });

  it("judges the bridge's delivery and shows the peer's unjudged: a notification after the result", () => {
    const late = { afterResult: 1, warmMs: 0 };
    const delivery = (path: 'telemetry' | 'http') =>
      targets(
        suite({
          mcp: {
            '1000': { [path]: { ok: true, value: run(1, 1, late), runs: [], perCpuRuns: [] } },
          },
        }),
      ).find((check) => check.name.includes('delivered every value'));
    expect(delivery('http')).toMatchObject({ value: '100 / 100, final yes, 1 after', met: false });
    expect(delivery('telemetry')).toMatchObject({ value: '100 / 100, final yes, 1 after' });
    expect(delivery('telemetry')?.met).toBeUndefined();
  });

  it("keeps the worst run's delivery: a lost update or a late one shows", () => {
    const merged = mergeMcpRuns([
      run(1, 1),
      run(1, 1, { measured: 99, finalArrived: false, errors: ['lost'] }),
      run(1, 1, { afterResult: 2, outOfOrder: 1, errors: ['lost'] }),
    ]);
    expect(merged).toMatchObject({
      measured: 99,
      finalArrived: false,
      afterResult: 2,
      outOfOrder: 1,
      errors: ['lost'],
    });
  });
});

describe('settled idle memory: read once the memory reducer has run, not at a fixed time', () => {
  const MiB = 1024 * 1024;
  const at = (...mib: number[]) => mib.map((m) => ({ privateBytes: m * MiB }));

  it('settled: every process gave back a mebibyte or more since start, and held it for two readings', () => {
    expect(hasSettled(at(32), at(23), at(23))).toBe(true);
    expect(hasSettled(at(32, 13), at(23, 11), at(23.1, 11))).toBe(true);
    // The first reading has nothing to agree with.
    expect(hasSettled(at(32), undefined, at(23))).toBe(false);
    // Not given back yet: start-up's figure, however steady.
    expect(hasSettled(at(32), at(32), at(32))).toBe(false);
    expect(hasSettled(at(32), at(31.5), at(31.5))).toBe(false);
    // Still falling: the reducer is at work.
    expect(hasSettled(at(32), at(27), at(23))).toBe(false);
    // One process of two not settled: the separate daemon is read with its server.
    expect(hasSettled(at(32, 13), at(23, 13), at(23, 13))).toBe(false);
  });

  /**
   * A real Node process holding `holdMiB` of private memory until `releaseMs` (never if -1), read
   * soon after it is ready and then as the harness reads a server's settled memory.
   */
  async function settleOf(holdMiB: number, releaseMs: number, window: SettleWindow) {
    const script = `let memory = Buffer.alloc(${holdMiB} * 1024 * 1024, 1);
      if (${releaseMs} >= 0) setTimeout(() => { memory = undefined; globalThis.gc(); }, ${releaseMs});
      process.stdout.write('ready\\n'); process.stdin.resume();`;
    const child = spawn(process.execPath, ['--expose-gc', '-e', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    try {
      const readyAt = await new Promise<number>((resolve, reject) => {
        child.once('exit', (code) => reject(new Error(`the holder exited (${code})`)));
        child.stdout.once('data', () => resolve(performance.now()));
      });
      const read = () => [sampleProcess(child.pid ?? -1)];
      const first = read();
      const { afterMs, memory } = await readSettled(read, first, readyAt, window);
      const soon = first[0]?.privateBytes ?? Number.NaN;
      return { soon, afterMs, settled: memory[0]?.privateBytes ?? Number.NaN };
    } finally {
      child.kill();
    }
  }

  it('a real process that gives memory back late is read after it did, not before', async () => {
    const { soon, afterMs, settled } = await settleOf(48, 2500, { fromMs: 500, untilMs: 20_000 });
    // A reading at the first time alone (500 ms) would have held the 48 MiB.
    expect(afterMs).toBeGreaterThanOrEqual(2500);
    expect(afterMs).toBeLessThan(20_000);
    expect(settled).toBeLessThan(soon - 40 * MiB);
  });

  it('a real process that keeps its memory is read at the last time, as it is', async () => {
    const { soon, afterMs, settled } = await settleOf(8, -1, { fromMs: 200, untilMs: 2500 });
    // The last reading that leaves a second before 2.5 s, late as a busy machine's timers are.
    expect(afterMs).toBeGreaterThanOrEqual(1500);
    expect(afterMs).toBeLessThan(2500 + SETTLE_EVERY_MS);
    expect(settled).toBeGreaterThan(soon - SETTLE_DROP_BYTES);
  });
});

describe("sampleProcess: a process's CPU, and the kernel's part of it", () => {
  /** Runs `work` until the process's `figure` has grown by `by` seconds (ticks are 10 ms). */
  const until = (figure: 'cpuSeconds' | 'kernelSeconds', by: number, work: () => void) => {
    const from = sampleProcess(process.pid);
    const deadline = performance.now() + 20_000;
    let to = from;
    while (to[figure] - from[figure] < by && performance.now() < deadline) {
      work();
      to = sampleProcess(process.pid);
    }
    return { from, to };
  };

  it('counts system calls as kernel time', () => {
    const { from, to } = until('kernelSeconds', 0.05, () => {
      for (let i = 0; i < 2000; i++) statSync('/');
    });
    expect(secondsBetween(from, to, 'kernelSeconds')).toBeGreaterThanOrEqual(0.05);
    expect(secondsBetween(from, to, 'cpuSeconds')).toBeGreaterThanOrEqual(
      secondsBetween(from, to, 'kernelSeconds'),
    );
  });

  it('counts work in the process itself as CPU, not kernel time', () => {
    let sink = 0;
    const { from, to } = until('cpuSeconds', 0.2, () => {
      for (let i = 0; i < 1e6; i++) sink += Math.sqrt(i);
    });
    expect(sink).toBeGreaterThan(0);
    const cpu = to.cpuSeconds - from.cpuSeconds;
    expect(cpu).toBeGreaterThanOrEqual(0.2);
    // The loop makes no system calls (performance.now() is the vDSO's): nearly all of it is user time.
    expect(to.kernelSeconds - from.kernelSeconds).toBeLessThan(cpu / 2);
  });

  it("differences are whole ticks: the kernel's part is never above the whole, even in the last bit", () => {
    // One tick of system time, none of user time: bare differences of ticks / 100 give
    // 0.009999999999999998 for the whole and 0.01 for the kernel's part.
    const sample = (userTicks: number, systemTicks: number) => ({
      ...sampleProcess(process.pid),
      cpuSeconds: (userTicks + systemTicks) / 100,
      kernelSeconds: systemTicks / 100,
    });
    const from = sample(1, 1);
    const to = sample(1, 2);
    expect(to.kernelSeconds - from.kernelSeconds).toBeGreaterThan(to.cpuSeconds - from.cpuSeconds);
    expect(secondsBetween(from, to, 'cpuSeconds')).toBe(0.01);
    expect(secondsBetween(from, to, 'kernelSeconds')).toBe(0.01);
  });
});

describe('steal: the CPU time the host took, which load average does not show', () => {
  it('is read from this machine: its CPU time grows as a process burns it', () => {
    const from = sampleMachineCpu();
    const until = performance.now() + 60;
    while (performance.now() < until) {
      // Burn: clock ticks are 10 ms, so 60 ms moves the machine's total.
    }
    const to = sampleMachineCpu();
    expect(to.totalTicks).toBeGreaterThan(from.totalTicks);
    expect(Number.isFinite(from.stealTicks)).toBe(true);
    expect(to.stealTicks).toBeGreaterThanOrEqual(from.stealTicks);
    const share = stolenShare(from, to);
    expect(share).toBeGreaterThanOrEqual(0);
    expect(share).toBeLessThanOrEqual(1);
  });

  it('is the stolen ticks over all ticks between two samples, NaN when nothing was read', () => {
    expect(
      stolenShare({ totalTicks: 1000, stealTicks: 10 }, { totalTicks: 1400, stealTicks: 110 }),
    ).toBe(0.25);
    expect(
      stolenShare({ totalTicks: 5, stealTicks: 0 }, { totalTicks: 5, stealTicks: 0 }),
    ).toBeNaN();
    expect(
      stolenShare({ totalTicks: Number.NaN, stealTicks: 0 }, { totalTicks: 9, stealTicks: 0 }),
    ).toBeNaN();
  });

  it('the report says when a run was not a quiet one, and how much the host took', () => {
    const run = (stolen: number, inAWindow?: number) =>
      conditions({
        mcp:
          inAWindow === undefined
            ? {}
            : { '1000': { http: { ok: true, value: { stolenShare: inAWindow } } } },
        conditions: {
          date: '2026-12-06T08:00:00.000Z',
          node: 'v22',
          cpu: 'cpu',
          cores: 2,
          memoryGiB: 24,
          loadAverageBefore: [0.1, 0.2, 0.3],
          loadAverageAfter: [0.4, 0.5, 0.6],
          stolenShare: stolen,
          sizes: 'full',
          repeat: 1,
          skipped: [],
        },
      } as unknown as SuiteResult);
    expect(run(0.22)).toContain(
      "NOT A QUIET RUN: the host took 22% of the machine's CPU time over the run (steal)",
    );
    expect(run(QUIET_STEAL_SHARE)).not.toContain('NOT A QUIET RUN');
    expect(run(0.054)).toContain('NOT A QUIET RUN: the host took 5.4%');
    expect(run(0.01)).toContain(
      "the host took 1.0% of the machine's CPU time over the run (steal)",
    );
    expect(run(Number.NaN)).toContain('the host took n/a');
    // A run mostly idle, one of its MCP windows busy: the window decides.
    expect(run(0.016, 0.24)).toContain(
      "NOT A QUIET RUN: the host took 1.6% of the machine's CPU time over the run (steal), at most 24% in an MCP window",
    );
    expect(run(0.016, 0.02)).not.toContain('NOT A QUIET RUN');
  });
});

describe.skipIf(otherUser.skip)(`sampleProcess as another local user (${OTHER_USER})`, () => {
  it('gives CPU and memory of a process whose read calls it may not see (/proc/<pid>/io)', () => {
    otherUser.require();
    letOthersReachCheckout();
    // Ours, as its owner: every figure.
    expect(sampleProcess(process.pid).readCalls).toBeGreaterThan(0);
    // Ours, seen by another user: /proc/<pid>/stat and status are open to it, io is not.
    const code = `const { sampleProcess } = await import(${JSON.stringify(join(ROOT, 'bench/lib/proc.ts'))});
process.stdout.write(JSON.stringify(sampleProcess(${process.pid})));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      encoding: 'utf8',
      ...asOtherUserOptions(),
    });
    expect(run.status, run.stderr).toBe(0);
    const seen = JSON.parse(run.stdout) as Record<string, number | null>;
    expect(seen.cpuSeconds).toBeGreaterThan(0);
    expect(seen.peakRssBytes).toBeGreaterThan(0);
    expect(seen.readCalls).toBeNull(); // NaN, as JSON
  });
});
