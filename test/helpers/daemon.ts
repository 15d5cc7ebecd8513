/** Starts the real built CLI as a daemon in a temporary runtime dir, and cleans up after. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
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

export async function startDaemon(
  args: string[] = [],
  runtimeDir = tempDir(),
): Promise<RunningDaemon> {
  const child = spawn(
    process.execPath,
    [BIN, 'daemon', '--runtime-dir', runtimeDir, '--port', '0', ...args],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: '', MCP_PROGRESS_TOKEN: '' },
    },
  );
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
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
