/** What the harness reads about a process from outside: resident memory and CPU time (Linux /proc). */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export interface ProcSample {
  /** Resident set size in bytes, or NaN where /proc is missing. */
  rssBytes: number;
  /** Peak resident set size so far (VmHWM), in bytes, or NaN. */
  peakRssBytes: number;
  /**
   * The private part of the resident set (RssAnon), in bytes, or NaN: the rest of RSS is
   * file pages, mostly of the node binary, shared by every Node process on the machine.
   */
  privateBytes: number;
  /** User plus system CPU seconds so far. */
  cpuSeconds: number;
  /** When the sample was taken, monotonic milliseconds. */
  atMs: number;
}

const CLOCK_TICKS = 100;

export function sampleProcess(pid: number): ProcSample {
  const atMs = performance.now();
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    const peak = /VmHWM:\s+(\d+) kB/.exec(status);
    const anon = /RssAnon:\s+(\d+) kB/.exec(status);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return {
      rssBytes: rss ? Number(rss[1]) * 1024 : Number.NaN,
      peakRssBytes: peak ? Number(peak[1]) * 1024 : Number.NaN,
      privateBytes: anon ? Number(anon[1]) * 1024 : Number.NaN,
      cpuSeconds: ticks / CLOCK_TICKS,
      atMs,
    };
  } catch {
    return {
      rssBytes: Number.NaN,
      peakRssBytes: Number.NaN,
      privateBytes: Number.NaN,
      cpuSeconds: Number.NaN,
      atMs,
    };
  }
}

/** The machine's CPU time so far, all cores (/proc/stat), in clock ticks. */
export interface MachineCpuSample {
  totalTicks: number;
  /**
   * Time the hypervisor ran something else while this VM had work ready (steal): on a shared
   * host, the contention that load average does not show, and what makes one run's figures move.
   */
  stealTicks: number;
}

const NO_MACHINE_CPU: MachineCpuSample = { totalTicks: Number.NaN, stealTicks: Number.NaN };

export function sampleMachineCpu(): MachineCpuSample {
  let line: string;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  } catch {
    return NO_MACHINE_CPU;
  }
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"; guest time is
  // counted in user already.
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (ticks.length < 8 || ticks.some((n) => !Number.isFinite(n))) return NO_MACHINE_CPU;
  return { totalTicks: ticks.reduce((sum, n) => sum + n, 0), stealTicks: ticks[7] as number };
}

/** Share of the machine's CPU time the host took (steal) between two samples; NaN without /proc. */
export function stolenShare(from: MachineCpuSample, to: MachineCpuSample): number {
  const total = to.totalTicks - from.totalTicks;
  return total > 0 ? (to.stealTicks - from.stealTicks) / total : Number.NaN;
}

/** Share of one core the process used between two samples (1 = a full core). */
export function cpuShare(from: ProcSample, to: ProcSample): number {
  return (to.cpuSeconds - from.cpuSeconds) / ((to.atMs - from.atMs) / 1000);
}

/** A TCP port that was free a moment ago, for servers that cannot take port 0 and report it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
