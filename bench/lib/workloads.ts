/**
 * The five workloads of the suite. Each one starts a fresh server process for
 * the system under test, drives it from load-generator processes, checks the
 * deliveries for correctness, and returns figures (never asserts speed).
 */
import { Child } from './child.ts';
import { nowUs } from './frames.ts';
import { cpuShare, sampleProcess, sleep } from './proc.ts';
import type { SettleWindow } from './settle.ts';
import { slope } from './stats.ts';
import { type RunningSystem, type StartOptions, type SystemName, startSystem } from './systems.ts';
import type {
  ConnectResult,
  PublisherConfig,
  PublisherDone,
  SubscriberConfig,
  SubscriberResult,
} from './targets.ts';

export interface Sizes {
  warmupMs: number;
  measureMs: number;
  /**
   * The backplane workload's settling time at its rate before it measures: long enough for V8
   * to finish optimising the hot path of the four Node processes on it (about 6 s at 1k/s on
   * 2 cores), whose compiles are the first seconds' tail. Those seconds are reported apart.
   */
  backplaneSettleMs: number;
  ingestPublishers: number[];
  e2ePublishers: number;
  latencyRates: number[];
  fanoutSubscribers: number;
  floodSubscribers: number;
  floodMs: number;
  floodIntervalMs: number;
  scaleWorkers: number;
  scaleSessions: number;
  framesPerChunk: number;
  /** Frames a throughput publisher may be ahead of its slowest subscriber. */
  e2eWindow: number;
  fanoutWindow: number;
  /** MCP path: offered rates, how long each runs, the burst, and how long a run may take. */
  mcpRates: number[];
  mcpDurationMs: number;
  /** Updates in the burst; 0 skips it. */
  mcpBurst: number;
  mcpTimeoutMs: number;
  /** The mcp workload's p99 is also given without the updates of the first this many ms (warm-up). */
  mcpSteadyFromMs: number;
  /**
   * Runs of the shape the MCP targets judge (MCP_TARGET_SHAPE) when --repeat is not given, every
   * path's runs interleaved, each figure the median: one 10-s window's CPU moves by a fifth from
   * run to run on a shared 2-core machine with the same code, and a target met or missed by one
   * such window says little. Five, not three: the median of five moves less, and from five on
   * each target's line gives its interval (report.ts), which showed three rounds' verdict on
   * `/mcp` and daemon + `mcp` falling either side of their lines from run to run.
   */
  mcpTargetRuns: number;
  /**
   * Spawns of each MCP server for start-up and idle memory; the pause before sampling memory; and
   * when the last spawn's memory is read again, settled: from, and at the latest (after V8's
   * memory reducer: settle.ts).
   */
  startupSpawns: number;
  startupSettleMs: number;
  startupSettled: SettleWindow;
}

const FULL: Sizes = {
  warmupMs: 1500,
  measureMs: 4000,
  backplaneSettleMs: 10_000,
  ingestPublishers: [1, 4, 64],
  e2ePublishers: 4,
  latencyRates: [1000, 10_000, 50_000],
  fanoutSubscribers: 100,
  floodSubscribers: 10,
  floodMs: 10_000,
  floodIntervalMs: 100,
  scaleWorkers: 10_000,
  scaleSessions: 1000,
  framesPerChunk: 256,
  e2eWindow: 262_144,
  fanoutWindow: 2048,
  mcpRates: [1000, 10_000],
  mcpDurationMs: 10_000,
  mcpBurst: 100_000,
  mcpTimeoutMs: 300_000,
  mcpSteadyFromMs: 4000,
  mcpTargetRuns: 5,
  startupSpawns: 5,
  startupSettleMs: 1000,
  startupSettled: { fromMs: 12_000, untilMs: 30_000 },
};

