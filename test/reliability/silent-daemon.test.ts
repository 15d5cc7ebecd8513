/**
 * A daemon that accepts the connection and never answers: a port held by a
 * program that is not a daemon, or a daemon stopped with SIGSTOP (the kernel
 * still accepts TCP connections for it). The gateway client bounds the
 * WebSocket handshake (`gateway_timeout`) and each request
 * (`request_timeout`), counts a handshake timeout as a failed reconnect
 * attempt, and lets go of the silent connection; `mcp-progress mcp` and
 * `tail` report it instead of hanging.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import { relayProgress } from '../../src/mcp/index.js';
import type { BridgeError } from '../../src/shared/errors.js';
import type { DaemonInfo } from '../../src/shared/locate.js';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  type RunningDaemon,
  runCli,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectStdio, connectUrl, textOf } from '../helpers/mcp.js';
import { hostV1 } from '../helpers/relay-servers.js';

const cleanups: Array<() => void | Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  cleanupAll();
});

const TIMEOUT_MS = 300;

/**
 * A real daemon that has served one WebSocket session already: it loads ws and its JSON-RPC
 * handlers at the first upgrade, which on a busy machine can take longer than TIMEOUT_MS, and
 * the short handshake timeout of these tests is meant for the silent port, not for that.
 */
async function warmDaemon(args: string[] = [], runtimeDir = tempDir()): Promise<RunningDaemon> {
  const daemon = await startDaemon(args, runtimeDir);
  await (await GatewayClient.connect({ runtimeDir })).close();
  return daemon;
}

/** A TCP server that accepts every connection and never writes a byte. */
async function silentServer() {
  const open = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    open.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => open.delete(socket));
    // Read (and drop) what the client sends, so that its hang-up is seen.
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () =>
    new Promise<void>((resolve) => {
      for (const socket of open) socket.destroy();
      server.close(() => resolve());
    });
  cleanups.push(close);
  return {
    url: `ws://127.0.0.1:${port}/ws`,
    accepted: () => accepted,
    /** Connections the client still holds open. */
    open: () => open.size,
    close,
  };
}

/** A daemon.json in `runtimeDir` that names the silent server (and a live pid: this process). */
function pointAt(runtimeDir: string, url: string, base?: DaemonInfo): void {
  const info: DaemonInfo = {
    pid: process.pid,
    version: base?.version ?? '0.0.0',
    socket: base?.socket ?? join(runtimeDir, 'bridge.sock'),
    url,
    secret: 'not-a-daemon',
  };
  writeFileSync(join(runtimeDir, 'daemon.json'), JSON.stringify(info), { mode: 0o600 });
}

/** Stops the daemon and waits until the kernel reports it stopped (state T). */
async function stopProcess(daemon: RunningDaemon): Promise<void> {
  daemon.child.kill('SIGSTOP');
  await eventually(
    () =>
      readFileSync(`/proc/${daemon.child.pid}/stat`, 'utf8').split(') ')[1]?.[0] === 'T'
        ? true
        : undefined,
    10_000,
    'the daemon to be stopped',
  );
}

const publish = (daemon: RunningDaemon, token: string, ...fields: string[]) =>
  runCli(['publish', '--socket', daemon.info.socket, '--token', token, ...fields]);

