/**
 * How soon V8 optimises this process's code once progress flows through it. On Node 22 V8 has
 * no middle tier (Node turned Maglev off there: its code generation was not trusted), so a
 * function runs unoptimised until TurboFan takes it after about 3,000 calls: at 1,000 updates a
 * second, the first 3 s of a stream cost 2-3 times what the rest does. The hot path runs once
 * per update, so it is what reaches a lower count first.
 *
 * Lowered when the first update arrives, not at start: start-up runs many functions a few hundred
 * times (module loading), and optimising those too cost an idle daemon 7 MiB and `mcp` 150-180 ms
 * of CPU at start-up. And lowered for a while only: V8's flags are part of the compile cache's
 * key (a module compiled under other flags is refused next time), and a day-long daemon has no
 * reason to optimise what a quiet hour calls 400 times. A Node whose V8 has Maglev (Node >= 24)
 * tiers up after 400 calls already, and flags the user chose are theirs: both left as they are.
 */
import { setFlagsFromString } from 'node:v8';
import {
  FLOWING_CALLS_AFTER_TYPE_CHANGE,
  FLOWING_TIER_UP_MS,
  FLOWING_TURBOFAN_CALLS,
} from './defaults.js';

/** V8 12.4's own (Node 22): what the flags go back to. */
const V8_TURBOFAN_CALLS = 3000;
const V8_CALLS_AFTER_TYPE_CHANGE = 500;

let flowing = false;
let eachProgress: (() => void) | undefined;

/** Whether this Node's V8 has no tier between its baseline code and TurboFan. */
export function lacksMiddleTier(config: { variables?: object } = process.config): boolean {
  const maglev = (config.variables as { v8_enable_maglev?: unknown } | undefined)?.v8_enable_maglev;
  return maglev !== 1 && maglev !== true && maglev !== 'true';
}

/** Whether Node was started with flags of its own for when V8 optimises. */
export function choosesOwnTiering(execArgv: readonly string[] = process.execArgv): boolean {
  return execArgv.some((flag) =>
    /^--(no-)?(invocation[-_]count|minimum[-_]invocations|maglev)/.test(flag),
  );
}

function setTiering(turbofanCalls: number, callsAfterTypeChange: number): void {
  setFlagsFromString(`--invocation-count-for-turbofan=${turbofanCalls}`);
  setFlagsFromString(`--minimum-invocations-after-ic-update=${callsAfterTypeChange}`);
}

/** Whether progress has flowed through this process yet (progressFlows was called). */
export function progressHasFlowed(): boolean {
  return flowing;
}

/**
 * Called with each update that flows through this process (`mcp` holds V8's memory reducer off
 * with it: shared/collection.ts). Returns what takes it away again (a later listener stays).
 */
export function onEachProgress(listener: () => void): () => void {
  eachProgress = listener;
  return () => {
    if (eachProgress === listener) eachProgress = undefined;
  };
}

/**
 * Called as each update flows through this process: the first time, hot code is optimised sooner
 * for a while.
 */
export function progressFlows(windowMs = FLOWING_TIER_UP_MS): void {
  eachProgress?.();
  if (flowing) return;
  flowing = true;
  if (!lacksMiddleTier() || choosesOwnTiering()) return;
  setTiering(FLOWING_TURBOFAN_CALLS, FLOWING_CALLS_AFTER_TYPE_CHANGE);
  setTimeout(() => setTiering(V8_TURBOFAN_CALLS, V8_CALLS_AFTER_TYPE_CHANGE), windowMs).unref();
}
