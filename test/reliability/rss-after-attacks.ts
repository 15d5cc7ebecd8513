/**
 * Does the daemon's memory come back after an attack? Runs the inputs of
 * hostile-input.test.ts and the slow consumer of faults.test.ts against one
 * daemon (the real binary), then lets every stream end and be evicted, and
 * follows the daemon's resident memory (VmRSS) for a while. A measurement,
 * not a test (nothing is asserted or timed); docs/RELIABILITY.md quotes it.
 *
 *   npm run build && node test/reliability/rss-after-attacks.ts [--settle-s 30]
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';

const ROOT = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({ options: { 'settle-s': { type: 'string', default: '30' } } });
const settleS = Number(values['settle-s']);
const { encodeFrame } = (await import(join(ROOT, 'dist/protocol/wire.js'))) as {
  encodeFrame: (type: string, data: unknown) => string;
};

const dir = mkdtempSync(join(tmpdir(), 'mcp-progress-rss-'));
// The caps and timeouts of the tests, and short grace and retention so that every stream ends.
const daemon = spawn(
  process.execPath,
  [
    join(ROOT, 'bin/mcp-progress'),
    'daemon',
    '--runtime-dir',
    dir,
    '--port',
    '0',
    '--log-level',
    'error',
    '--frame-timeout-ms',
    '300',
    '--max-streams-per-connection',
    '1000',
    '--max-session-buffer-bytes',
    String(1024 * 1024),
    '--abandon-grace-ms',
    '300',
    '--retention-ms',
    '1000',
  ],
  { stdio: 'ignore' },
);
while (!existsSync(join(dir, 'daemon.json'))) await sleep(20);
const info = JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')) as {
  socket: string;
  url: string;
  secret: string;
};
const pid = daemon.pid as number;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function rssMiB(): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(line?.[1] ?? 0) / 1024;
}

let peak = 0;
const sampler = setInterval(() => {
  peak = Math.max(peak, rssMiB());
}, 50);

interface Worker {
  socket: Socket;
  replies: string[];
  closed: Promise<void>;
}

async function worker(): Promise<Worker> {
  const socket = connect({ path: info.socket });
  socket.setEncoding('utf8');
  const replies: string[] = [];
  let tail = '';
  socket.on('data', (text: string) => {
    const parts = (tail + text).split('\f');
    tail = parts.pop() ?? '';
    replies.push(...parts);
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  await new Promise<void>((r, reject) => {
    socket.once('connect', () => r());
    socket.once('error', reject);
  });
  return { socket, replies, closed };
}

async function until(check: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** The daemon's own status, over the worker socket. */
async function status(): Promise<{
  streams: { waiting: number; active: number; done: number };
  sessions: number;
  connections: number;
  counters: { slowSessionsClosed: number };
}> {
  const w = await worker();
  w.socket.write(encodeFrame('status', {}));
  await until(() => w.replies.length > 0, 'a status reply');
  w.socket.destroy();
  return JSON.parse(w.replies[0] as string).data;
}

const phases: Array<{ what: string; rss: number; peak: number }> = [];
function mark(what: string): void {
  phases.push({ what, rss: rssMiB(), peak });
}

// Warm: a stream and a session, as a daemon in use has.
{
  const w = await worker();
  w.socket.write(encodeFrame('progress', { v: 1, progressToken: 'warm', progress: 1, seq: 1 }));
  w.socket.write(encodeFrame('done', { v: 1, progressToken: 'warm', status: 'ok', seq: 2 }));
  await until(() => w.replies.length === 2, 'warm acks');
  w.socket.destroy();
  await sleep(2000);
}
peak = 0;
mark('baseline');

