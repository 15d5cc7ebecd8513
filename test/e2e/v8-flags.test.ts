/**
 * The V8 flags bin/mcp-progress gives long-lived commands. The daemon's are seen in its own
 * command line (it starts again with them, same pid): its young generation is capped (a steady
 * flow of small messages grew Node's default to 16 MiB per semi-space, and the daemon's peak RSS
 * with it), and its garbage collection runs on the main thread alone (helper threads woken for
 * each small collection cost more CPU than they saved: `npm run bench` measures it). `mcp`, which
 * a host waits for at each start, starts once and turns parallel collection off itself (seen by a
 * probe loaded into it). `mcp` also holds V8's memory reducer off while progress flows through
 * it (seen by the same probe, and, in a plain Node, by when V8's reducer collects). A user's own
 * choice, in NODE_OPTIONS or in node's flags, stands.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { connectPublisher } from '../../src/client/index.js';
import {
  choosesOwnCollection,
  IDLE_COLLECTION_FLAGS,
  MAIN_THREAD_COLLECTION_FLAGS,
  REDUCER_HOLD_FLAGS,
} from '../../src/shared/collection.js';
import { IDLE_COLLECTION_MS } from '../../src/shared/defaults.js';
import { readDaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  eventually,
  ROOT,
  type RunningDaemon,
  startDaemon,
  tempDir,
} from '../helpers/daemon.js';
import { connectStdio } from '../helpers/mcp.js';

afterAll(() => cleanupAll());

const PROBE = join(ROOT, 'test/fixtures/v8-flag-probe.mjs');
const GC_TICKS = join(ROOT, 'test/fixtures/gc-helper-ticks.mjs');
const REDUCER_HOLD = join(ROOT, 'test/fixtures/reducer-hold.mjs');

const argv = (pid: number | undefined) =>
  readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

/**
 * The V8 flags a real `mcp` set on itself at run time by the time it answered initialize (seen by
 * test/fixtures/v8-flag-probe.mjs), and its command line then: `mcp` starts once, for its host.
 */
async function mcpFlags(
  nodeArgs: string[] = [],
): Promise<{ setAtRunTime: string[]; argv: string[] }> {
  const out = join(tempDir(), 'flags');
  writeFileSync(out, '');
  const mcp = await connectStdio(
    [],
    { MCP_PROGRESS_RUNTIME_DIR: tempDir(), V8_FLAG_PROBE_OUT: out },
    [...nodeArgs, '--import', pathToFileURL(PROBE).href],
  );
  try {
    return {
      setAtRunTime: readFileSync(out, 'utf8').split('\n').filter(Boolean),
      argv: argv(mcp.transport.pid ?? undefined),
    };
  } finally {
    await mcp.close();
  }
}

