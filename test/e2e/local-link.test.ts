/**
 * The local link: the daemon serves its gateway on <runtime-dir>/gateway.sock too, and the
 * gateway client takes it when it found the daemon through daemon.json. Which transport a
 * client used is read from the daemon's side: status counts the sessions on the local link
 * (localLinkSessions) among all of them (sessions), asked on the worker socket, which opens none.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, lstatSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  GatewayClient,
  type GatewayClientOptions,
} from '../../src/gateway-client/gateway-client.js';
import type { DaemonStatus } from '../../src/protocol/frames.js';
import { socketRequest } from '../../src/shared/socket-request.js';
import {
  BIN,
  collectOutput,
  eventually,
  ROOT,
  type RunningDaemon,
  startDaemon,
  tempDir,
} from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectStdio } from '../helpers/mcp.js';
import { asOtherUser, OTHER_USER, otherUser, TRY_CONNECT } from '../helpers/other-user.js';

const daemon = daemonForFile();

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

async function status(of: RunningDaemon = daemon): Promise<DaemonStatus> {
  const reply = await socketRequest({
    socketPath: of.info.socket,
    type: 'status',
    data: {},
    isReply: (envelope) => envelope.type === 'status',
    timeoutMs: 5000,
  });
  return reply.data as DaemonStatus;
}

/** Waits until the daemon has `sessions` sessions, `local` of them on the local link. */
async function expectSessions(sessions: number, local: number, of = daemon): Promise<void> {
  let seen: { sessions: number; local: number } | undefined;
  await eventually(async () => {
    const now = await status(of);
    seen = { sessions: now.sessions, local: now.localLinkSessions };
    return seen.sessions === sessions && seen.local === local ? true : undefined;
  }, 5000).catch(() => {});
  expect(seen).toEqual({ sessions, local });
}

/** Connects a gateway client, sees its session on the daemon as `on`, and closes it. */
async function expectClientOn(
  options: GatewayClientOptions,
  on: 'tcp' | 'local link',
  of = daemon,
): Promise<void> {
  const client = await GatewayClient.connect({ ...options, reconnect: false });
  try {
    await expectSessions(1, on === 'tcp' ? 0 : 1, of);
  } finally {
    await client.close();
  }
}

const gatewaySocket = () => join(daemon.runtimeDir, 'gateway.sock');

