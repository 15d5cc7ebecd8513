/**
 * The done journal under the attack of issue 23 item 3: N dones (default 24,000), each of a
 * fresh token with a long message that JSON escapes six times over (4096 control characters,
 * about 24 KiB on disk), sent over one worker connection as fast as the daemon answers, against
 * the daemon of each build given (default: this checkout), at its default caps. Reports the
 * time to the last answer, the acks and refusals, the journal's largest and last size, its
 * size after an idle wait, and, after kill -9, what a daemon restarted on the directory
 * replays and how long it takes to be ready. A measurement, not a test; docs/RELIABILITY.md
 * quotes it.
 *
 *   npm run build && node test/reliability/journal-attack.ts [--dones 24000] [--idle-s 0]
 *     [--dir DIR (runtime dirs; default the temp dir)] [BUILD_DIR ...]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '../..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    dones: { type: 'string', default: '24000' },
    'idle-s': { type: 'string', default: '0' },
    dir: { type: 'string', default: tmpdir() },
  },
});
const dones = Number(values.dones);
const idleS = Number(values['idle-s']);
const builds = positionals.length > 0 ? positionals.map((p) => resolve(p)) : [ROOT];
const MESSAGE = '\u0001'.repeat(4096);

function journalBytes(dir: string): number {
  try {
    return statSync(join(dir, 'dones.jsonl')).size;
  } catch {
    return 0;
  }
}

async function startDaemon(
  build: string,
  dir: string,
): Promise<{ child: ChildProcess; socket: string; readyS: number; stderr: () => string }> {
  const from = performance.now();
  const child = spawn(
    process.execPath,
    [join(build, 'bin/mcp-progress'), 'daemon', '--runtime-dir', dir, '--port', '0'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  // Its log line, not daemon.json: a killed daemon leaves its daemon.json behind.
  while (!stderr.includes('ready:')) {
    if (child.exitCode !== null) throw new Error(`the daemon exited: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const info = JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')) as { socket: string };
  return {
    child,
    socket: info.socket,
    readyS: (performance.now() - from) / 1000,
    stderr: () => stderr,
  };
}

/** Sends `count` frames over one connection, then waits for as many answers; counts them by type and code. */
function exchange(socketPath: string, count: number, frameAt: (i: number) => string) {
  return new Promise<Record<string, number>>((resolveAnswers, reject) => {
    const socket = connect({ path: socketPath });
    const counts: Record<string, number> = {};
    let seen = 0;
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (text: string) => {
      buffer += text;
      let end = buffer.indexOf('\f');
      while (end !== -1) {
        const envelope = JSON.parse(buffer.slice(0, end)) as {
          type: string;
          data: { code?: string };
        };
        buffer = buffer.slice(end + 1);
        const key =
          envelope.data.code === undefined ? envelope.type : `rejected ${envelope.data.code}`;
        counts[key] = (counts[key] ?? 0) + 1;
        if (++seen === count) {
          socket.destroy();
          resolveAnswers(counts);
        }
        end = buffer.indexOf('\f');
      }
    });
    socket.on('connect', () => {
      // Made and written as the socket drains, so that the attacker's own memory stays small.
      let next = 0;
      const write = () => {
        while (next < count) if (!socket.write(frameAt(next++))) return;
      };
      socket.on('drain', write);
      write();
    });
  });
}

/** The daemon's `status` answer. */
function statusOf(socketPath: string): Promise<{ streams: { done: number } }> {
  return new Promise((resolveStatus, reject) => {
    const socket = connect({ path: socketPath });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (!text.includes('\f')) return;
      socket.destroy();
      resolveStatus(JSON.parse(text.slice(0, text.indexOf('\f'))).data);
    });
    socket.on('connect', () => socket.write(frame('status', {})));
  });
}

const frame = (type: string, data: unknown) => `${JSON.stringify({ type, data })}\f`;

async function run(build: string) {
  const dir = mkdtempSync(join(values.dir, 'mcp-progress-journal-attack-'));
  try {
    const daemon = await startDaemon(build, dir);
    let largest = 0;
    const sampler = setInterval(() => {
      largest = Math.max(largest, journalBytes(dir));
    }, 100);
    const from = performance.now();
    const answers = await exchange(daemon.socket, dones, (i) =>
      frame('done', { v: 1, progressToken: `attack-${i}`, status: 'ok', message: MESSAGE, seq: i }),
    );
    const attackS = (performance.now() - from) / 1000;
    clearInterval(sampler);
    const atEnd = journalBytes(dir);
    largest = Math.max(largest, atEnd);
    if (idleS > 0) await new Promise((r) => setTimeout(r, idleS * 1000));
    const afterIdle = journalBytes(dir);
    daemon.child.kill('SIGKILL');
    await new Promise((r) => daemon.child.once('exit', r));
    const again = await startDaemon(build, dir);
    const status = await statusOf(again.socket);
    again.child.kill('SIGTERM');
    await new Promise((r) => again.child.once('exit', r));
    const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;
    console.log(
      `${build}: ${dones} dones in ${attackS.toFixed(1)} s: ${Object.entries(answers)
        .map(([k, n]) => `${n} ${k}`)
        .join(', ')}; journal largest ${mib(largest)}, at the end ${mib(atEnd)}` +
        (idleS > 0 ? `, ${idleS} s later ${mib(afterIdle)}` : '') +
        `; after kill -9 a restart replays ${status.streams.done} dones, ready in ${again.readyS.toFixed(2)} s, journal ${mib(journalBytes(dir))}` +
        (again.stderr().includes('done journal')
          ? `; its log: ${again
              .stderr()
              .trim()
              .split('\n')
              .filter((l) => l.includes('journal'))
              .map((l) => l.slice(0, 160))
              .join(' | ')}`
          : ''),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const build of builds) await run(build);
