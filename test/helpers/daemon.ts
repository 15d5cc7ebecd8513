/** Starts the real built CLI as a daemon in a temporary runtime dir, and cleans up after. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, expect, vi } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = join(ROOT, 'bin/mcp-progress');

export interface RunningDaemon {
  readonly runtimeDir: string;
  readonly info: DaemonInfo;
  readonly child: ChildProcess;
  stderr(): string;
  /** SIGTERM, and wait for exit; returns the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const cleanups: Array<() => void> = [];

export function tempDir(prefix = 'mcp-progress-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Kills every daemon and removes every temporary directory a test made. */
export function cleanupAll(): void {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
}

export function waitForExit(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolveExit) => child.once('exit', (code) => resolveExit(code)));
}

/** The command line of a daemon in RUNTIME_DIR on an ephemeral gateway port: node, BIN, its flags. */
export function daemonCommand(runtimeDir: string, ...flags: string[]): string[] {
  return [process.execPath, BIN, 'daemon', '--runtime-dir', runtimeDir, '--port', '0', ...flags];
}

/** The environment of a daemon a test spawns itself: no socket or token of the test's own leaks in. */
export const DAEMON_ENV = { ...process.env, MCP_PROGRESS_SOCKET: '' };

/** Waits (up to a minute) until a daemon the test spawned itself says `ready:` on stderr. */
export async function untilReady(output: Pick<Output, 'stderr'>): Promise<void> {
  await eventually(
    () => (output.stderr().includes('ready:') ? true : undefined),
    60_000,
    'the daemon to be ready',
  );
}

export async function startDaemon(
  args: string[] = [],
  runtimeDir = tempDir(),
  /** Another local user to run it as (the test must run as root). */
  user?: { uid: number; gid: number },
  /** Added to its environment (a test hook's NODE_OPTIONS, say). */
  env: Record<string, string> = {},
): Promise<RunningDaemon> {
  const [node, ...command] = daemonCommand(runtimeDir, ...args);
  const child = spawn(node as string, command, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, MCP_PROGRESS_SOCKET: '', MCP_PROGRESS_TOKEN: '', ...env },
    ...user,
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const infoPath = join(runtimeDir, 'daemon.json');
  const deadline = Date.now() + 15_000;
  while (!stderr.includes('ready:')) {
    if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`daemon did not become ready: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  if (!existsSync(infoPath)) throw new Error('daemon reported ready without daemon.json');
  const info = JSON.parse(readFileSync(infoPath, 'utf8')) as DaemonInfo;
  return {
    runtimeDir,
    info,
    child,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      child.kill(signal);
      return waitForExit(child);
    },
  };
}

/** A child's stdout and stderr, collected as text while it runs. */
export interface Output {
  stdout(): string;
  stderr(): string;
}

export function collectOutput(child: ChildProcess): Output {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    stdout += text;
  });
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  return { stdout: () => stdout, stderr: () => stderr };
}

/**
 * Daemon flags for tests that publish with one-shot `mcp-progress publish`: it connects once
 * per frame, so between two frames a stream has no publisher, and on a loaded machine the
 * default 30 s grace could end it as abandoned mid-test.
 */
export const PATIENT_DAEMON_ARGS = ['--abandon-grace-ms', '600000'];

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real binary and collects its output. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<CliResult> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: '', MCP_PROGRESS_TOKEN: '', ...env },
    });
    const output = collectOutput(child);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mcp-progress ${args.join(' ')} timed out; stderr: ${output.stderr()}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout: output.stdout(), stderr: output.stderr() });
    });
  });
}

/** Runs `mcp-progress daemon` with `flags` in a fresh runtime dir, for a start that should be refused. */
export function daemonStart(flags: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(['daemon', '--runtime-dir', tempDir(), '--port', '0', ...flags], env);
}

/** Polls until `check` returns a value other than undefined. */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
  /** What was awaited; a function is asked at the timeout, so it can say what was seen by then. */
  what: string | (() => string) = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** `mcp-progress daemon` run to its end on `runtimeDir` (and `socket`), as a second daemon is. */
export function runSecondDaemon(runtimeDir: string, socket?: string): Promise<CliResult> {
  const socketArgs = socket === undefined ? [] : ['--socket', socket];
  return runCli(['daemon', '--runtime-dir', runtimeDir, ...socketArgs, '--port', '0']);
}

export interface RacingDaemon {
  readonly child: ChildProcess;
  readonly output: Output;
  readonly socket: string | undefined;
}

/**
 * Starts one daemon per entry of `sockets` at once on one runtime dir (an entry's own --socket,
 * or the dir's default), and waits until each is ready or has exited.
 */
export async function raceDaemons(
  runtimeDir: string,
  sockets: ReadonlyArray<string | undefined>,
): Promise<{ all: RacingDaemon[]; ready: RacingDaemon[]; exited: RacingDaemon[] }> {
  const all = sockets.map((socket): RacingDaemon => {
    const socketArgs = socket === undefined ? [] : ['--socket', socket];
    const child = spawn(
      process.execPath,
      [BIN, 'daemon', '--runtime-dir', runtimeDir, '--port', '0', ...socketArgs],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
    );
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    return { child, output: collectOutput(child), socket };
  });
  const outcomes = await Promise.all(
    all.map(
      ({ child, output }) =>
        new Promise<'ready' | 'exited'>((resolveOutcome) => {
          child.stderr?.on('data', () => {
            if (output.stderr().includes('ready:')) resolveOutcome('ready');
          });
          child.once('exit', () => resolveOutcome('exited'));
        }),
    ),
  );
  return {
    all,
    ready: all.filter((_, i) => outcomes[i] === 'ready'),
    exited: all.filter((_, i) => outcomes[i] === 'exited'),
  };
}

/** Ends every racer still running (SIGTERM) and waits for all of them. */
export async function endRace(racers: readonly RacingDaemon[]): Promise<void> {
  for (const { child } of racers)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  await Promise.all(racers.map(({ child }) => waitForExit(child)));
}

/**
 * One `mcp-progress publish` with `args` to the daemon `where` names (`--socket PATH` or
 * `--runtime-dir DIR`), which must take it: exit 0 and nothing on stderr.
 */
export async function publishAccepted(where: string[], ...args: string[]): Promise<void> {
  const result = await runCli(['publish', ...where, ...args]);
  expect(result, `publish ${args.join(' ')}`).toMatchObject({ code: 0, stderr: '' });
}

/**
 * For a file whose tests each start several real processes, slow on a machine shared with other
 * test runs: long test and hook timeouts, every daemon and temporary dir cleaned up after the
 * file. Returns a runCli that waits as long.
 */
export function slowProcessTests(): (
  args: string[],
  env?: Record<string, string>,
) => Promise<CliResult> {
  vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });
  afterAll(() => cleanupAll());
  return (args, env = {}) => runCli(args, env, 120_000);
}

/**
 * `mcp-progress daemon` with `args` on a fresh runtime dir must refuse its command line before
 * starting: exit 2, and a message on stderr containing `says`.
 */
export async function expectDaemonRefuses(args: string[], says: string): Promise<void> {
  const result = await runCli(['daemon', '--runtime-dir', tempDir(), ...args]);
  expect(result.stderr).toContain(says);
  expect(result.code, result.stderr).toBe(2);
}