// Fuzzed bytes with form feeds, one connection each.
for (let i = 0; i < 300; i++) {
  const w = await worker();
  const bytes = Buffer.alloc(1 + Math.floor(Math.random() * 4096));
  for (let j = 0; j < bytes.length; j++)
    bytes[j] = Math.random() < 0.05 ? 0x0c : Math.floor(Math.random() * 256);
  w.socket.write(bytes);
  w.socket.end();
  await Promise.race([w.closed, sleep(2000)]);
  w.socket.destroy();
}
// 100,000 distinct tokens from one connection: 1,000 accepted, the rest too_many_streams; in
// batches, each ended by a ping, reading the answers (a worker that never reads is cut off).
{
  const w = await worker();
  for (let batch = 1; batch <= 100; batch++) {
    const frames: string[] = [];
    for (let i = (batch - 1) * 1000; i < batch * 1000; i++)
      frames.push(encodeFrame('progress', { v: 1, progressToken: `many-${i}`, progress: 1 }));
    w.socket.write(frames.join('') + encodeFrame('ping', {}));
    await until(() => w.replies.filter((r) => r.includes('"pong"')).length === batch, 'a pong');
  }
  w.socket.destroy();
}
// 10 MB without a delimiter; 30,000 levels of nesting; 5,000 unknown fields.
{
  const w = await worker();
  w.socket.write(Buffer.alloc(10 * 1024 * 1024, 0x61));
  await w.closed;
  const nested = await worker();
  nested.socket.write(`{"type":"progress","data":${'['.repeat(30_000)}${']'.repeat(30_000)}}\f`);
  const fields: Record<string, number> = { v: 1 };
  for (let i = 0; i < 5000; i++) fields[`f${i}`] = i;
  nested.socket.write(encodeFrame('progress', { ...fields, progressToken: 'wide' }));
  await until(() => nested.replies.length >= 2, 'the nesting and wide answers');
  nested.socket.destroy();
}
// 1,000 connections opened, answered and dropped.
{
  const all = await Promise.all(Array.from({ length: 1000 }, () => worker()));
  for (const w of all) w.socket.write(encodeFrame('ping', {}));
  await until(() => all.every((w) => w.replies.length > 0), '1,000 pongs');
  for (const w of all) w.socket.destroy();
}
mark('after the hostile inputs');

// The slow consumer: a session that stops reading while 40,000 frames of ~1 KB go to its stream.
{
  const ws = new WebSocket(info.url, 'mcp-progress.v1', {
    headers: { authorization: `Bearer ${info.secret}` },
  });
  ws.on('error', () => {});
  await new Promise<void>((r) => ws.once('open', () => r()));
  ws.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'progress/subscribe',
      params: { progressToken: 'slow', minIntervalMs: 0 },
    }),
  );
  await new Promise<void>((r) => ws.once('message', () => r()));
  // Stop reading: the daemon's writes pile up in its buffer for this session.
  (ws as unknown as { _socket: Socket })._socket.pause();
  const before = (await status()).counters.slowSessionsClosed;
  const w = await worker();
  const pad = 'x'.repeat(1000);
  for (let start = 1; start <= 40_000; start += 500) {
    const frames: string[] = [];
    for (let i = start; i < start + 500; i++)
      frames.push(
        encodeFrame('progress', { v: 1, progressToken: 'slow', progress: i, message: pad }),
      );
    if (!w.socket.write(frames.join('')))
      await new Promise<void>((r) => w.socket.once('drain', () => r()));
  }
  w.socket.write(encodeFrame('done', { v: 1, progressToken: 'slow', status: 'ok', seq: 1 }));
  await until(() => w.replies.some((r) => r.includes('"ack"')), 'the slow stream done');
  let closed = 0;
  for (let i = 0; i < 100 && closed === 0; i++) {
    closed = (await status()).counters.slowSessionsClosed - before;
    if (closed === 0) await sleep(100);
  }
  w.socket.destroy();
  ws.terminate();
  mark(`after the slow consumer (${closed} session closed as slow)`);
}

// Everything ends: streams abandoned or done, then evicted after the retention window.
for (;;) {
  const s = await status();
  if (s.streams.active + s.streams.waiting + s.streams.done === 0 && s.sessions === 0) break;
  await sleep(200);
}
mark('every stream evicted, no session');
const settled: number[] = [];
for (let s = 0; s < settleS; s++) {
  await sleep(1000);
  settled.push(rssMiB());
}
mark(`after ${settleS} s more`);
clearInterval(sampler);
daemon.kill('SIGTERM');
await new Promise((r) => daemon.once('exit', r));
rmSync(dir, { recursive: true, force: true });

const baseline = phases[0]?.rss ?? 0;
for (const phase of phases)
  console.log(
    `${phase.what.padEnd(52)} RSS ${phase.rss.toFixed(1)} MiB (${phase.rss >= baseline ? '+' : ''}${(phase.rss - baseline).toFixed(1)}), peak so far ${phase.peak.toFixed(1)} MiB`,
  );
console.log(
  `RSS over the last ${settleS} s: ${Math.min(...settled).toFixed(1)} to ${Math.max(...settled).toFixed(1)} MiB`,
);
