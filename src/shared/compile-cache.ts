/**
 * Node's compile cache (22.1+) for the `mcp-progress` binary, in a directory
 * of the user's own: hosts spawn `mcp-progress mcp` at every start-up, and
 * compiling the SDK, zod and the bridge again each time cost about 45 ms.
 * Node's default place, <tmpdir>/node-compile-cache, is shared by every user
 * of the machine, and a cache planted there would be run as our code; so the
 * cache lives in $XDG_CACHE_HOME/mcp-progress-bridge/compile-cache (else
 * ~/.cache/...), created 0700, and is used only when it is a real directory,
 * ours, that nobody else may write. NODE_COMPILE_CACHE chooses another
 * directory (Node's own variable); NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
import { lstatSync, mkdirSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const COMPILE_CACHE_SUBDIR = join('mcp-progress-bridge', 'compile-cache');

type Env = Readonly<Record<string, string | undefined>>;

/** Where the cache goes for this user, or undefined when there is no home to put it in. */
export function compileCacheDir(env: Env = process.env): string | undefined {
  const base = env.XDG_CACHE_HOME || env.LOCALAPPDATA || safeHome(env);
  return base === undefined ? undefined : join(base, COMPILE_CACHE_SUBDIR);
}

/** Whether `dir` is a directory (not a link), owned by this user, that no one else may write. */
export function isPrivateDirectory(dir: string): boolean {
  try {
    const stat = lstatSync(dir);
    if (!stat.isDirectory()) return false;
    if (typeof process.getuid !== 'function') return true;
    return stat.uid === process.getuid() && (stat.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/**
 * Turns the cache on in the user's private directory; a no-op when Node has no compile cache,
 * when NODE_COMPILE_CACHE already chose one, or when the directory is not safe to use.
 */
export function enableUserCompileCache(env: Env = process.env): string | undefined {
  const enable = (nodeModule as { enableCompileCache?: (dir?: string) => { directory?: string } })
    .enableCompileCache;
  if (enable === undefined || env.NODE_DISABLE_COMPILE_CACHE) return undefined;
  if (env.NODE_COMPILE_CACHE) return enable().directory;
  const dir = compileCacheDir(env);
  if (dir === undefined) return undefined;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    return undefined; // A cache is an optimisation: without one, everything still works.
  }
  if (!isPrivateDirectory(dir)) return undefined;
  return enable(dir).directory;
}

function safeHome(env: Env): string | undefined {
  const fromEnv = env.HOME;
  if (fromEnv) return join(fromEnv, '.cache');
  try {
    return join(homedir(), '.cache');
  } catch {
    return undefined;
  }
}