/** The other sizes are the full one with shorter windows or smaller counts. */
export const SIZES: Record<'full' | 'quick' | 'profile' | 'smoke', Sizes> = {
  full: FULL,
  quick: {
    ...FULL,
    warmupMs: 700,
    measureMs: 1500,
    floodMs: 3000,
    mcpDurationMs: 3000,
    mcpSteadyFromMs: 1500,
    mcpTargetRuns: 1,
    startupSpawns: 3,
  },
  profile: {
    ...FULL,
    warmupMs: 1000,
    measureMs: 5000,
    ingestPublishers: [1],
    latencyRates: [10_000],
    floodMs: 5000,
    mcpRates: [1000],
    mcpBurst: 0,
    mcpTargetRuns: 1,
    startupSpawns: 1,
  },
  smoke: {
    ...FULL,
    warmupMs: 100,
    measureMs: 300,
    backplaneSettleMs: 200,
    ingestPublishers: [1, 4],
    e2ePublishers: 2,
    latencyRates: [500],
    fanoutSubscribers: 3,
    floodSubscribers: 3,
    floodMs: 500,
    scaleWorkers: 20,
    scaleSessions: 5,
    framesPerChunk: 32,
    mcpRates: [1000],
    mcpDurationMs: 200,
    mcpBurst: 300,
    mcpTimeoutMs: 60_000,
    mcpSteadyFromMs: 100,
    // Two, so that a smoke run of the binary goes through the repeat and the medians too.
    mcpTargetRuns: 2,
    startupSpawns: 1,
    startupSettleMs: 100,
    startupSettled: { fromMs: 300, untilMs: 300 },
  },
};

/** CPU of the load generators over the measured window, as a share of one core. */
export interface LoadCpu {
  publisher: number;
  subscriber?: number;
}

export interface IngestResult {
  publishers: number;
  framesPerSecond: number;
  serverCpu: number;
  loadCpu: LoadCpu;
  sent: number;
  rejected: number;
  errors: string[];
}

export interface ThroughputResult {
  publishers: number;
  sessions: number;
  /** Frames per second reaching the slowest session. */
  framesPerSecond: number;
  /** Notifications per second delivered over all sessions. */
  notificationsPerSecond: number;
  serverCpu: number;
  loadCpu: LoadCpu;
  sent: number;
  /** Every session got every frame, the last one with the final value, in order. */
  allDelivered: boolean;
  errors: string[];
}

export interface LatencyResult {
  offeredPerSecond: number;
  /** Frames the publisher sent, warm-up included, and the frames the session received. */
  sent: number;
  delivered: number;
  /** Latency samples: the frames received after the warm-up. */
  count: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  serverCpu: number;
  loadCpu: LoadCpu;
  allDelivered: boolean;
  errors: string[];
}

export interface FloodResult {
  sessions: number;
  framesSent: number;
  framesPerSecond: number;
  /** Notifications per second each subscriber received (count - 1 over first to last): highest, mean. */
  perSubscriberMax: number;
  perSubscriberMean: number;
  perSubscriberCounts: number[];
  finalDelivered: number;
  outOfOrder: number;
  rssStartBytes: number;
  rssMidBytes: number;
  rssEndBytes: number;
  rssMaxBytes: number;
  /** Growth of resident memory per accepted frame over the second half (least squares). */
  rssBytesPerFrame: number;
  errors: string[];
}

export interface ScaleResult {
  workers: ConnectResult;
  rssPerWorkerBytes: number;
  sessions: ConnectResult | undefined;
  rssPerSessionBytes: number;
  rssBaseBytes: number;
  /** What the first worker connection and session cost together, module loads included. */
  rssFirstConnectionsBytes: number;
}

