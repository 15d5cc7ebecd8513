/**
 * The backplane across a real network path: with root and `ip netns`, each daemon runs in a
 * network namespace of its own, joined to nats-server by a veth pair and a bridge, so its
 * traffic crosses interfaces, and a host's link can be taken down. Outside CI, skipped and said
 * so where namespaces cannot be made (not root, no `ip`, a container without CAP_NET_ADMIN);
 * under CI that fails.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  DAEMON_ENV,
  daemonCommand,
  eventually,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { tool } from '../helpers/tools.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import { doneOf, fresh, GRACE_MS, notificationsOf, sawProgress, subscribe } from './hosts.js';
import { freePort, NATS_SERVER, natsServer } from './nats-server.js';

const TAG = `mb${process.pid % 100_000}`;
const SUBNET = `10.231.${100 + (process.pid % 100)}`;
const BRIDGE = `${TAG}br`;

function ip(...args: string[]): boolean {
  return spawnSync('ip', args, { stdio: 'ignore' }).status === 0;
}

/** Whether this machine lets the test make namespaces (tried, then undone). */
function namespacesAvailable(): boolean {
  const probe = `${TAG}probe`;
  if (!ip('netns', 'add', probe)) return false;
  ip('netns', 'del', probe);
  return true;
}

const netns = tool('ip netns', {
  debian: 'iproute2',
  root: true,
  why: 'a network namespace per daemon; a container also needs CAP_NET_ADMIN',
  check: namespacesAvailable,
});

interface NsHost {
  readonly name: string;
  readonly netns: string;
  /** The veth end in the root namespace, on the bridge: down cuts this host off. */
  readonly link: string;
  readonly address: string;
  child?: ChildProcess;
  stderr: string;
  info?: DaemonInfo;
}

function makeHost(index: number, name: string): NsHost {
  const netns = `${TAG}-${index}`;
  const link = `${TAG}h${index}`;
  const inside = `${TAG}n${index}`;
  const address = `${SUBNET}.${index + 10}`;
  const steps: string[][] = [
    ['netns', 'add', netns],
    ['link', 'add', link, 'type', 'veth', 'peer', 'name', inside],
    ['link', 'set', inside, 'netns', netns],
    ['link', 'set', link, 'master', BRIDGE],
    ['link', 'set', link, 'up'],
    ['netns', 'exec', netns, 'ip', 'addr', 'add', `${address}/24`, 'dev', inside],
    ['netns', 'exec', netns, 'ip', 'link', 'set', inside, 'up'],
    ['netns', 'exec', netns, 'ip', 'link', 'set', 'lo', 'up'],
  ];
  for (const step of steps) {
    if (!ip(...step)) throw new Error(`ip ${step.join(' ')} failed`);
  }
  return { name, netns, link, address, stderr: '' };
}

async function startIn(host: NsHost, natsUrl: string): Promise<DaemonInfo> {
  const runtimeDir = tempDir();
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      host.netns,
      ...daemonCommand(
        runtimeDir,
        '--host',
        host.address,
        // The gateway on the namespace's own address, reachable only over the test's bridge.
        '--allow-remote',
        '--nats',
        natsUrl,
        '--nats-name',
        host.name,
        '--abandon-grace-ms',
        String(GRACE_MS),
      ),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: DAEMON_ENV },
  );
  host.child = child;
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    host.stderr += text;
  });
  await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`daemon ${host.name} exited: ${host.stderr}`);
      return host.stderr.includes('backplane: joined') ? true : undefined;
    },
    20_000,
    `${host.name} to join`,
  );
  const infoPath = join(runtimeDir, 'daemon.json');
  if (!existsSync(infoPath)) throw new Error('no daemon.json');
  host.info = JSON.parse(readFileSync(infoPath, 'utf8')) as DaemonInfo;
  return host.info;
}

describe.skipIf(netns.skip || natsServer.skip)('the backplane across network namespaces', () => {
  const hosts: NsHost[] = [];
  let nats: ChildProcess | undefined;
  let natsUrl = '';
  let onB: GatewayClient;
  let worker: RawWorker;

  beforeAll(async () => {
    natsServer.require();
    netns.require();
    if (!ip('link', 'add', BRIDGE, 'type', 'bridge')) throw new Error('cannot make a bridge');
    ip('addr', 'add', `${SUBNET}.1/24`, 'dev', BRIDGE);
    ip('link', 'set', BRIDGE, 'up');
    hosts.push(makeHost(1, 'ns-a'), makeHost(2, 'ns-b'));
    const port = await freePort();
    natsUrl = `nats://${SUBNET}.1:${port}`;
    nats = spawn(
      NATS_SERVER as string,
      ['-a', `${SUBNET}.1`, '-p', String(port), '-js', '-sd', tempDir('nats-store-')],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let natsLog = '';
    nats.stderr?.setEncoding('utf8').on('data', (text: string) => {
      natsLog += text;
    });
    await eventually(() => (natsLog.includes('Server is ready') ? true : undefined), 15_000);
    const [a, b] = hosts as [NsHost, NsHost];
    const [infoA, infoB] = await Promise.all([startIn(a, natsUrl), startIn(b, natsUrl)]);
    onB = await connectGateway(infoB);
    worker = await rawWorker(infoA.socket);
  }, 60_000);

  afterAll(async () => {
    worker?.destroy();
    await onB?.close();
    for (const host of hosts) {
      host.child?.kill('SIGTERM');
      if (host.child) await waitForExit(host.child);
    }
    nats?.kill('SIGTERM');
    if (nats) await waitForExit(nats);
    for (const host of hosts) {
      ip('link', 'del', host.link);
      ip('netns', 'del', host.netns);
    }
    ip('link', 'del', BRIDGE);
    cleanupAll();
  });

  it('a worker in namespace A reaches a session in namespace B through veth and a bridge', async () => {
    const token = fresh('netns');
    await subscribe(onB, token, 9);
    worker.send('progress', { v: 1, progressToken: token, progress: 1, total: 2, message: 'one' });
    worker.send('progress', { v: 1, progressToken: token, progress: 2, total: 2 });
    worker.send('done', { v: 1, progressToken: token });
    await doneOf(onB, 9);
    expect(notificationsOf(onB, 9).map((n) => n.params)).toEqual([
      { progressToken: 9, progress: 1, total: 2, message: 'one' },
      { progressToken: 9, progress: 2, total: 2 },
      { progressToken: 9, status: 'ok' },
    ]);
  });

  it("host A's link goes down: B ends its stream as abandoned after the grace", async () => {
    const token = fresh('netns-cut');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    await sawProgress(onB, token, 1);
    const a = hosts[0] as NsHost;
    expect(ip('link', 'set', a.link, 'down')).toBe(true);
    try {
      const done = await doneOf(onB, token);
      expect(done).toMatchObject({ status: 'abandoned' });
      expect(String(done.message)).toContain('host ns-a left the backplane (no heartbeat');
    } finally {
      ip('link', 'set', a.link, 'up');
    }
  });
});