describe('the daemon', () => {
  it('publishes gateway.sock in daemon.json: a socket, 0600, ours, in the 0700 runtime dir', () => {
    expect(daemon.info.gatewaySocket).toBe(gatewaySocket());
    const stat = lstatSync(gatewaySocket());
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
    expect(stat.uid).toBe(process.getuid?.());
    expect(statSync(daemon.runtimeDir).mode & 0o777).toBe(0o700);
  });

  it('answers there only to Host localhost, with no Origin, and the secret', async () => {
    const upgrade = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request({
          socketPath: gatewaySocket(),
          path: '/ws',
          headers: {
            connection: 'Upgrade',
            upgrade: 'websocket',
            'sec-websocket-version': '13',
            'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
            'sec-websocket-protocol': 'mcp-progress.v1',
            authorization: `Bearer ${daemon.info.secret}`,
            ...headers,
          },
        });
        req.on('upgrade', (response, socket) => {
          socket.destroy();
          resolve(response.statusCode ?? 0);
        });
        req.on('response', (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await upgrade({})).toBe(101);
    // The port's own name is not the local link's.
    expect(await upgrade({ host: new URL(daemon.info.url).host })).toBe(421);
    expect(await upgrade({ origin: `http://${new URL(daemon.info.url).host}` })).toBe(403);
    expect(await upgrade({ authorization: 'Bearer wrong' })).toBe(401);
  });
});

describe('clients that found the daemon through daemon.json take the local link', () => {
  it('mcp-progress mcp', async () => {
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    try {
      // It connects at its first call.
      await mcp.client.callTool({ name: 'list_progress', arguments: {} });
      await expectSessions(1, 1);
    } finally {
      await mcp.close();
    }
    await expectSessions(0, 0);
  });

  it('mcp-progress tail', async () => {
    const child = spawn(process.execPath, [BIN, 'tail', '--runtime-dir', daemon.runtimeDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    collectOutput(child);
    await expectSessions(1, 1);
    child.kill('SIGTERM');
    await expectSessions(0, 0);
  });

  it('relayProgress', async () => {
    const relay = holdRelay([daemon.runtimeDir]);
    await relay.relaying;
    await expectSessions(1, 1);
    relay.child.stdin?.end();
    await expectSessions(0, 0);
  });
});

describe('a local link whose file was removed', () => {
  it('leaves clients the TCP port', async () => {
    const own = await startDaemon();
    try {
      rmSync(join(own.runtimeDir, 'gateway.sock'));
      await expectClientOn({ runtimeDir: own.runtimeDir }, 'tcp', own);
    } finally {
      await own.stop();
    }
  });
});

describe('a client given an explicit URL keeps TCP', () => {
  it('the gateway client', async () => {
    await expectClientOn({ url: daemon.info.url, secret: daemon.info.secret }, 'tcp');
    // The same client without the URL takes the local link.
    await expectClientOn({ runtimeDir: daemon.runtimeDir }, 'local link');
  });

  it('relayProgress', async () => {
    const relay = holdRelay([daemon.runtimeDir, daemon.info.url, daemon.info.secret]);
    await relay.relaying;
    await expectSessions(1, 0);
    relay.child.stdin?.end();
    await expectSessions(0, 0);
  });
});

describe.skipIf(otherUser.skip)(`another local user (${OTHER_USER})`, () => {
  beforeAll(() => otherUser.require());
  it('cannot connect to gateway.sock, even with the runtime dir opened up', () => {
    expect(asOtherUser(TRY_CONNECT, gatewaySocket())).toBe('PermissionError');
    const { mode } = statSync(daemon.runtimeDir);
    chmodSync(daemon.runtimeDir, 0o755);
    try {
      expect(asOtherUser(TRY_CONNECT, gatewaySocket())).toBe('PermissionError');
    } finally {
      chmodSync(daemon.runtimeDir, mode & 0o777);
    }
  });
});

describe('its file', () => {
  it('is removed at stop, and one left by kill -9 is replaced at the next start', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon([], runtimeDir);
    const path = join(runtimeDir, 'gateway.sock');
    await first.stop('SIGKILL');
    expect(lstatSync(path).isSocket()).toBe(true);

    const second = await startDaemon([], runtimeDir);
    expect(second.info.gatewaySocket).toBe(path);
    // (Its inode may be the killed one's, freed and reused: what it answers says whose it is.)
    expect(lstatSync(path).mode & 0o777).toBe(0o600);
    await expectClientOn({ runtimeDir }, 'local link', second);
    expect(await second.stop()).toBe(0);
    expect(() => lstatSync(path)).toThrow(/ENOENT/);
  });

  it('goes with the runtime dir when a daemon whose files were removed yields it to a new one', async () => {
    const runtimeDir = tempDir();
    const old = await startDaemon([], runtimeDir);
    rmSync(old.info.socket);
    rmSync(join(runtimeDir, 'daemon.json'));
    const next = await startDaemon([], runtimeDir);
    const path = join(runtimeDir, 'gateway.sock');
    expect(next.info.gatewaySocket).toBe(path);
    await expectClientOn({ runtimeDir }, 'local link', next);
    // The old one's stop leaves the new one's socket in place.
    expect(await old.stop()).toBe(0);
    await expectClientOn({ runtimeDir }, 'local link', next);
    await next.stop();
  });

  it('holds the session cap with TCP: --max-sessions counts both', async () => {
    const capped = await startDaemon(['--max-sessions', '1']);
    const tcp = await GatewayClient.connect({
      url: capped.info.url,
      secret: capped.info.secret,
      reconnect: false,
    });
    try {
      await expect(
        GatewayClient.connect({ runtimeDir: capped.runtimeDir, reconnect: false }),
      ).rejects.toMatchObject({ code: 'gateway_refused', message: /--max-sessions/ });
    } finally {
      await tcp.close();
    }
    await capped.stop();
  });
});

describe('the limits of TCP hold there', () => {
  it('a silent connection is cut at --handshake-timeout-ms, a session that does not pong at --pong-timeout-ms', async () => {
    const limited = await startDaemon([
      '--handshake-timeout-ms',
      '300',
      '--ping-interval-ms',
      '100',
      '--pong-timeout-ms',
      '300',
    ]);
    const path = limited.info.gatewaySocket as string;
    const silent = connect({ path });
    await new Promise((resolve) => silent.once('connect', resolve));
    await new Promise((resolve) => silent.once('close', resolve));
    // No pong: ws answers pings itself unless told not to.
    const deaf = new WebSocket('ws://localhost/ws', 'mcp-progress.v1', {
      headers: { authorization: `Bearer ${limited.info.secret}` },
      createConnection: () => connect({ path }),
      autoPong: false,
    });
    await new Promise((resolve, reject) => {
      deaf.once('open', resolve);
      deaf.once('error', reject);
    });
    expect(await new Promise((resolve) => deaf.once('close', resolve))).toBe(1006);
    const figures = await status(limited);
    expect(figures.counters).toMatchObject({ handshakeTimeouts: 1, keepaliveTimeouts: 1 });
    expect(figures.sessions).toBe(0);
    await limited.stop();
  });
});

/** A relay held in a process of its own (test/fixtures/relay-hold.mjs). */
function holdRelay(args: string[]): { child: ChildProcess; relaying: Promise<void> } {
  const child = spawn(process.execPath, [join(ROOT, 'test/fixtures/relay-hold.mjs'), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MCP_PROGRESS_SOCKET: '' },
  });
  children.push(child);
  const output = collectOutput(child);
  const relaying = eventually(
    () => (output.stdout().includes('relaying') ? true : undefined),
    10_000,
    'the relay',
  ).then(() => expect(output.stdout()).toBe('relaying\n'));
  return { child, relaying };
}
