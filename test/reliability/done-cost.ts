/**
 * What the done journal's sync costs: N streams, each one update and then a
 * done that waits for its ack, through the Node client, C at a time, against
 * the daemon of each build given (default: this checkout), builds taking
 * turns. Reports the wall time and the daemon's CPU time. A measurement, not
 * a test (nothing is asserted); docs/RELIABILITY.md quotes it.
 *
 *   npm run build && node test/reliability/done-cost.ts [--dones 10000] [--concurrency 50]
 *     [--rounds 3] [--dir DIR (runtime dirs; default the temp dir)] [BUILD_DIR ...]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { connectPublisher as ConnectPublisher } from '../../src/client/index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    dones: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '3' },
    dir: { type: 'string', default: tmpdir() },
  },
});
const dones = Number(values.dones);
const concurrency = Number(values.concurrency);
const rounds = Number(values.rounds);
const builds = positionals.length > 0 ? positionals.map((p) => resolve(p)) : [ROOT];
// One client for every build: what is measured is the daemon.
const { connectPublisher } = (await import(join(ROOT, 'dist/client/index.js'))) as {
  connectPublisher: typeof ConnectPublisher;
};

/** User plus system CPU seconds of a process, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Run {
  wallS: number;
  cpuS: number;
  undelivered: number;
}

async function once(build: string): Promise<Run> {
  const dir = mkdtempSync(join(values.dir, 'mcp-progress-done-cost-'));
  const daemon: ChildProcess = spawn(
    process.execPath,
    [join(build, 'bin/mcp-progress'), 'daemon', '--runtime-dir', dir, '--port', '0'],
    { stdio: 'ignore' },
  );
  while (!existsSync(join(dir, 'daemon.json'))) await new Promise((r) => setTimeout(r, 20));
  const info = JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')) as { socket: string };
  const pid = daemon.pid as number;
  const cpuFrom = cpuSeconds(pid);
  const from = performance.now();
  let next = 0;
  let undelivered = 0;
  const lane = async () => {
    while (next < dones) {
      const publisher = await connectPublisher({
        token: `job-${next++}`,
        socket: info.socket,
        intervalMs: 0,
        onError: () => {},
      });
      publisher.update({ progress: 1, total: 1 });
      if (!(await publisher.done('ok')).delivered) undelivered++;
      await publisher.close();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const run = {
    wallS: (performance.now() - from) / 1000,
    cpuS: cpuSeconds(pid) - cpuFrom,
    undelivered,
  };
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
  return run;
}

const runs = new Map<string, Run[]>(builds.map((build) => [build, []]));
for (let round = 0; round < rounds; round++)
  for (const build of builds) runs.get(build)?.push(await once(build));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
for (const [build, list] of runs) {
  const wall = median(list.map((r) => r.wallS));
  console.log(
    `${build}: ${dones} dones, ${concurrency} at a time: ${wall.toFixed(2)} s (${list.map((r) => r.wallS.toFixed(2)).join(', ')}), ${Math.round(dones / wall)} dones/s, daemon CPU ${median(list.map((r) => r.cpuS)).toFixed(2)} s, undelivered ${list.map((r) => r.undelivered).join('/')}`,
  );
}
