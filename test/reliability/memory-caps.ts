/**
 * What each default cap costs in daemon memory: fills connections, streams,
 * sessions and claims in a fresh daemon each, and reports the resident and
 * heap bytes per unit after a full GC. A measurement, not a test (nothing is
 * timed or asserted); docs/RELIABILITY.md and `daemon --help` quote it.
 *
 *   npm run build && node test/reliability/memory-caps.ts [--quick]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import type { RouterOptions } from '../../src/daemon/router.js';

const ROOT = resolve(import.meta.dirname, '../..');
const quick = process.argv.includes('--quick');
// The built daemon's own modules (src/ imports with .js, which plain node cannot run from src/).
const { DEFAULT_ROUTER_OPTIONS } = (await import(join(ROOT, 'dist/daemon/router.js'))) as {
  DEFAULT_ROUTER_OPTIONS: RouterOptions;
};
const { encodeFrame } = (await import(join(ROOT, 'dist/protocol/wire.js'))) as {
  encodeFrame: (type: string, data: unknown) => string;
};

interface Sample {
  rss: number;
  heapUsed: number;
  sessions: number;
  connections: number;
  streams: number;
  claims: number;
}

/** A daemon in a child process that answers "measure" on stdin with its memory after a full GC. */
class MeasuredDaemon {
  readonly child: ChildProcess;
  readonly dir = mkdtempSync(join(tmpdir(), 'mcp-progress-memory-'));
  readonly #lines: AsyncIterator<string>;
  info: { socket: string; url: string; secret: string } = { socket: '', url: '', secret: '' };

