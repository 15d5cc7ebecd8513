/**
 * What each default cap costs in daemon memory: fills connections, streams,
 * sessions, claims and finished tasks in a fresh daemon each, and reports the
 * resident and heap bytes per unit after a full GC. A measurement, not a test
 * (nothing is timed or asserted); docs/RELIABILITY.md and `daemon --help` quote it.
 *
 *   npm run build && node test/reliability/memory-caps.ts [--quick] [--only=tasks]
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
const { MAX_MESSAGE_BYTES, MAX_TOKEN_BYTES } = (await import(
  join(ROOT, 'dist/protocol/limits.js')
)) as { MAX_MESSAGE_BYTES: number; MAX_TOKEN_BYTES: number };

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

/** A gateway session (the WebSocket, authenticated), to call task/create on. */
async function gatewaySession(info: { url: string; secret: string }): Promise<WebSocket> {
  const ws = new WebSocket(info.url, 'mcp-progress.v1', {
    headers: { authorization: `Bearer ${info.secret}` },
  });
  await new Promise<void>((ok, fail) => {
    ws.once('open', () => ok());
    ws.once('error', fail);
  });
  return ws;
}

/** Calls `method` once per params over one session, `batch` at a time, and waits for every reply. */
async function callEach(ws: WebSocket, method: string, all: unknown[], batch = 200): Promise<void> {
  let nextId = 0;
  for (let start = 0; start < all.length; start += batch) {
    const ids = new Set<number>();
    for (const params of all.slice(start, start + batch)) {
      ids.add(nextId);
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }));
    }
    await new Promise<void>((ok, fail) => {
      const onMessage = (data: Buffer) => {
        const reply = JSON.parse(data.toString('utf8')) as { id?: number; error?: unknown };
        if (reply.id === undefined || !ids.delete(reply.id)) return;
        if (reply.error !== undefined) fail(new Error(JSON.stringify(reply.error)));
        if (ids.size === 0) {
          ws.off('message', onMessage);
          ok();
        }
      };
      ws.on('message', onMessage);
    });
  }
}

/** Waits until the daemon acked `seq` on this worker connection. */
function acked(socket: Socket, seq: number): Promise<void> {
  const wanted = `"seq":${seq}}`;
  let text = '';
  return new Promise((ok) => {
    const onData = (chunk: Buffer) => {
      text = (text + chunk.toString('utf8')).slice(-256);
      if (!text.includes(wanted)) return;
      socket.off('data', onData);
      ok();
    };
    socket.on('data', onData);
  });
}

/**
 * Finished tasks whose streams' last frames carry `metaBytes` of `_meta`: the tasks are created
 * first (on tokens with no stream yet), then every job publishes one value and ends. Measured
 * in one daemon whose stream table keeps the done streams (an hour) and in one that forgets them
 * at once (--retention-ms 0): there only the tasks hold what they kept.
 */
async function measureTasks(
  n: number,
  metaBytes: number,
  label: string,
  longest = false,
): Promise<Row[]> {
  const rows: Row[] = [];
  for (const retentionMs of [3_600_000, 0]) {
    const daemon = new MeasuredDaemon({ router: { retentionMs } });
    await daemon.started();
    const before = await daemon.measure();
    const ws = await gatewaySession(daemon.info);
    // The longest token and messages a frame may carry (1 KiB, 4 KiB): all a finished task keeps.
    const tokens = Array.from({ length: n }, (_, i) =>
      longest ? `task-${i}-`.padEnd(MAX_TOKEN_BYTES, 't') : `task-${i}`,
    );
    const message = (i: number, what: string) => `${what} ${i} `.padEnd(MAX_MESSAGE_BYTES, 'm');
    await callEach(
      ws,
      'task/create',
      tokens.map((progressToken) => ({ progressToken })),
    );
    const pad = 'x'.repeat(metaBytes);
    const socket = await workerConnection(daemon.info.socket);
    const lastAck = acked(socket, n - 1);
    const frames: string[] = [];
    for (const [i, progressToken] of tokens.entries()) {
      const data: Record<string, unknown> = { v: 1, progressToken, progress: 1, total: 1 };
      if (metaBytes > 0) data._meta = { pad };
      if (longest) data.message = message(i, 'step');
      frames.push(encodeFrame('progress', data));
      const done: Record<string, unknown> = { v: 1, progressToken, status: 'ok', seq: i };
      if (longest) Object.assign(done, { status: 'error', message: message(i, 'failed') });
      frames.push(encodeFrame('done', done));
      if (frames.length >= 500) socket.write(frames.splice(0).join(''));
    }
    socket.write(frames.join(''));
    await lastAck;
    const after = await settle(daemon, (s) =>
      retentionMs === 0 ? s.streams === 0 : s.streams >= n,
    );
    ws.terminate();
    socket.destroy();
    await daemon.stop();
    const held = retentionMs === 0 ? 'stream evicted' : 'stream table holds it too';
    rows.push(row(`${label}: done, ${held}`, n, before, after, 'MAX_LIVE_TASKS', 10_000));
  }
  return rows;
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
// --only=tasks (or another row's first word) measures that kind alone.
const only = process.argv.find((arg) => arg.startsWith('--only='))?.slice('--only='.length);
const wanted = (name: string) => only === undefined || only === name;
const rows = [
  ...(wanted('connections') ? [await measureConnections(10_000 / scale)] : []),
  ...(wanted('streams')
    ? [
        await measureStreams(100_000 / scale, 0, 'stream, small frame (~100 B)'),
        await measureStreams(2_000 / scale, 60_000, 'stream, largest frame (60 KB _meta)'),
      ]
    : []),
  ...(wanted('sessions') ? [await measureSessions(2_000 / scale)] : []),
  ...(wanted('claims') ? [await measureClaims(10_000 / scale)] : []),
  ...(wanted('tasks')
    ? [
        ...(await measureTasks(10_000 / scale, 0, 'task, small frame')),
        ...(await measureTasks(10_000 / scale, 60_000, 'task, largest frame (60 KB _meta)')),
        ...(await measureTasks(
          10_000 / scale,
          0,
          'task, longest token and messages (1 KiB, 4 KiB, 4 KiB)',
          true,
        )),
      ]
    : []),
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
