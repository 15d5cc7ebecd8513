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
import { setFlagsFromString } from 'node:v8';

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
  return COLLECTION_FLAG.test(`${nodeOptions} ${execArgv.join(' ')}`);
}

/** Collects on the main thread from now on, unless the user chose otherwise; whether it did. */
export function collectOnMainThread(): boolean {
  if (choosesOwnCollection()) return false;
  for (const flag of MAIN_THREAD_COLLECTION_FLAGS) setFlagsFromString(flag);
  return true;
}
