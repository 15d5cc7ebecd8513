/**
 * The systems under test, each started as its own process: the bridge (the
 * real binary), the raw relay, the node-ipc relay, and NATS (Debian's
 * nats-server) when it is installed.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Child } from './child.ts';
import { FormFeedSplitter } from './frames.ts';
import { natsPorts } from './nats-ports.ts';
import { sleep } from './proc.ts';
import type { SubscriberTarget, WorkerTarget } from './targets.ts';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = join(ROOT, 'bin/mcp-progress');

/**
 * `before` is another build of the bridge (--before DIR), for an A/B of a change in one run;
 * `norate` is this build with its rate/ETA estimator replaced by one that does nothing
 * (noRateBuild), for the cost of rate and ETA per frame.
 */
export type SystemName = 'bridge' | 'before' | 'norate' | 'raw' | 'nodeipc' | 'nats';

export const SYSTEM_LABELS: Record<SystemName, string> = {
  bridge: 'bridge',
  before: 'bridge (before)',
  norate: 'bridge, no rate/ETA',
  raw: 'raw relay',
  nodeipc: 'node-ipc relay',
  nats: 'NATS',
};

export interface StartOptions {
  /** The bridge's default coalescing interval (subscribers also ask explicitly); undefined: its own default. */
  minIntervalMs: number | undefined;
  /** Node flags for the server process, e.g. --cpu-prof. */
  execArgv: string[];
  /** A checkout whose bin/ and dist/ run as the `before` system. */
  beforeRoot?: string | undefined;
}

export interface RunningSystem {
  readonly name: SystemName;
  readonly pid: number;
  readonly workers: WorkerTarget;
  readonly subscribers: SubscriberTarget;
  /** The bridge's runtime directory (daemon.json, the socket); the baselines have none. */
  readonly runtimeDir?: string | undefined;
  /** Frames the server has taken in so far, and when, on the server's own clock. */
  ingested(): Promise<{ frames: number; atMs: number }>;
  stop(): Promise<void>;
}

/** Server processes still running, killed if the harness itself exits early (Ctrl-C, a crash). */
const running = new Set<ChildProcess>();
const scratch = new Set<string>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

export function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

export function natsServerPath(): string | undefined {
  for (const candidate of ['/usr/sbin/nats-server', '/usr/bin/nats-server']) {
    if (existsSync(candidate)) return candidate;
  }
  try {
    return (
      execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

export function startSystem(name: SystemName, options: StartOptions): Promise<RunningSystem> {
  switch (name) {
    case 'bridge':
      return startBridge('bridge', BIN, options);
    case 'before':
      if (options.beforeRoot === undefined) throw new Error('the before system needs --before DIR');
      return startBridge('before', join(options.beforeRoot, 'bin/mcp-progress'), options);
    case 'norate':
      return startBridge('norate', join(noRateBuild(), 'bin/mcp-progress'), options);
    case 'raw':
      return startRelay('raw', 'baselines/raw-relay.ts', options);
    case 'nodeipc':
      return startRelay('nodeipc', 'baselines/node-ipc-relay.ts', options);
    case 'nats':
      return startNats();
  }
}

export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `mcp-progress-bench-${prefix}-`));
  scratch.add(dir);
  return dir;
}

export function removeScratch(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  scratch.delete(dir);
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(timer);
}

/** A server process of the harness, tracked, with the tail of its stderr for error messages. */
export interface ServerProcess {
  readonly child: ChildProcess;
  stderr(): string;
}

export function spawnServer(
  command: string,
  args: readonly string[],
  env?: NodeJS.ProcessEnv,
): ServerProcess {
  const child = track(spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], env }));
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-8000);
  });
  return { child, stderr: () => stderr };
}

/** Polls until `ready` holds; fails, naming `label` with its stderr, if it exits or 20 s pass. */
export function untilReady(
  server: ServerProcess,
  label: string,
  ready: () => boolean | Promise<boolean>,
  everyMs = 20,
): Promise<void> {
  return pollUntil(ready, {
    failed: () =>
      server.child.exitCode === null ? undefined : `${label} exited at start: ${server.stderr()}`,
    timedOut: () => `${label} did not start: ${server.stderr()}`,
    everyMs,
  });
}