describe('a port that accepts the connection and never answers', () => {
  it('connect rejects with gateway_timeout naming the URL (secret masked), and the connection is let go', async () => {
    const silent = await silentServer();
    const url = `${silent.url}?access_token=hunter2-secret`;
    const error = await GatewayClient.connect({
      url,
      secret: 'hunter2-secret',
      handshakeTimeoutMs: TIMEOUT_MS,
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toMatchObject({ code: 'gateway_timeout' });
    expect(error?.message).toContain(
      `the daemon at ${silent.url}?access_token=*** accepted the connection but did not answer within ${TIMEOUT_MS} ms (handshakeTimeoutMs)`,
    );
    expect(error?.message).toContain('"mcp-progress status"');
    expect(error?.message).not.toContain('hunter2');
    expect(silent.accepted()).toBe(1);
    await eventually(
      () => (silent.open() === 0 ? true : undefined),
      10_000,
      'the client to hang up',
    );
  });

  it('found through daemon.json, the message names the pid to stop', async () => {
    const silent = await silentServer();
    const runtimeDir = tempDir();
    pointAt(runtimeDir, silent.url);
    const error = await GatewayClient.connect({ runtimeDir, handshakeTimeoutMs: TIMEOUT_MS }).catch(
      (e: unknown) => e as Error,
    );
    expect(error).toMatchObject({ code: 'gateway_timeout' });
    expect((error as Error).message).toContain(`stop it (pid ${process.pid}, from daemon.json)`);
  });

  it('on the local link, the message names the socket, not a port', async () => {
    const runtimeDir = tempDir();
    const gatewaySocket = join(runtimeDir, 'gateway.sock');
    const silent = createServer((socket) => {
      socket.on('error', () => {});
      socket.resume();
    });
    await new Promise<void>((resolve) => silent.listen(gatewaySocket, resolve));
    cleanups.push(() => new Promise<void>((resolve) => silent.close(() => resolve())));
    pointAt(runtimeDir, 'ws://127.0.0.1:9/ws');
    const info = JSON.parse(readFileSync(join(runtimeDir, 'daemon.json'), 'utf8')) as DaemonInfo;
    writeFileSync(join(runtimeDir, 'daemon.json'), JSON.stringify({ ...info, gatewaySocket }), {
      mode: 0o600,
    });
    const error = await GatewayClient.connect({ runtimeDir, handshakeTimeoutMs: TIMEOUT_MS }).catch(
      (e: unknown) => e as Error,
    );
    expect(error).toMatchObject({ code: 'gateway_timeout' });
    expect((error as Error).message).toContain(
      `the daemon at the local link ${gatewaySocket} accepted the connection`,
    );
    expect((error as Error).message).toContain('another program listens on its socket');
  });

  it('the options are checked before connecting: invalid_option names the option', async () => {
    for (const [name, value] of [
      ['handshakeTimeoutMs', 0],
      ['handshakeTimeoutMs', Number.POSITIVE_INFINITY],
      ['requestTimeoutMs', -1],
      ['requestTimeoutMs', 2 ** 31],
      ['reconnectTimeoutMs', Number.NaN],
    ] as const) {
      const error = await GatewayClient.connect({
        url: 'ws://127.0.0.1:1/ws',
        secret: 's',
        [name]: value,
      }).catch((e: unknown) => e as Error);
      expect(error, `${name} ${value}`).toMatchObject({ code: 'invalid_option' });
      expect((error as Error).message).toContain(`GatewayClient option ${name}`);
    }
  });

  it('a reconnect attempt that meets it times out and is retried: the client reaches the daemon started after (reconnectTimeoutMs Infinity, as tail)', async () => {
    const runtimeDir = tempDir();
    const first = await warmDaemon([], runtimeDir);
    const states: string[] = [];
    const client = await GatewayClient.connect({
      runtimeDir,
      handshakeTimeoutMs: TIMEOUT_MS,
      reconnectTimeoutMs: Number.POSITIVE_INFINITY,
      onState: (state) => states.push(state),
    });
    cleanups.push(() => client.close());
    const seen: number[] = [];
    await client.subscribe({ progressToken: 'through-silence', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') seen.push(n.params.progress);
    });
    await publish(first, 'through-silence', '--progress', '1');
    await eventually(() => (seen.length === 1 ? true : undefined), 10_000, 'the first value');
    await first.stop();
    // The port daemon.json names is now held by a program that never answers (a reused port).
    const silent = await silentServer();
    pointAt(runtimeDir, silent.url, first.info);
    await eventually(
      () => (silent.accepted() > 0 ? true : undefined),
      10_000,
      'a reconnect attempt on the silent port',
    );
    const second = await warmDaemon([], runtimeDir);
    await eventually(
      () => (states.at(-1) === 'connected' && states.length === 3 ? true : undefined),
      15_000,
      'the reconnect to the new daemon',
    );
    await eventually(
      async () =>
        ((await client.get('through-silence').catch(() => undefined))?.subscribers ?? 0) > 0
          ? true
          : undefined,
      10_000,
      'the resubscribe',
    );
    await publish(second, 'through-silence', '--progress', '2');
    await eventually(() => (seen.length === 2 ? true : undefined), 10_000, 'the value after');
    expect(seen).toEqual([1, 2]);
    expect(states).toEqual(['connected', 'disconnected', 'connected']);
    await eventually(() => (silent.open() === 0 ? true : undefined), 10_000, 'silent port let go');
    await client.close();
    await second.stop();
  });

  it('with a finite reconnectTimeoutMs the client gives up (gateway_lost) and holds no connection open after', async () => {
    const runtimeDir = tempDir();
    const daemon = await warmDaemon([], runtimeDir);
    const client = await GatewayClient.connect({
      runtimeDir,
      handshakeTimeoutMs: TIMEOUT_MS,
      reconnectTimeoutMs: 2000,
    });
    const ended: BridgeError[] = [];
    await client.subscribe(
      { progressToken: 'given-up', minIntervalMs: 0 },
      () => {},
      (error) => ended.push(error),
    );
    const silent = await silentServer();
    await daemon.stop();
    pointAt(runtimeDir, silent.url, daemon.info);
    await eventually(() => (ended.length === 1 ? true : undefined), 15_000, 'gateway_lost');
    expect(ended.map((error) => error.code)).toEqual(['gateway_lost']);
    // Found through daemon.json, the daemon that went away is still named (its local link).
    expect(ended[0]?.message).toContain(
      `the daemon at the local link ${daemon.info.gatewaySocket}`,
    );
    expect(silent.accepted()).toBeGreaterThan(0);
    // No attempt is left hanging on the silent port (it would keep the process alive).
    await eventually(() => (silent.open() === 0 ? true : undefined), 10_000, 'silent port let go');
    await client.close();
  });
});

describe('closing during a handshake', () => {
  it('close() ends a reconnect attempt still in its handshake at once, not at its timeout', async () => {
    const runtimeDir = tempDir();
    const daemon = await startDaemon([], runtimeDir);
    const client = await GatewayClient.connect({
      runtimeDir,
      handshakeTimeoutMs: 600_000,
      reconnectTimeoutMs: Number.POSITIVE_INFINITY,
    });
    const silent = await silentServer();
    await daemon.stop();
    pointAt(runtimeDir, silent.url, daemon.info);
    await eventually(
      () => (silent.accepted() > 0 && silent.open() > 0 ? true : undefined),
      15_000,
      'a reconnect attempt waiting on the silent port',
    );
    await client.close();
    await eventually(() => (silent.open() === 0 ? true : undefined), 10_000, 'silent port let go');
  });
});

describe('a daemon stopped with SIGSTOP', () => {
  it('a request rejects with request_timeout, a new connect with gateway_timeout; resumed, the same connection answers and delivers again', async () => {
    const daemon = await warmDaemon();
    const states: string[] = [];
    const client = await GatewayClient.connect({
      runtimeDir: daemon.runtimeDir,
      requestTimeoutMs: TIMEOUT_MS,
      handshakeTimeoutMs: TIMEOUT_MS,
      onState: (state) => states.push(state),
    });
    const seen: number[] = [];
    await client.subscribe({ progressToken: 'paused', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') seen.push(n.params.progress);
    });
    await publish(daemon, 'paused', '--progress', '1');
    await eventually(() => (seen.length === 1 ? true : undefined), 10_000, 'the first value');
    await stopProcess(daemon);
    try {
      const timedOut = await client.get('paused').catch((e: unknown) => e as Error);
      expect(timedOut).toMatchObject({ code: 'request_timeout' });
      expect((timedOut as Error).message).toContain(
        `the daemon at the local link ${daemon.info.gatewaySocket} did not answer progress/get within ${TIMEOUT_MS} ms (requestTimeoutMs)`,
      );
      expect((timedOut as Error).message).toContain('"mcp-progress status"');
      // The kernel accepts a new connection for the stopped daemon; nobody answers it.
      const refused = await GatewayClient.connect({
        runtimeDir: daemon.runtimeDir,
        handshakeTimeoutMs: TIMEOUT_MS,
      }).catch((e: unknown) => e as Error);
      expect(refused).toMatchObject({ code: 'gateway_timeout' });
      expect((refused as Error).message).toContain(
        `the daemon at the local link ${daemon.info.gatewaySocket} accepted the connection but did not answer within ${TIMEOUT_MS} ms`,
      );
      expect((refused as Error).message).toContain(`pid ${daemon.child.pid}`);
    } finally {
      daemon.child.kill('SIGCONT');
    }
    // Resumed: the connection was kept (the late answer to the timed-out request is dropped by id).
    expect((await client.get('paused'))?.last?.progress).toBe(1);
    await publish(daemon, 'paused', '--progress', '2');
    await eventually(() => (seen.length === 2 ? true : undefined), 10_000, 'the value after');
    expect(seen).toEqual([1, 2]);
    expect(states).toEqual(['connected']);
    const again = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    expect((await again.get('paused'))?.last?.progress).toBe(2);
    await again.close();
    await client.close();
    await daemon.stop();
  });
});

describe('mcp-progress mcp, relayProgress and tail against a silent daemon', () => {
  it('list_progress answers with an error naming the problem instead of hanging', async () => {
    const silent = await silentServer();
    const runtimeDir = tempDir();
    pointAt(runtimeDir, silent.url);
    const mcp = await connectStdio(['--runtime-dir', runtimeDir]);
    cleanups.push(() => mcp.close());
    const result = await mcp.client.callTool({ name: 'list_progress', arguments: {} }, undefined, {
      timeout: 25_000,
    });
    expect(result.isError).toBe(true);
    const text = JSON.stringify(result.content);
    expect(text).toContain(
      `the daemon at ${silent.url} accepted the connection but did not answer`,
    );
    expect(text).toContain('mcp-progress status');
    await mcp.close();
  });

  it('relayProgress runs the tool without progress, with one warning, and lets the silent connection go', async () => {
    const silent = await silentServer();
    const warnings: string[] = [];
    const server = await hostV1(async (_args, extra) => {
      const relay = await relayProgress(extra, {
        url: silent.url,
        secret: 'not-a-daemon',
        socket: join(tempDir(), 'bridge.sock'),
        connectTimeoutMs: TIMEOUT_MS,
        onWarning: (message) => warnings.push(message),
      });
      await relay.close();
      return `relaying=${relay.relaying}`;
    });
    cleanups.push(() => server.close());
    const mcp = await connectUrl(server.url);
    cleanups.push(() => mcp.close());
    const result = await mcp.client.callTool(
      { name: 'render', arguments: { steps: 1 } },
      undefined,
      { onprogress: () => {}, timeout: 25_000 },
    );
    expect(textOf(result)).toBe('relaying=false');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('progress is not relayed');
    expect(silent.accepted()).toBe(1);
    // The attempt does not stay open on the silent port after the call.
    await eventually(() => (silent.open() === 0 ? true : undefined), 10_000, 'silent port let go');
  });

  it('tail says so once, waits, and follows the stream once a daemon starts', async () => {
    const silent = await silentServer();
    const runtimeDir = tempDir();
    pointAt(runtimeDir, silent.url);
    const child = spawn(
      process.execPath,
      [BIN, 'tail', '--runtime-dir', runtimeDir, 'after-silence', '--json'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    cleanups.push(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const output = collectOutput(child);
    const exit = waitForExit(child);
    await eventually(
      () => (output.stderr().includes('waiting for a daemon') ? true : undefined),
      20_000,
      'tail to say it waits',
    );
    expect(output.stderr()).toContain('accepted the connection but did not answer');
    expect(child.exitCode).toBeNull();
    const daemon = await startDaemon([], runtimeDir);
    const watcher = await GatewayClient.connect({ runtimeDir });
    await eventually(
      async () => (((await watcher.get('after-silence'))?.subscribers ?? 0) > 0 ? true : undefined),
      20_000,
      'tail to subscribe',
    );
    await watcher.close();
    await publish(daemon, 'after-silence', '--done', '--status', 'ok');
    expect(await exit).toBe(0);
    expect(output.stdout()).toContain('notifications/progress/done');
    expect(output.stderr().split('waiting for a daemon').length - 1).toBe(1);
    await daemon.stop();
  });
});
