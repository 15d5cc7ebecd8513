/**
 * Windows has no process groups: `run` stops CMD and everything it started by walking the tree.
 * `taskkill /T /F` does that on Windows; where taskkill lacks /T (Wine's), the tree is read from
 * `wmic process` (parent and process ids) and each process is terminated, CMD first so that it
 * starts nothing more.
 */
import { spawnSync } from 'node:child_process';

/** Terminates the process `pid` and all its descendants, at once (Windows has no SIGTERM). */
export function stopTree(pid: number): void {
  const taskkill = spawnSync('taskkill', ['/T', '/F', '/PID', String(pid)], {
    stdio: 'ignore',
    windowsHide: true,
  });
  if (taskkill.status === 0) return;
  for (const member of [pid, ...descendantsOf(pid)]) {
    try {
      process.kill(member, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}

/** Every descendant of `pid` that is running now, as `wmic process` lists them. */
function descendantsOf(pid: number): number[] {
  // stdin not a pipe: Wine's wmic waits on a pipe for more input and never answers (run hung
  // here); and bounded, since a run waiting on a cancel must not hang on a listing.
  const listing = spawnSync('wmic', ['process', 'get', 'ParentProcessId,ProcessId'], {
    windowsHide: true,
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 10_000,
  });
  if (listing.status !== 0 || listing.stdout === null) return [];
  const bytes = listing.stdout;
  // wmic writes UTF-16 when its output is not a console.
  const text = bytes.includes(0) ? bytes.toString('utf16le') : bytes.toString('utf8');
  const children = new Map<number, number[]>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(\d+)\s+(\d+)\s*$/.exec(line.replace(/^\uFEFF/, ''));
    if (match === null) continue;
    const [parent, child] = [Number(match[1]), Number(match[2])];
    children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      if (child === pid || found.includes(child)) continue;
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}