/**
 * Polls every `everyMs` until `ready` holds; fails with what `failed` says as soon as it says
 * something, or with `timedOut()` once `timeoutMs` have passed.
 */
export async function pollUntil(
  ready: () => boolean | Promise<boolean>,
  options: {
    timedOut: () => string;
    failed?: () => string | undefined;
    timeoutMs?: number;
    everyMs?: number;
  },
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  while (!(await ready())) {
    const failure = options.failed?.();
    if (failure !== undefined) throw new Error(failure);
    if (Date.now() > deadline) throw new Error(options.timedOut());
    await sleep(options.everyMs ?? 20);
  }
}

/** What a daemon's daemon.json tells the harness. */
export interface DaemonEndpoints {
  socket: string;
  url: string;
  secret: string;
}

/**
 * A bridge daemon (`bin`) on `runtimeDir`, with `args` after the runtime dir and a free
 * port; ready once its daemon.json is written and `ready` (given its stderr) holds too.
 */
export async function startDaemonProcess(
  bin: string,
  options: StartOptions,
  runtimeDir: string,
  args: readonly string[],
  label: string,
  ready: (stderr: string) => boolean = () => true,
): Promise<{ server: ServerProcess; info: DaemonEndpoints }> {
  const server = spawnServer(
    process.execPath,
    [...options.execArgv, bin, 'daemon', '--runtime-dir', runtimeDir, '--port', '0', ...args],
    { ...process.env, MCP_PROGRESS_SOCKET: '' },
  );
  const infoPath = join(runtimeDir, 'daemon.json');
  await untilReady(server, label, () => existsSync(infoPath) && ready(server.stderr()));
  return { server, info: JSON.parse(readFileSync(infoPath, 'utf8')) as DaemonEndpoints };
}

let noRateRoot: string | undefined;

/**
 * A copy of this build (bin/, dist/, package.json; node_modules linked) whose
 * dist/daemon/rate-estimator.js keeps the real module's exports but replaces
 * RateEstimator with one that observes nothing and knows no rate or ETA: the
 * router then does everything else per frame as the product does. Made once
 * per run; the product has no switch for it.
 */
export function noRateBuild(): string {
  if (noRateRoot !== undefined) return noRateRoot;
  const root = scratchDir('norate-build');
  for (const part of ['bin', 'dist', 'package.json']) {
    cpSync(join(ROOT, part), join(root, part), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  const estimator = join(root, 'dist/daemon/rate-estimator.js');
  const real = readFileSync(estimator, 'utf8');
  const shape = ['export class RateEstimator', '    observe(', '    rate(', '    etaMs('];
  const missing = shape.filter((part) => !real.includes(part));
  if (missing.length > 0) {
    throw new Error(
      `bench: dist/daemon/rate-estimator.js no longer has ${missing.map((m) => m.trim()).join(', ')}: update noRateBuild in bench/lib/systems.ts`,
    );
  }
  renameSync(estimator, join(root, 'dist/daemon/rate-estimator.real.js'));
  writeFileSync(
    estimator,
    [
      '// bench (noRateBuild): the real module, but a RateEstimator that does no work.',
      "export * from './rate-estimator.real.js';",
      'export class RateEstimator {',
      '  observe() {}',
      '  rate() { return null; }',
      '  etaMs() { return null; }',
      '}',
      '',
    ].join('\n'),
  );
  noRateRoot = root;
  return root;
}

async function startBridge(
  name: 'bridge' | 'before' | 'norate',
  bin: string,
  options: StartOptions,
): Promise<RunningSystem> {
  const runtimeDir = scratchDir(name);
  const { server, info } = await startDaemonProcess(
    bin,
    options,
    runtimeDir,
    [
      '--log-level',
      'warn',
      ...(options.minIntervalMs === undefined
        ? []
        : ['--min-interval-ms', String(options.minIntervalMs)]),
      // Throughput runs hold a backlog while the subscriber catches up; the publisher's window bounds it.
      '--max-session-buffer-bytes',
      String(1024 * 1024 * 1024),
      '--max-connections',
      '20000',
    ],
    'the bridge',
  );
  const { child } = server;
  return {
    name,
    pid: child.pid ?? -1,
    workers: { kind: 'unix', path: info.socket },
    subscribers: { kind: 'bridge', url: info.url, secret: info.secret },
    runtimeDir,
    async ingested() {
      const status = (await bridgeStatus(info.socket)) as {
        uptimeMs: number;
        counters: { framesAccepted: number };
      };
      return { frames: status.counters.framesAccepted, atMs: status.uptimeMs };
    },
    async stop() {
      await stopProcess(child);
      removeScratch(runtimeDir);
    },
  };
}

/** The daemon's `status` answer, asked over the worker socket. */
function bridgeStatus(socketPath: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path: socketPath });
    socket.setEncoding('utf8');
    const splitter = new FormFeedSplitter();
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no status answer from the bridge within 30 s'));
    }, 30_000);
    socket.once('error', reject);
    socket.on('data', (text: string) =>
      splitter.push(text, (frame) => {
        const envelope = JSON.parse(frame);
        if (envelope.type !== 'status') return;
        clearTimeout(timer);
        socket.destroy();
        resolve(envelope.data);
      }),
    );
    socket.once('connect', () => socket.write('{"type":"status","data":{}}\f'));
  });
}

