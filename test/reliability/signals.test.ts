/**
 * Signals other local processes can send: SIGUSR1 would make Node open its inspector on
 * 127.0.0.1:9229, where any local user can run code as ours; every long-running command ignores
 * it and lives on. SIGHUP (the terminal closed) stops the daemon as cleanly as SIGTERM.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  runCli,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectStdio } from '../helpers/mcp.js';

afterAll(() => cleanupAll());

const INSPECTOR_PORT = 9229;
const SIGUSR1_BIT = 1n << 9n;

/** Whether anything listens on the inspector's port. */
function inspectorListening(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(INSPECTOR_PORT, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Sends SIGUSR1 and waits until the process has taken it (no longer pending in /proc), or sees
 * that it never will: with --disable-sigusr1 Node keeps the signal blocked, pending for good.
 */
async function sendSigusr1(pid: number): Promise<void> {
  process.kill(pid, 'SIGUSR1');
  await eventually(() => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mask = (name: string) =>
      BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0'}`);
    const pending = ((mask('SigPnd') | mask('ShdPnd')) & SIGUSR1_BIT) !== 0n;
    const blocked = (mask('SigBlk') & SIGUSR1_BIT) !== 0n;
    return !pending || blocked ? true : undefined;
  });
}

describe.skipIf(process.platform !== 'linux')('SIGUSR1 does not open the inspector', () => {
  it('the daemon, mcp, tail and run live on, port 9229 stays closed', async () => {
    // Nothing else of ours may hold the port, or the check below would prove nothing.
    expect(await inspectorListening()).toBe(false);
    const daemon = await startDaemon();
    const env = { MCP_PROGRESS_RUNTIME_DIR: daemon.runtimeDir };

    // Same pid, replaced by a Node that blocks the signal.
    expect(readFileSync(`/proc/${daemon.child.pid}/cmdline`, 'utf8').split('\0')).toContain(
      '--disable-sigusr1',
    );
    await sendSigusr1(daemon.child.pid ?? 0);
    expect((await runCli(['status', '--json'], env)).code).toBe(0);
    expect(await inspectorListening()).toBe(false);

    const mcp = await connectStdio([], env);
    await sendSigusr1(mcp.transport.pid ?? 0);
    expect((await mcp.client.listTools()).tools.length).toBeGreaterThan(0);
    expect(await inspectorListening()).toBe(false);
    expect(mcp.stderr()).not.toContain('Debugger listening');
    await mcp.close();

    const tail = spawn(process.execPath, [BIN, 'tail', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const tailOutput = collectOutput(tail);
    const publish = (progress: number) =>
      runCli(['publish', '--token', 'sig', '--progress', String(progress)], env);
    await eventually(async () => {
      await publish(1);
      return tailOutput.stdout().includes('"sig"') ? true : undefined;
    });
    await sendSigusr1(tail.pid ?? 0);
    await publish(2);
    await eventually(() => (/"progress":2\b/.test(tailOutput.stdout()) ? true : undefined));
    expect(await inspectorListening()).toBe(false);
    expect(tailOutput.stderr()).not.toContain('Debugger listening');
    tail.kill('SIGTERM');
    expect(await waitForExit(tail)).toBe(0);

    // run passes SIGUSR1 on to its command, as before.
    const run = spawn(
      process.execPath,
      [
        BIN,
        'run',
        '--token',
        'sig-run',
        '--',
        'sh',
        '-c',
        'trap "echo got-usr1; exit 0" USR1; echo ready; while :; do sleep 0.05; done',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
    );
    const runOutput = collectOutput(run);
    await eventually(() => (runOutput.stdout().includes('ready') ? true : undefined));
    // run ends once its command does, so its exit (not /proc, gone by then) shows it took the signal.
    run.kill('SIGUSR1');
    expect(await waitForExit(run)).toBe(0);
    expect(runOutput.stdout()).toContain('got-usr1');
    expect(await inspectorListening()).toBe(false);
    expect(runOutput.stderr()).not.toContain('Debugger listening');

    expect(daemon.stderr()).not.toContain('Debugger listening');
    expect(await daemon.stop()).toBe(0);
  }, 60_000);
});

describe('SIGHUP', () => {
  it('stops the daemon like SIGTERM: daemon.json and the socket are removed', async () => {
    const daemon = await startDaemon();
    expect(existsSync(daemon.info.socket)).toBe(true);
    expect(await daemon.stop('SIGHUP')).toBe(0);
    expect(daemon.stderr()).toContain('stopped');
    expect(existsSync(join(daemon.runtimeDir, 'daemon.json'))).toBe(false);
    expect(existsSync(daemon.info.socket)).toBe(false);
  });

  it('ends `mcp` cleanly: the daemon it embedded removes daemon.json and its socket', async () => {
    const runtimeDir = tempDir();
    const mcp = await connectStdio([], { MCP_PROGRESS_RUNTIME_DIR: runtimeDir });
    // The first tool call finds no daemon and embeds one.
    await mcp.client.callTool({ name: 'list_progress', arguments: {} });
    const infoPath = join(runtimeDir, 'daemon.json');
    const info = JSON.parse(readFileSync(infoPath, 'utf8')) as { socket: string; pid: number };
    expect(info.pid).toBe(mcp.transport.pid);
    process.kill(mcp.transport.pid ?? 0, 'SIGHUP');
    await eventually(() => (existsSync(infoPath) ? undefined : true));
    expect(existsSync(info.socket)).toBe(false);
    await mcp.close();
  });
});
