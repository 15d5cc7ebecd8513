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
  /**
   * The kernel's part of it (system time, stime): its reads, writes and polls. A transport's
   * cost shows here: loopback TCP costs more of it than a pipe.
   */
  kernelSeconds: number;
  /** Read calls so far (/proc/<pid>/io syscr: read(2) and its kin, on any descriptor), or NaN. */
  readCalls: number;
  /** When the sample was taken, monotonic milliseconds. */
  atMs: number;
}

const CLOCK_TICKS = 100;

/**
 * Read calls so far, or NaN: /proc/<pid>/io asks for more than the rest of /proc/<pid> (ptrace
 * read access: refused for another user's process, and by Yama for one that is not our
 * descendant), so its absence costs this figure only.
 */
function readCalls(pid: number): number {
  try {
    const reads = /syscr:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return reads ? Number(reads[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

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
    const userTicks = Number(fields[11]);
    const systemTicks = Number(fields[12]);
    return {
      rssBytes: rss ? Number(rss[1]) * 1024 : Number.NaN,
      peakRssBytes: peak ? Number(peak[1]) * 1024 : Number.NaN,
      privateBytes: anon ? Number(anon[1]) * 1024 : Number.NaN,
      cpuSeconds: (userTicks + systemTicks) / CLOCK_TICKS,
      kernelSeconds: systemTicks / CLOCK_TICKS,
      readCalls: readCalls(pid),
      atMs,
    };
  } catch {
    return {
      rssBytes: Number.NaN,
      peakRssBytes: Number.NaN,
      privateBytes: Number.NaN,
      cpuSeconds: Number.NaN,
      kernelSeconds: Number.NaN,
      readCalls: Number.NaN,
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

/**
 * CPU seconds (all, or the kernel's part) a process used between two samples, a whole number of
 * clock ticks: each sample is ticks / 100, and a bare difference of two of them may be off in
 * the last bit (the kernel's part then came out above the whole).
 */
export function secondsBetween(
  from: ProcSample,
  to: ProcSample,
  figure: 'cpuSeconds' | 'kernelSeconds',
): number {
  return Math.round((to[figure] - from[figure]) * CLOCK_TICKS) / CLOCK_TICKS;
}

/** Share of one core the process used between two samples (1 = a full core). */
export function cpuShare(from: ProcSample, to: ProcSample): number {
  return secondsBetween(from, to, 'cpuSeconds') / ((to.atMs - from.atMs) / 1000);
}

/** Where free ports are picked: above the well-known and below the kernel's ephemeral range. */
const PICKED_PORTS_FROM = 10_000;
const PICK_ATTEMPTS = 50;

/**
 * The first port the kernel hands out for port 0 and for outgoing connections (Linux's
 * ip_local_port_range; IANA's 49152 elsewhere).
 */
function ephemeralPortsFrom(): number {
  try {
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > PICKED_PORTS_FROM + 1000 ? low : 49_152;
  } catch {
    return 49_152;
  }
}

/** Whether `port` can be listened on at 127.0.0.1 right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port that was free a moment ago, for servers that cannot take port 0 and report it.
 * Picked at random below the ephemeral range rather than by listening on port 0: a port the
 * kernel just handed out and got back is the next outgoing connection's as soon as anyone's,
 * and the server that wants it binds only later.
 */
export async function freePort(): Promise<number> {
  const below = ephemeralPortsFrom();
  for (let attempt = 0; attempt < PICK_ATTEMPTS; attempt++) {
    const port = PICKED_PORTS_FROM + Math.floor(Math.random() * (below - PICKED_PORTS_FROM));
    if (await canListen(port)) return port;
  }
  throw new Error(
    `no free TCP port found in ${PICK_ATTEMPTS} tries between ${PICKED_PORTS_FROM} and ${below}`,
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