  constructor(options: Record<string, unknown>) {
    const script = `
      const { Daemon } = await import(${JSON.stringify(join(ROOT, 'dist/index.js'))});
      const { silentLogger } = await import(${JSON.stringify(join(ROOT, 'dist/shared/log.js'))});
      const daemon = await Daemon.start(${JSON.stringify({ ...options, runtimeDir: this.dir, port: 0 })}, silentLogger);
      console.log(JSON.stringify(daemon.info));
      const { createInterface } = await import('node:readline');
      for await (const line of createInterface({ input: process.stdin })) {
        if (line === 'stop') { await daemon.stop(); process.exit(0); }
        globalThis.gc(); globalThis.gc();
        const s = daemon.status();
        const m = process.memoryUsage();
        console.log(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, sessions: s.sessions,
          connections: s.connections, streams: s.streams.active + s.streams.done, claims: s.claims }));
      }`;
    this.child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    this.#lines = createInterface({ input: this.child.stdout as NodeJS.ReadableStream })[
      Symbol.asyncIterator
    ]();
  }

  async started(): Promise<void> {
    this.info = JSON.parse((await this.#lines.next()).value as string);
  }

  async measure(): Promise<Sample> {
    this.child.stdin?.write('measure\n');
    return JSON.parse((await this.#lines.next()).value as string) as Sample;
  }

  async stop(): Promise<void> {
    this.child.stdin?.write('stop\n');
    await new Promise((r) => this.child.once('exit', r));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A worker connection; EAGAIN (the accept backlog is full for a moment) is tried again. */
async function workerConnection(path: string): Promise<Socket> {
  for (;;) {
    try {
      return await new Promise<Socket>((resolveSocket, reject) => {
        const socket = connect({ path }, () => resolveSocket(socket));
        socket.once('error', reject);
        socket.resume();
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Waits until the daemon's figures satisfy `ready`. */
async function settle(daemon: MeasuredDaemon, ready: (s: Sample) => boolean): Promise<Sample> {
  for (;;) {
    const sample = await daemon.measure();
    if (ready(sample)) return sample;
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Row {
  what: string;
  units: number;
  perUnitRss: number;
  perUnitHeap: number;
  cap: string;
  capUnits: number;
}

async function measureConnections(n: number): Promise<Row> {
  const daemon = new MeasuredDaemon({ maxConnections: n + 10 });
  await daemon.started();
  const before = await daemon.measure();
  const sockets: Socket[] = [];
  for (let i = 0; i < n; i++) sockets.push(await workerConnection(daemon.info.socket));
  const after = await settle(daemon, (s) => s.connections >= n);
  for (const socket of sockets) socket.destroy();
  await daemon.stop();
  return row('idle worker connection', n, before, after, '--max-connections', 10_000);
}

async function measureStreams(n: number, metaBytes: number, label: string): Promise<Row> {
  const perConnection = DEFAULT_ROUTER_OPTIONS.maxStreamsPerConnection;
  const daemon = new MeasuredDaemon({ router: { maxStreams: n + 10 } });
  await daemon.started();
  const before = await daemon.measure();
  const pad = 'x'.repeat(metaBytes);
  const sockets: Socket[] = [];
  for (let start = 0; start < n; start += perConnection) {
    const socket = await workerConnection(daemon.info.socket);
    sockets.push(socket);
    const frames: string[] = [];
    for (let i = start; i < Math.min(n, start + perConnection); i++) {
      const data: Record<string, unknown> = {
        v: 1,
        progressToken: `stream-${i}`,
        progress: 1,
        total: 100,
        message: 'step 1 of 100',
      };
      if (metaBytes > 0) data._meta = { pad };
      frames.push(encodeFrame('progress', data));
      if (frames.length >= 500) socket.write(frames.splice(0).join(''));
    }
    socket.write(frames.join(''));
  }
  const after = await settle(daemon, (s) => s.streams >= n);
  for (const socket of sockets) socket.destroy();
  await daemon.stop();
  return row(label, n, before, after, '--max-streams', DEFAULT_ROUTER_OPTIONS.maxStreams);
}

async function measureClaims(n: number): Promise<Row> {
  const daemon = new MeasuredDaemon({});
  await daemon.started();
  const before = await daemon.measure();
  const socket = await workerConnection(daemon.info.socket);
  const frames: string[] = [];
  for (let i = 0; i < n; i++) frames.push(encodeFrame('claim', { v: 1, progressToken: `c-${i}` }));
  socket.write(frames.join(''));
  const after = await settle(daemon, (s) => s.claims >= n);
  socket.destroy();
  await daemon.stop();
  return row('claim', n, before, after, '--max-claims', DEFAULT_ROUTER_OPTIONS.maxClaims);
}

async function measureSessions(n: number): Promise<Row> {
  const daemon = new MeasuredDaemon({ maxSessions: n + 10 });
  await daemon.started();
  const before = await daemon.measure();
  const clients: WebSocket[] = [];
  for (let i = 0; i < n; i++) {
    const ws = new WebSocket(daemon.info.url, 'mcp-progress.v1', {
      headers: { authorization: `Bearer ${daemon.info.secret}` },
    });
    await new Promise<void>((ok, fail) => {
      ws.once('open', () => ok());
      ws.once('error', fail);
    });
    ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'progress/subscribe',
        params: { progressToken: `s-${i}` },
      }),
    );
    clients.push(ws);
  }
  const after = await settle(daemon, (s) => s.sessions >= n);
  for (const ws of clients) ws.terminate();
  await daemon.stop();
  return row('WebSocket session with one subscription', n, before, after, '--max-sessions', 10_000);
}

function row(
  what: string,
  units: number,
  before: Sample,
  after: Sample,
  cap: string,
  capUnits: number,
): Row {
  return {
    what,
    units,
    perUnitRss: (after.rss - before.rss) / units,
    perUnitHeap: (after.heapUsed - before.heapUsed) / units,
    cap,
    capUnits,
  };
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

const scale = quick ? 10 : 1;
const rows = [
  await measureConnections(10_000 / scale),
  await measureStreams(100_000 / scale, 0, 'stream, small frame (~100 B)'),
  await measureStreams(2_000 / scale, 60_000, 'stream, largest frame (60 KB _meta)'),
  await measureSessions(2_000 / scale),
  await measureClaims(10_000 / scale),
];
console.log(
  '| what | measured at | RSS per unit | heap per unit | default cap | at the cap (heap) |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  console.log(
    `| ${r.what} | ${r.units} | ${(r.perUnitRss / 1024).toFixed(2)} KiB | ${(r.perUnitHeap / 1024).toFixed(2)} KiB | ${r.cap} = ${r.capUnits} | ${mib(r.perUnitHeap * r.capUnits)} |`,
  );
}