function tokens(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(i + 1).padStart(4, '0')}`);
}

async function withSystem<T>(
  name: SystemName,
  options: StartOptions,
  body: (system: RunningSystem) => Promise<T>,
): Promise<T> {
  const system = await startSystem(name, options);
  try {
    return await body(system);
  } finally {
    await system.stop();
  }
}

async function publisher(config: PublisherConfig): Promise<Child> {
  const child = new Child('load/publisher.ts');
  child.send({ type: 'config', config });
  await child.ready();
  return child;
}

async function subscriber(config: SubscriberConfig): Promise<Child> {
  const child = new Child('load/subscriber.ts');
  child.send({ type: 'config', config });
  await child.ready();
  return child;
}

/** Ingest: publishers write as fast as the socket accepts; frames/s the server took in. */
export function runIngest(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
  publishers: number,
): Promise<IngestResult> {
  return withSystem(name, options, async (system) => {
    const pub = await publisher({
      target: system.workers,
      tokens: tokens('ingest', publishers),
      mode: 'flood',
      durationMs: 600_000,
      framesPerChunk: sizes.framesPerChunk,
    });
    try {
      const done = pub.next<PublisherDone>('done', 720_000);
      pub.send({ type: 'go' });
      await sleep(sizes.warmupMs);
      // A busy server may take a while to answer; its own clock times the window, and the
      // publishers keep writing until both counts are in.
      const from = await system.ingested();
      const cpuFrom = sampleProcess(system.pid);
      const pubFrom = sampleProcess(pub.pid);
      await sleep(sizes.measureMs);
      const to = await system.ingested();
      const cpuTo = sampleProcess(system.pid);
      const pubTo = sampleProcess(pub.pid);
      pub.send({ type: 'stop' });
      const result = await done;
      return {
        publishers,
        framesPerSecond: (to.frames - from.frames) / ((to.atMs - from.atMs) / 1000),
        serverCpu: cpuShare(cpuFrom, cpuTo),
        loadCpu: { publisher: cpuShare(pubFrom, pubTo) },
        sent: result.sent,
        rejected: result.rejected,
        errors: result.errors,
      };
    } finally {
      await pub.stop();
    }
  });
}

/** End to end and fan-out: publishers a window ahead of the slowest session, coalescing off. */
export function runThroughput(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
  shape: { publishers: number; sessions: number; window: number; prefix: string },
): Promise<ThroughputResult> {
  return withSystem(name, options, async (system) => {
    const streamTokens = tokens(shape.prefix, shape.publishers);
    const sub = await subscriber({
      target: system.subscribers,
      sessions: shape.sessions,
      tokens: streamTokens,
      minIntervalMs: 0,
      mode: 'count',
      reportEveryMs: 5,
    });
    const pub = await publisher({
      target: system.workers,
      tokens: streamTokens,
      mode: 'window',
      window: shape.window,
      durationMs: sizes.warmupMs + sizes.measureMs,
      framesPerChunk: sizes.framesPerChunk,
    });
    try {
      const reports: Array<[number, number]> = [];
      sub.on('report', (message) => {
        const least = message.least as number;
        reports.push([message.atMs as number, least]);
        pub.send({ type: 'credit', delivered: least });
      });
      const done = pub.next<PublisherDone>('done', 120_000);
      const goMs = nowUs() / 1000;
      pub.send({ type: 'go' });
      await sleep(sizes.warmupMs);
      const cpuFrom = [system.pid, pub.pid, sub.pid].map(sampleProcess);
      await sleep(sizes.measureMs);
      const cpuTo = [system.pid, pub.pid, sub.pid].map(sampleProcess);
      const [serverCpu, publisherCpu, subscriberCpu] = cpuFrom.map((from, i) =>
        cpuShare(from, cpuTo[i] ?? from),
      );
      const sent = await done;
      const from = reports.find(([at]) => at >= goMs + sizes.warmupMs);
      const to = reports.findLast(([at]) => at <= goMs + sizes.warmupMs + sizes.measureMs);
      const framesPerSecond =
        from !== undefined && to !== undefined && to[0] > from[0]
          ? (to[1] - from[1]) / ((to[0] - from[0]) / 1000)
          : Number.NaN;
      sub.send({
        type: 'expect',
        count: sent.sent,
        final: sent.lastProgress,
        timeoutMs: 60_000,
      });
      const result = await sub.next<SubscriberResult>('result', 90_000);
      return {
        publishers: shape.publishers,
        sessions: shape.sessions,
        framesPerSecond,
        notificationsPerSecond: framesPerSecond * shape.sessions,
        serverCpu: serverCpu ?? Number.NaN,
        loadCpu: { publisher: publisherCpu ?? Number.NaN, subscriber: subscriberCpu ?? Number.NaN },
        sent: sent.sent,
        allDelivered:
          result.complete && sent.rejected === 0 && everyFrameArrived(result, sent, true),
        errors: [...sent.errors, ...result.errors],
      };
    } finally {
      await pub.stop();
      await sub.stop();
    }
  });
}

/**
 * Exactly `sent` messages per session, in order, and the last one is the final
 * value of its token (count mode parses only the last message; parse mode
 * checks every token).
 */
function everyFrameArrived(result: SubscriberResult, sent: PublisherDone, exact: boolean): boolean {
  return result.sessions.every((session) => {
    if (exact && session.count !== sent.sent) return false;
    if (session.outOfOrder !== 0) return false;
    const seen = Object.entries(session.lastProgress);
    if (seen.length === 0) return false;
    return seen.every(([token, progress]) => sent.lastProgress[token] === progress);
  });
}

/** End-to-end latency at a fixed offered load, stamped on the host's monotonic clock. */
export function runLatency(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
  ratePerSecond: number,
): Promise<LatencyResult> {
  return withSystem(name, options, async (system) => {
    const streamTokens = tokens('lat', sizes.e2ePublishers);
    const sub = await subscriber({
      target: system.subscribers,
      sessions: 1,
      tokens: streamTokens,
      minIntervalMs: 0,
      mode: 'parse',
      reportEveryMs: 100,
    });
    const pub = await publisher({
      target: system.workers,
      tokens: streamTokens,
      mode: 'paced',
      ratePerSecond,
      durationMs: sizes.warmupMs + sizes.measureMs,
      framesPerChunk: sizes.framesPerChunk,
    });
    try {
      const done = pub.next<PublisherDone>('done', 120_000);
      sub.send({ type: 'record-from', fromUs: nowUs() + sizes.warmupMs * 1000 });
      pub.send({ type: 'go' });
      await sleep(sizes.warmupMs);
      const cpuFrom = [system.pid, pub.pid, sub.pid].map(sampleProcess);
      await sleep(sizes.measureMs);
      const cpuTo = [system.pid, pub.pid, sub.pid].map(sampleProcess);
      const [serverCpu, publisherCpu, subscriberCpu] = cpuFrom.map((from, i) =>
        cpuShare(from, cpuTo[i] ?? from),
      );
      const sent = await done;
      sub.send({ type: 'expect', count: sent.sent, final: sent.lastProgress, timeoutMs: 60_000 });
      const result = await sub.next<SubscriberResult>('result', 90_000);
      const latency = result.latency ?? {
        count: 0,
        p50Ms: Number.NaN,
        p99Ms: Number.NaN,
        p999Ms: Number.NaN,
        maxMs: Number.NaN,
      };
      return {
        offeredPerSecond: ratePerSecond,
        sent: sent.sent,
        delivered: result.sessions.reduce((sum, session) => sum + session.count, 0),
        ...latency,
        serverCpu: serverCpu ?? Number.NaN,
        loadCpu: { publisher: publisherCpu ?? Number.NaN, subscriber: subscriberCpu ?? Number.NaN },
        allDelivered:
          result.complete && sent.rejected === 0 && everyFrameArrived(result, sent, true),
        errors: [...sent.errors, ...result.errors],
      };
    } finally {
      await pub.stop();
      await sub.stop();
    }
  });
}

/** Flood with coalescing on: one worker at full speed, several subscribers, memory sampled throughout. */
export function runFlood(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
): Promise<FloodResult> {
  return withSystem(name, { ...options, minIntervalMs: sizes.floodIntervalMs }, async (system) => {
    const streamTokens = ['flood'];
    const sub = await subscriber({
      target: system.subscribers,
      sessions: sizes.floodSubscribers,
      tokens: streamTokens,
      minIntervalMs: sizes.floodIntervalMs,
      mode: 'parse',
      reportEveryMs: 100,
    });
    const pub = await publisher({
      target: system.workers,
      tokens: streamTokens,
      mode: 'flood',
      durationMs: sizes.floodMs,
      framesPerChunk: sizes.framesPerChunk,
    });
    try {
      const done = pub.next<PublisherDone>('done', 120_000);
      let running = true;
      void done.finally(() => {
        running = false;
      });
      pub.send({ type: 'go' });
      const samples: Array<{ frames: number; rss: number }> = [];
      const samplesDone = (async () => {
        while (running) {
          const { frames } = await system.ingested();
          samples.push({ frames, rss: sampleProcess(system.pid).rssBytes });
          await sleep(Math.max(50, sizes.floodMs / 40));
        }
      })();
      const sent = await done;
      await samplesDone;
      sub.send({ type: 'expect', final: sent.lastProgress, timeoutMs: 10_000 });
      const result = await sub.next<SubscriberResult>('result', 30_000);
      // Spacing of what each subscriber received: the coalescing interval bounds it.
      const rates = result.sessions.map((session) =>
        session.count < 2
          ? Number.NaN
          : (session.count - 1) / ((session.lastAtMs - session.firstAtMs) / 1000),
      );
      // The heap grows to its working size first; a leak would go on growing, so memory
      // is judged over the second half of the flood.
      const warm = samples.slice(Math.floor(samples.length / 4));
      const late = samples.slice(Math.floor(samples.length / 2));
      const rssOf = (index: number) => warm[index]?.rss ?? Number.NaN;
      return {
        sessions: sizes.floodSubscribers,
        framesSent: sent.sent,
        framesPerSecond: sent.sent / (sizes.floodMs / 1000),
        perSubscriberMax: Math.max(...rates),
        perSubscriberMean: rates.reduce((a, b) => a + b, 0) / Math.max(1, rates.length),
        perSubscriberCounts: result.sessions.map((session) => session.count),
        finalDelivered: result.sessions.filter((session) =>
          streamTokens.every((token) => session.lastProgress[token] === sent.lastProgress[token]),
        ).length,
        outOfOrder: result.sessions.reduce((sum, session) => sum + session.outOfOrder, 0),
        rssStartBytes: rssOf(0),
        rssMidBytes: late[0]?.rss ?? Number.NaN,
        rssEndBytes: rssOf(warm.length - 1),
        rssMaxBytes: Math.max(...samples.map((sample) => sample.rss)),
        rssBytesPerFrame: slope(late.map((sample) => [sample.frames, sample.rss] as const)),
        errors: [...sent.errors, ...result.errors],
      };
    } finally {
      await pub.stop();
      await sub.stop();
    }
  });
}

/** Scale: idle worker connections, then idle WebSocket sessions; resident memory per connection. */
export function runScale(
  name: SystemName,
  options: StartOptions,
  sizes: Sizes,
): Promise<ScaleResult> {
  return withSystem(name, options, async (system) => {
    const connector = new Child('load/connector.ts');
    try {
      connector.send({
        type: 'config',
        config: {
          workers: { target: system.workers, count: sizes.scaleWorkers, concurrency: 128 },
          sessions:
            system.subscribers.kind === 'nats'
              ? undefined
              : { target: system.subscribers, count: sizes.scaleSessions, concurrency: 32 },
        },
      });
      await connector.next('ready', 30_000);
      await sleep(500);
      const cold = sampleProcess(system.pid).rssBytes;
      connector.send({ type: 'first' });
      const first = await connector.next<{ type: string; error?: string }>('first-open', 30_000);
      if (first.error !== undefined) throw new Error(`the first connections: ${first.error}`);
      await sleep(500);
      const base = sampleProcess(system.pid).rssBytes;
      connector.send({ type: 'workers' });
      const workers = await connector.next<ConnectResult>('connected', 300_000);
      await sleep(1000);
      const withWorkers = sampleProcess(system.pid).rssBytes;
      let sessions: ConnectResult | undefined;
      let withSessions = withWorkers;
      if (system.subscribers.kind !== 'nats') {
        connector.send({ type: 'sessions' });
        sessions = await connector.next<ConnectResult>('connected', 300_000);
        await sleep(1000);
        withSessions = sampleProcess(system.pid).rssBytes;
      }
      return {
        workers,
        rssPerWorkerBytes: (withWorkers - base) / Math.max(1, workers.count),
        sessions,
        rssPerSessionBytes:
          sessions === undefined
            ? Number.NaN
            : (withSessions - withWorkers) / Math.max(1, sessions.count),
        rssBaseBytes: base,
        rssFirstConnectionsBytes: base - cold,
      };
    } finally {
      await connector.stop();
    }
  });
}