/** A daemon started with NODE_OPTIONS set to `options`: the user's own choice of flags. */
async function daemonWithNodeOptions(options: string): Promise<RunningDaemon> {
  const saved = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = options;
  return startDaemon().finally(() => {
    if (saved === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = saved;
  });
}

describe.skipIf(process.platform !== 'linux')('the V8 flags of long-lived commands', () => {
  it("cap the daemon's young generation at 4 MiB a semi-space, unless NODE_OPTIONS chooses", async () => {
    const daemon = await startDaemon();
    expect(argv(daemon.child.pid)).toContain('--max-semi-space-size=4');
    expect(await daemon.stop()).toBe(0);

    const chosen = await daemonWithNodeOptions('--max-semi-space-size=16');
    expect(argv(chosen.child.pid).filter((arg) => arg.includes('semi-space'))).toEqual([]);
    expect(await chosen.stop()).toBe(0);
  });

  it('collect garbage on one thread: the daemon starts again with it, mcp starts once and sets it itself', async () => {
    const daemon = await startDaemon();
    expect(argv(daemon.child.pid)).toContain('--single-threaded-gc');
    expect(await daemon.stop()).toBe(0);
    const mcp = await mcpFlags();
    expect(mcp.setAtRunTime).toEqual([...MAIN_THREAD_COLLECTION_FLAGS]);
    // Not started a second time (a host waits for each start): no flags of ours on its command line.
    expect(mcp.argv).not.toContain('--disable-sigusr1');
    expect(mcp.argv).not.toContain('--single-threaded-gc');
    // The young generation's cap stays the daemon's alone: it costs start-up, which mcp pays often.
    expect(mcp.argv).not.toContain('--max-semi-space-size=4');
  });

  it("start the daemon without V8's memory reducer, with gc for its own, unless NODE_OPTIONS chooses", async () => {
    const daemon = await startDaemon();
    expect(argv(daemon.child.pid)).toEqual(expect.arrayContaining([...IDLE_COLLECTION_FLAGS]));
    expect(await daemon.stop()).toBe(0);

    // V8's memory flags are not allowed in NODE_OPTIONS; --expose-gc is, and counts as a choice.
    const chosen = await daemonWithNodeOptions('--expose-gc');
    const own = argv(chosen.child.pid);
    for (const flag of IDLE_COLLECTION_FLAGS) expect(own).not.toContain(flag);
    expect(await chosen.stop()).toBe(0);
  });

  it('give memory back once workers are quiet, never while frames flow', async () => {
    const daemon = await startDaemon(['--log-level', 'debug']);
    const gaveBack = () =>
      daemon.stderr().match(/idle: gave memory back, heap ([\d.]+) -> ([\d.]+) MiB/);
    const publisher = await connectPublisher({
      token: 'idle-memory',
      socket: daemon.info.socket,
      intervalMs: 0,
    });
    // Frames every 50 ms from start-up on, for longer than the idle period: no collection meanwhile.
    const flowUntil = Date.now() + IDLE_COLLECTION_MS + 2000;
    for (let progress = 1; Date.now() < flowUntil; progress++) {
      publisher.update({ progress });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(gaveBack()).toBeNull();
    const flowEnded = Date.now();
    await publisher.close();
    const match = await eventually(
      () => gaveBack() ?? undefined,
      3 * IDLE_COLLECTION_MS,
      'the idle collection',
    );
    // One idle period after the last frame at the earliest, and the heap smaller after it.
    expect(Date.now() - flowEnded).toBeGreaterThanOrEqual(IDLE_COLLECTION_MS - 100);
    expect(Number(match[2])).toBeLessThan(Number(match[1]));
    expect(await daemon.stop()).toBe(0);
  }, 60_000);

  it("hold V8's memory reducer off in mcp while progress flows, and let go once it is quiet", async () => {
    const runtimeDir = tempDir();
    const out = join(tempDir(), 'flags');
    writeFileSync(out, '');
    const mcp = await connectStdio(
      ['--log-level', 'debug'],
      { MCP_PROGRESS_RUNTIME_DIR: runtimeDir, V8_FLAG_PROBE_OUT: out },
      ['--import', pathToFileURL(PROBE).href],
    );
    const holdFlags = () =>
      readFileSync(out, 'utf8')
        .split('\n')
        .filter((flag) => flag === REDUCER_HOLD_FLAGS.hold || flag === REDUCER_HOLD_FLAGS.release);
    try {
      // No daemon ran: mcp embeds one, so a worker's frames flow through the mcp process itself.
      const info = await eventually(
        () => readDaemonInfo(runtimeDir).catch(() => undefined),
        10_000,
        'the embedded daemon',
      );
      expect(holdFlags()).toEqual([]);
      const publisher = await connectPublisher({
        token: 'reducer-hold',
        socket: info.socket,
        intervalMs: 0,
      });
      for (let progress = 1; progress <= 40; progress++) {
        publisher.update({ progress });
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await publisher.close();
      const flowEnded = Date.now();
      await eventually(() => (holdFlags().length > 0 ? true : undefined), 5000, 'the hold');
      expect(holdFlags()).toEqual([REDUCER_HOLD_FLAGS.hold]);
      await eventually(
        () => (holdFlags().length === 2 ? true : undefined),
        3 * IDLE_COLLECTION_MS,
        'the release',
      );
      expect(holdFlags()).toEqual([REDUCER_HOLD_FLAGS.hold, REDUCER_HOLD_FLAGS.release]);
      expect(Date.now() - flowEnded).toBeGreaterThanOrEqual(IDLE_COLLECTION_MS - 100);
      // Each flag is set before its line is logged: the lines may still be on their way.
      for (const line of [
        "progress flows: V8's memory reducer held off",
        "quiet: V8's memory reducer may run again",
      ]) {
        await eventually(() => (mcp.stderr().includes(line) ? true : undefined), 5000, line);
      }
    } finally {
      await mcp.close();
    }
  }, 60_000);

  it("leave collection to the user's own flags for it", async () => {
    expect((await mcpFlags(['--no-concurrent-marking'])).setAtRunTime).toEqual([]);
  });
});

describe.skipIf(process.platform !== 'linux')('collecting on the main thread', () => {
  /** CPU ticks of the main thread and of the others while the fixture makes young garbage. */
  const ticks = (mode: string): { main: number; helpers: number } =>
    JSON.parse(execFileSync(process.execPath, [GC_TICKS, mode], { encoding: 'utf8' }));

  it("leaves V8's helper threads next to idle while garbage is collected", () => {
    const shared = ticks('default');
    const mainOnly = ticks('main-thread');
    // Shared out, helpers do a good part of the work (14-20% of the main thread's, in runs here);
    // on the main thread alone, what is left is full collections' marking (0-3%).
    const helpersShare = (run: { main: number; helpers: number }) => run.helpers / run.main;
    expect(helpersShare(shared)).toBeGreaterThan(0.08);
    expect(helpersShare(mainOnly)).toBeLessThan(helpersShare(shared) / 3);
  });

  it("knows the user's own flags for collection, by either spelling", () => {
    expect(choosesOwnCollection(['--single_threaded_gc'], '')).toBe(true);
    expect(choosesOwnCollection([], '--no-parallel-scavenge')).toBe(true);
    expect(choosesOwnCollection([], '--concurrent-marking')).toBe(true);
    expect(choosesOwnCollection(['--max-semi-space-size=4'], '--import ./probe.mjs')).toBe(false);
  });
});

describe("V8's memory reducer, held off while progress flows", () => {
  /** When V8's reducer collected in the fixture, ms after the collection that armed it. */
  async function reductions(
    mode: 'hold' | 'free',
    flowMs: number,
    quietWaitMs: number,
  ): Promise<{ flowEnded: number; reduced: number[] }> {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', REDUCER_HOLD, mode, String(flowMs), String(quietWaitMs)],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const events = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { flowEnded?: number; reduced?: number });
    return {
      flowEnded: events.find((event) => event.flowEnded !== undefined)?.flowEnded ?? Number.NaN,
      reduced: events.flatMap((event) => (event.reduced === undefined ? [] : [event.reduced])),
    };
  }

  it('collects in a real Node only once the flow has been quiet, where without the hold it collects mid-flow', async () => {
    const [free, held] = await Promise.all([
      // Without the hold, the flow ends at V8's first reduction, whenever V8 decides on one (8 s
      // after the arming collection on a quiet machine, a turn or two later on a busy one).
      reductions('free', 40_000, 0),
      // With it, the flow spans the reducer's first two turns (about 8 and 16 s).
      reductions('hold', 18_000, 20_000),
    ]);
    // Without the hold, V8's reducer collects while progress flows: the case this guards against.
    expect(free.reduced.filter((at) => at <= free.flowEnded).length).toBeGreaterThan(0);
    expect(free.flowEnded).toBeLessThan(40_000);
    // With it, not until the flow has ended (and the hold's quiet second passed), and then it does.
    expect(held.reduced.filter((at) => at < held.flowEnded)).toEqual([]);
    expect(held.reduced.filter((at) => at > held.flowEnded).length).toBeGreaterThan(0);
  }, 90_000);
});
