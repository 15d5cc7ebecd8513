/**
 * Garbage collection on the main thread alone, for the daemon and `mcp`: a steady flow of small
 * messages makes many small collections, and sharing each out to V8's helper threads cost more
 * CPU than it saved (A/Bs at 1k updates/s in docs/MCP-PATH.md). The daemon is started with
 * --single-threaded-gc (bin/mcp-progress re-executes it anyway). `mcp` is not, because a host
 * waits for it at every start and a second Node start costs about 30 ms: it turns off the
 * parallel young-generation collection, most of what that flow makes, once running. Only flags
 * that V8 reads at each collection may change then: --single-threaded-gc itself, set at run
 * time, also stops concurrent marking, which V8 has set up by then, and V8 aborts at the next
 * full collection. The user's own choice of flags for collection (NODE_OPTIONS, node's flags)
 * stands.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { onEachProgress } from './tiering.js';

/** V8 flags that choose how collection shares its work out, by any spelling. */
const COLLECTION_FLAG =
  /single[-_]threaded|parallel[-_](scavenge|marking|compaction|pointer)|concurrent[-_](marking|sweeping)/;

/** Flags V8 reads at each collection, so safe to set in a running process. */
export const MAIN_THREAD_COLLECTION_FLAGS = [
  '--no-parallel-scavenge',
  '--no-parallel-compaction',
  '--no-parallel-pointer-update',
] as const;

/** Whether Node was started with flags of the user's own for how garbage is collected. */
export function choosesOwnCollection(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): boolean {
  return namesFlag(COLLECTION_FLAG, execArgv, nodeOptions);
}

/** Whether the flags Node was started with (its own, and NODE_OPTIONS) name one `pattern` matches. */
function namesFlag(pattern: RegExp, execArgv: readonly string[], nodeOptions: string): boolean {
  return pattern.test(`${nodeOptions} ${execArgv.join(' ')}`);
}

/** V8 flags of the user's own for the size of the young generation's semi-spaces. */
const YOUNG_GENERATION_FLAG = /semi-space/;

/** Whether Node was started with flags of the user's own for the young generation's size. */
export function choosesOwnYoungGeneration(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): boolean {
  return namesFlag(YOUNG_GENERATION_FLAG, execArgv, nodeOptions);
}

/** Collects on the main thread from now on, unless the user chose otherwise; whether it did. */
export function collectOnMainThread(): boolean {
  if (choosesOwnCollection()) return false;
  for (const flag of MAIN_THREAD_COLLECTION_FLAGS) setFlagsFromString(flag);
  return true;
}

/**
 * The daemon gives memory back when it is idle, not while progress flows through it. V8's memory
 * reducer runs a memory-reducing collection about 8 s after start-up's first full collection when
 * the process allocates slowly, and to V8 a daemon relaying 1,000 small updates a second does: the
 * reduction (a pause of 5-10 ms, some 30 ms of marking, then a young generation half the size, so
 * twice the scavenges) fell in the first job a fresh daemon served. So the daemon starts without
 * it (bin/mcp-progress adds these flags when it starts the daemon again), and IdleCollection does
 * that work once no worker frame has arrived for a while. `mcp`, and the daemon it embeds, keep
 * V8's: they start once, and V8 reads that flag only when it sets up its heap. `mcp` holds it off
 * while progress flows instead (ReducerHold, below).
 */
export const IDLE_COLLECTION_FLAGS = ['--no-memory-reducer', '--expose-gc'] as const;

/** V8 flags of the user's own for the memory reducer or for `gc`, by any spelling. */
const REDUCTION_FLAG = /memory[-_]reducer|expose[-_]gc/;

/** Whether Node was started with flags of the user's own for reducing memory. */
export function choosesOwnReduction(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): boolean {
  return namesFlag(REDUCTION_FLAG, execArgv, nodeOptions);
}

/**
 * Calls `quiet` once a whole period of `periodMs` has passed with no `activity()`, then waits for
 * the next activity. `activity()` runs once per worker read or per update: it sets a flag, and
 * arms the timer when none is armed.
 */
export class QuietPeriods {
  readonly #periodMs: number;
  readonly #quiet: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #active = false;
  #stopped = false;

  /** `armed`: the first period starts now, as if there had been activity. */
  constructor(periodMs: number, quiet: () => void, armed: boolean) {
    this.#periodMs = periodMs;
    this.#quiet = quiet;
    if (armed) this.#arm();
  }

  /** Something happened: `quiet` waits for a whole period after it. */
  activity(): void {
    this.#active = true;
    if (this.#timer === undefined && !this.#stopped) this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    this.#active = false;
    this.#timer = setTimeout(this.#check, this.#periodMs);
    this.#timer.unref();
  }

  readonly #check = (): void => {
    this.#timer = undefined;
    if (this.#active) this.#arm();
    else this.#quiet();
  };
}

export interface IdleCollectionOptions {
  /** A collection waits until nothing has happened for this long. */
  readonly idleMs: number;
  /** ...and until the heap has grown this much since the last one (start-up counts as growth). */
  readonly minGrowthBytes: number;
  /** The heap's committed bytes now. */
  readonly heapBytes: () => number;
  /** One collection that gives memory back. */
  readonly collect: () => void;
  /** Told after each collection: the committed heap before and after it. */
  readonly collected?: (beforeBytes: number, afterBytes: number) => void;
}

/**
 * Collects once the process has been idle for `idleMs` (no `activity()` in a whole period), and
 * only when the heap grew by `minGrowthBytes` since the last collection: a job that reports every
 * few seconds allocates little between its frames, and pays nothing. Start-up counts as activity.
 */
export class IdleCollection {
  readonly #options: IdleCollectionOptions;
  readonly #quiet: QuietPeriods;
  #heapAfterLast = 0;