async function startRelay(
  name: 'raw' | 'nodeipc',
  script: string,
  options: StartOptions,
): Promise<RunningSystem> {
  const dir = scratchDir(name);
  const socketPath = join(dir, 'relay.sock');
  const child = new Child(script, options.execArgv);
  track(child.process);
  child.send({ type: 'start', socketPath });
  const ready = await child.next<{ type: 'ready'; url: string }>('ready', 20_000);
  return {
    name,
    pid: child.pid,
    workers: { kind: 'unix', path: socketPath },
    subscribers: { kind: 'relay', url: ready.url },
    async ingested() {
      child.send({ type: 'stats' });
      const stats = await child.next<{ type: 'stats'; frames: number; atMs: number }>(
        'stats',
        30_000,
      );
      return { frames: stats.frames, atMs: stats.atMs };
    },
    async stop() {
      await stopProcess(child.process);
      removeScratch(dir);
    },
  };
}

async function startNats(): Promise<RunningSystem> {
  const binary = natsServerPath();
  if (binary === undefined) throw new Error('nats-server is not installed');
  const dir = scratchDir('nats');
  const configPath = join(dir, 'nats.conf');
  // Subscribers that fall behind during a throughput run are slowed by the publisher's window, not cut off.
  writeFileSync(
    configPath,
    [
      // Ports of its own choosing, read from its log (nats-ports.ts says why).
      'listen: 127.0.0.1:-1',
      'http: 127.0.0.1:-1',
      'max_connections: 100000',
      'max_pending: 1073741824',
      'write_deadline: "60s"',
      '',
    ].join('\n'),
  );
  mkdirSync(dir, { recursive: true });
  const server = spawnServer(binary, ['-c', configPath]);
  const { child } = server;
  let port = 0;
  let monitorPort = 0;
  const varz = async () => {
    const response = await fetch(`http://127.0.0.1:${monitorPort}/varz`);
    return (await response.json()) as { in_msgs: number; now: string };
  };
  await untilReady(
    server,
    'nats-server',
    () => {
      const { client, monitor } = natsPorts(server.stderr());
      if (client === undefined || monitor === undefined) return false;
      port = client;
      monitorPort = monitor;
      return varz().then(
        () => true,
        () => false,
      );
    },
    50,
  );
  return {
    name: 'nats',
    pid: child.pid ?? -1,
    workers: { kind: 'nats', port },
    subscribers: { kind: 'nats', port },
    async ingested() {
      const figures = await varz();
      return { frames: figures.in_msgs, atMs: Date.parse(figures.now) };
    },
    async stop() {
      await stopProcess(child);
      removeScratch(dir);
    },
  };
}