  constructor(options: IdleCollectionOptions) {
    this.#options = options;
    this.#quiet = new QuietPeriods(options.idleMs, () => this.#collectIfGrown(), true);
  }

  /** Something happened: the next collection waits for a whole idle period after it. */
  activity(): void {
    this.#quiet.activity();
  }

  stop(): void {
    this.#quiet.stop();
  }

  #collectIfGrown(): void {
    const before = this.#options.heapBytes();
    if (before < this.#heapAfterLast + this.#options.minGrowthBytes) return;
    this.#options.collect();
    this.#heapAfterLast = this.#options.heapBytes();
    this.#options.collected?.(before, this.#heapAfterLast);
  }
}

/**
 * The daemon's IdleCollection when this process was started without V8's memory reducer and
 * with `gc` (IDLE_COLLECTION_FLAGS, by bin/mcp-progress); otherwise undefined, and V8's reducer
 * (or the user's own choice) does the work. The collection is V8's last-resort one: a plain full
 * collection gives no memory back to the system, this one (about 30 ms on an idle daemon) does.
 */
export function idleCollection(
  options: Pick<IdleCollectionOptions, 'idleMs' | 'minGrowthBytes' | 'collected'>,
  execArgv: readonly string[] = process.execArgv,
): IdleCollection | undefined {
  const gc = globalThis.gc;
  if (gc === undefined || !IDLE_COLLECTION_FLAGS.every((flag) => execArgv.includes(flag))) {
    return undefined;
  }
  return new IdleCollection({
    ...options,
    heapBytes: () => getHeapStatistics().total_heap_size,
    collect: () => void gc({ type: 'major', execution: 'sync', flavor: 'last-resort' }),
  });
}

/**
 * `mcp` keeps V8's memory reducer out of the jobs it relays. It cannot start without it as the
 * daemon does (a second start costs a host about 20 ms at every start, and V8 reads that flag only
 * when it sets up its heap), and start-up's first full collection arms it: about 8 s later, in the
 * first job, it ran a memory-reducing collection (concurrent marking on V8's helper threads,
 * about 0.1 s of CPU at 1k updates/s), then shrank the young generation. The reducer starts its
 * collection only when incremental marking may start, which V8 checks each time from its flag: so
 * while progress flows that flag is off, and the reducer waits its 8 s again, until the flow has
 * been quiet for a whole period; then it is on again and the reducer gives memory back as before.
 * A full collection the heap needs meanwhile still runs, in one pause instead of in steps.
 */
export const REDUCER_HOLD_FLAGS = {
  hold: '--no-incremental-marking',
  release: '--incremental-marking',
} as const;

/** V8 flags of the user's own for the memory reducer or for incremental marking, by any spelling. */
const HOLD_FLAG = /memory[-_]reducer|incremental[-_]marking/;

export interface ReducerHoldOptions {
  /** The hold ends once no progress has flowed for this long. */
  readonly quietMs: number;
  /** Sets one V8 flag in this process. */
  readonly setFlag: (flag: string) => void;
  /** Told when the hold starts (true) and ends (false). */
  readonly changed?: (held: boolean) => void;
  /** Told once, when the hold is stopped. */
  readonly stopped?: () => void;
}

/** Holds V8's memory reducer off from the first `activity()` until a quiet period after the last. */
export class ReducerHold {
  readonly #options: ReducerHoldOptions;
  readonly #quiet: QuietPeriods;
  #held = false;
  #stopped = false;

  constructor(options: ReducerHoldOptions) {
    this.#options = options;
    this.#quiet = new QuietPeriods(options.quietMs, () => this.#release(), false);
  }

  get held(): boolean {
    return this.#held;
  }

  /** Progress flowed: held from now until a whole quiet period after the last call. */
  activity(): void {
    if (this.#stopped) return;
    if (!this.#held) {
      this.#held = true;
      this.#options.setFlag(REDUCER_HOLD_FLAGS.hold);
      this.#options.changed?.(true);
    }
    this.#quiet.activity();
  }

  /** Ends the hold now, for good. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#quiet.stop();
    this.#release();
    this.#options.stopped?.();
  }

  #release(): void {
    if (!this.#held) return;
    this.#held = false;
    this.#options.setFlag(REDUCER_HOLD_FLAGS.release);
    this.#options.changed?.(false);
  }
}

/**
 * `mcp`'s ReducerHold, told of each update through progressFlows (shared/tiering.ts); undefined
 * when this process runs without V8's reducer or the user chose flags for it or for marking.
 */
export function holdReducerWhileProgressFlows(
  options: Pick<ReducerHoldOptions, 'quietMs' | 'changed'>,
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): ReducerHold | undefined {
  if (namesFlag(HOLD_FLAG, execArgv, nodeOptions)) return undefined;
  const hold = new ReducerHold({
    ...options,
    setFlag: (flag) => setFlagsFromString(flag),
    // Called only by stop(), after the listener below is in place.
    stopped: () => stopListening(),
  });
  const stopListening = onEachProgress(() => hold.activity());
  return hold;
}
