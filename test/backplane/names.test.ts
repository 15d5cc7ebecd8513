/**
 * Names on the backplane and the rights of a NATS user, with real daemons and a real
 * nats-server -js (docs/BACKPLANE.md, "Security" and "Names"): default names that differ per
 * daemon, a second live daemon under a name in use refused, a host confined by the permissions
 * `mcp-progress nats-permissions` prints that cannot forge another's values or dones, and the
 * caps on hosts and on each host's streams.
 */
import { connect as natsConnect } from 'nats';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tokenSubject } from '../../src/daemon/backplane-names.js';
import { MAX_HOST_NAME_BYTES } from '../../src/protocol/limits.js';
import { BACKPLANE_MAX_HOSTS, BACKPLANE_MAX_STREAMS_PER_HOST } from '../../src/shared/defaults.js';
import {
  cleanupAll,
  eventually,
  expectDaemonRefuses,
  type RunningDaemon,
  runCli,
  startDaemon,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import {
  doneOf,
  fresh,
  GRACE_MS,
  joined,
  notificationsOf,
  progressOf,
  sawProgress,
  subscribe,
} from './hosts.js';
import { natsServer, type RunningNats, startNats } from './nats-server.js';

let open: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of open.reverse()) await close();
  open = [];
  cleanupAll();
});

async function nats(config?: string): Promise<RunningNats> {
  const server = await startNats(config === undefined ? {} : { config });
  open.push(() => server.stop());
  return server;
}

/** A daemon on the backplane with its own runtime dir; `name` undefined: the default name. */
async function daemon(
  url: string,
  name?: string,
  join = true,
  graceMs = GRACE_MS,
): Promise<RunningDaemon> {
  const args = ['--nats', url, '--abandon-grace-ms', String(graceMs)];
  if (name !== undefined) args.push('--nats-name', name);
  const started = await startDaemon(args);
  open.push(() => started.stop());
  if (join) await joined(started, name ?? 'a daemon with the default name');
  return started;
}

async function session(of: RunningDaemon): Promise<GatewayClient> {
  const gateway = await connectGateway(of.info);
  open.push(() => gateway.close());
  return gateway;
}

async function worker(of: RunningDaemon): Promise<RawWorker> {
  const connection = await rawWorker(of.info.socket);
  open.push(() => connection.destroy());
  return connection;
}

interface BackplaneStatus {
  name: string;
  instance: string;
  connected: boolean;
  refused?: string;
  hosts: Array<{ name: string; state: string; activeStreams: number; instance?: string }>;
  invalidMessages: number;
}

async function backplaneOf(gateway: GatewayClient): Promise<BackplaneStatus> {
  const reply = await gateway.request('progress/status');
  return (reply.result as { backplane: BackplaneStatus }).backplane;
}

/** What `mcp-progress nats-permissions` prints for a daemon of that name. */
async function permissionsOf(name: string): Promise<string> {
  const result = await runCli(['nats-permissions', '--nats-name', name]);
  expect(result.code).toBe(0);
  return result.stdout;
}

describe.skipIf(natsServer.skip)('backplane names', () => {
  beforeAll(() => natsServer.require());

  it('two daemons of one user on one host, both with the default name, have two names and share a stream', async () => {
    const server = await nats();
    const [a, b] = await Promise.all([daemon(server.url), daemon(server.url)]);
    const [onA, onB] = await Promise.all([session(a), session(b)]);
    const [statusA, statusB] = await Promise.all([backplaneOf(onA), backplaneOf(onB)]);
    expect(statusA.name).toMatch(/^[^@]+@[A-Za-z0-9_-]+-[0-9a-f]{6}$/);
    expect(statusB.name).not.toBe(statusA.name);
    expect(statusA.instance).not.toBe(statusB.instance);
    const token = fresh('defaults');
    await subscribe(onB, token);
    const publisher = await worker(a);
    publisher.send('progress', { v: 1, progressToken: token, progress: 6, total: 10 });
    await sawProgress(onB, token, 6);
    const got = await onB.request('progress/get', { progressToken: token });
    expect((got.result as { stream: { host: string } }).stream.host).toBe(statusA.name);
    await eventually(async () =>
      (await backplaneOf(onB)).hosts.some(
        (h) => h.name === statusA.name && h.instance === statusA.instance,
      )
        ? true
        : undefined,
    );
  });

  it('a second live daemon under a name in use is refused, names the other, and ends none of its streams', async () => {
    const server = await nats();
    const [first, watcher] = await Promise.all([
      daemon(server.url, 'twin'),
      daemon(server.url, 'watcher'),
    ]);
    const [onFirst, onWatcher] = await Promise.all([session(first), session(watcher)]);
    const token = fresh('twin-job');
    await subscribe(onWatcher, token);
    const publisher = await worker(first);
    publisher.send('progress', { v: 1, progressToken: token, progress: 6, total: 10 });
    await sawProgress(onWatcher, token, 6);

    const second = await daemon(server.url, 'twin', false);
    const firstInstance = (await backplaneOf(onFirst)).instance;
    await eventually(() => (second.stderr().includes('backplane: not joining') ? true : undefined));
    expect(second.stderr()).toContain(
      `another live daemon already joined NATS ${server.url} as twin (instance ${firstInstance}`,
    );
    expect(second.stderr()).toContain('give this one a --nats-name of its own');
    expect(second.stderr()).not.toContain('backplane: joined');
    const refused = await backplaneOf(await session(second));
    expect(refused).toMatchObject({ name: 'twin', connected: false });
    expect(refused.refused).toContain(`instance ${firstInstance}`);
    const status = await runCli(['status', '--runtime-dir', second.runtimeDir]);
    expect(status.stdout).toContain(`NOT JOINED: another live daemon already joined NATS`);
    expect(first.stderr()).toContain('tried to join as twin');

    // The first one's stream goes on, and is not ended on the other hosts: past the grace, a
    // value and its done still arrive, and nothing was abandoned. A control stream whose worker
    // leaves now is abandoned one grace later: once the watcher sees that, the grace has passed.
    const controlToken = fresh('twin-control');
    await subscribe(onWatcher, controlToken);
    const control = await worker(first);
    control.send('progress', { v: 1, progressToken: controlToken, progress: 1 });
    await sawProgress(onWatcher, controlToken, 1);
    control.destroy();
    expect(await doneOf(onWatcher, controlToken)).toMatchObject({ status: 'abandoned' });
    expect(notificationsOf(onWatcher, token).map((n) => n.method)).toEqual([
      'notifications/progress',
    ]);
    publisher.send('progress', { v: 1, progressToken: token, progress: 7, total: 10 });
    publisher.send('done', { v: 1, progressToken: token, status: 'ok' });
    expect(await doneOf(onWatcher, token)).toMatchObject({ status: 'ok' });
    expect(progressOf(onWatcher, token)).toEqual([6, 7]);
  });

  it(`a host name of at most ${MAX_HOST_NAME_BYTES} bytes: a longer --nats-name is refused at start, and messages under a longer name off NATS are ignored`, async () => {
    await expectDaemonRefuses(
      ['--nats', 'nats://127.0.0.1:1', '--nats-name', 'n'.repeat(MAX_HOST_NAME_BYTES + 1)],
      `--nats-name is ${MAX_HOST_NAME_BYTES + 1} bytes long; a host name on the backplane is at most ${MAX_HOST_NAME_BYTES} bytes`,
    );
    const server = await nats();
    const longest = 'l'.repeat(MAX_HOST_NAME_BYTES);
    const [watcher, longestHost] = await Promise.all([
      daemon(server.url, 'name-watcher'),
      daemon(server.url, longest),
    ]);
    const onWatcher = await session(watcher);
    // The longest name is a host like any other: its stream arrives, under its name.
    const token = fresh('longest-name');
    await subscribe(onWatcher, token);
    (await worker(longestHost)).send('progress', { v: 1, progressToken: token, progress: 1 });
    await sawProgress(onWatcher, token, 1);
    const got = await onWatcher.request('progress/get', { progressToken: token });
    expect((got.result as { stream: { host: string } }).stream.host).toBe(longest);
    // One byte more, from a NATS client: a heartbeat and a stream under that name are ignored.
    const tooLong = 'x'.repeat(MAX_HOST_NAME_BYTES + 1);
    const raw = await natsConnect({ servers: server.url });
    open.push(() => raw.close());
    const refusedToken = fresh('too-long-name');
    await subscribe(onWatcher, refusedToken);
    raw.publish(`mcp-progress.h.${tooLong}`, JSON.stringify({ v: 1, state: 'up' }));
    raw.publish(
      `mcp-progress.s.${tooLong}.${tokenSubject(refusedToken)}`,
      JSON.stringify({
        v: 1,
        kind: 'progress',
        params: { progressToken: refusedToken, progress: 1 },
      }),
    );
    await raw.flush();
    const status = await eventually(
      async () => {
        const backplane = await backplaneOf(onWatcher);
        return backplane.invalidMessages >= 2 ? backplane : undefined;
      },
      10_000,
      'the watcher to ignore both messages under the too-long name',
    );
    expect(status.invalidMessages).toBe(2);
    expect(status.hosts.map((h) => h.name)).toEqual([longest]);
    expect(watcher.stderr()).toContain(
      `backplane: ignored a message on mcp-progress.h.${tooLong.slice(0, 200 - 'mcp-progress.h.'.length)}: a host name longer than ${MAX_HOST_NAME_BYTES} bytes`,
    );
    expect(notificationsOf(onWatcher, refusedToken)).toEqual([]);
  });

  it("a host confined by nats-permissions cannot forge another host's values, dones or heartbeats; it can cancel", async () => {
    const users = await Promise.all(
      ['host-a', 'host-b'].map(
        async (name) => `{ user: ${name}, password: ${name}-pw, ${await permissionsOf(name)} }`,
      ),
    );
    const server = await nats(`authorization {\n  users = [\n${users.join(',\n')}\n  ]\n}\n`);
    const as = (name: string) => `nats://${name}:${name}-pw@127.0.0.1:${server.port}`;
    const [a, b] = await Promise.all([
      daemon(as('host-a'), 'host-a'),
      daemon(as('host-b'), 'host-b'),
    ]);
    const onB = await session(b);
    const token = fresh('confined');
    await subscribe(onB, token);
    const publisher = await worker(a);
    publisher.send('progress', { v: 1, progressToken: token, progress: 1, total: 10 });
    await sawProgress(onB, token, 1);

    // host-b's user, as any program with its password would, tries to speak for host-a.
    const forger = await natsConnect({ servers: server.url, user: 'host-b', pass: 'host-b-pw' });
    open.push(() => forger.close());
    const violations: string[] = [];
    void (async () => {
      for await (const status of forger.status()) violations.push(String(status.data));
    })();
    const subject = `mcp-progress.s.host-a.${tokenSubject(token)}`;
    forger.publish(
      subject,
      JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 9 } }),
    );
    forger.publish(
      subject,
      JSON.stringify({
        v: 1,
        kind: 'done',
        params: { progressToken: token, status: 'error', message: 'forged' },
      }),
    );
    // Nor put a value of its own in the store for a late joiner, on host-a's kept subject.
    forger.publish(
      `mcp-progress.k.host-a.${tokenSubject(token)}`,
      JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 9 } }),
    );
    forger.publish('mcp-progress.h.host-a', JSON.stringify({ v: 1, state: 'down' }));
    await forger.flush();
    await eventually(
      () => (violations.filter((v) => /permission/i.test(v)).length >= 4 ? true : undefined),
      10_000,
      "the server to refuse all four forgeries (host-a's value, done, stored value and down)",
    );
    // Cancels to any host are allowed: a gateway on any host may cancel.
    forger.publish('mcp-progress.c.host-a', JSON.stringify({ v: 1, progressToken: token }));
    await publisher.reply(
      (r) => r.type === 'cancel' && (r.data as { progressToken?: unknown }).progressToken === token,
    );
    publisher.send('progress', { v: 1, progressToken: token, progress: 2, total: 10 });
    publisher.send('done', { v: 1, progressToken: token, status: 'cancelled' });
    expect(await doneOf(onB, token)).toMatchObject({ status: 'cancelled' });
    expect(progressOf(onB, token)).toEqual([1, 2]);
    expect(b.stderr()).not.toContain('host host-a is lost');
  });

  it('caps: a crowd of invented hosts keeps no real host out for long, and one host holds at most its share of streams', async () => {
    const server = await nats();
    // A grace longer than the test: lost hosts stay in the table unless a new host takes their place.
    const watcher = await daemon(server.url, 'watcher', true, 600_000);
    const onWatcher = await session(watcher);
    const crowd = await natsConnect({ servers: server.url });
    open.push(() => crowd.close());
    // One invented host with one stream more than its share.
    for (let i = 0; i <= BACKPLANE_MAX_STREAMS_PER_HOST; i++) {
      const params = { progressToken: `flood-${i}`, progress: 1 };
      crowd.publish(
        `mcp-progress.s.flooder.${tokenSubject(params.progressToken)}`,
        JSON.stringify({ v: 1, kind: 'progress', params }),
      );
    }
    await crowd.flush();
    await eventually(() =>
      watcher
        .stderr()
        .includes(`host flooder already has ${BACKPLANE_MAX_STREAMS_PER_HOST} streams here`)
        ? true
        : undefined,
    );
    const flooder = (await backplaneOf(onWatcher)).hosts.find((h) => h.name === 'flooder');
    expect(flooder?.activeStreams).toBe(BACKPLANE_MAX_STREAMS_PER_HOST);
    // Then a crowd of invented hosts, more than the table holds.
    for (let i = 0; i < BACKPLANE_MAX_HOSTS * 4; i++) {
      crowd.publish(`mcp-progress.h.invented-${i}`, JSON.stringify({ v: 1, state: 'up' }));
    }
    await crowd.flush();
    await eventually(async () =>
      (await backplaneOf(onWatcher)).hosts.length === BACKPLANE_MAX_HOSTS ? true : undefined,
    );
    // A real host that comes after the crowd: its heartbeats get it in once the invented names
    // are silent, and its stream reaches the watcher.
    const real = await daemon(server.url, 'real-new-host');
    const token = fresh('after-crowd');
    await subscribe(onWatcher, token);
    const publisher = await worker(real);
    publisher.send('progress', { v: 1, progressToken: token, progress: 1 });
    publisher.send('progress', { v: 1, progressToken: token, progress: 2 });
    await eventually(
      async () => {
        const status = await backplaneOf(onWatcher);
        return status.hosts.some((h) => h.name === 'real-new-host') ? status : undefined;
      },
      15_000,
      'the real host to be known',
    );
    publisher.send('progress', { v: 1, progressToken: token, progress: 3 });
    await sawProgress(onWatcher, token, 3);
    expect((await backplaneOf(onWatcher)).hosts.length).toBeLessThanOrEqual(BACKPLANE_MAX_HOSTS);
    expect(notificationsOf(onWatcher, token).length).toBeGreaterThan(0);
  });

  it("a silent host evicted from a full table for a new one: its stream ends abandoned here, and nothing of it goes out as this daemon's", async () => {
    const server = await nats();
    // A grace longer than the test: the silent host is evicted, not abandoned after the grace.
    const watcher = await daemon(server.url, 'evictor', true, 600_000);
    const onWatcher = await session(watcher);
    const fake = await natsConnect({ servers: server.url });
    open.push(() => fake.close());
    const token = fresh('evicted');
    const tok = tokenSubject(token);
    // Everything the watcher publishes: its own subjects of that token, and its heartbeats.
    const ownOfToken: string[] = [];
    fake.subscribe(`mcp-progress.*.evictor.${tok}`, {
      callback: (_error, msg) => ownOfToken.push(msg.subject),
    });
    let beats = 0;
    fake.subscribe('mcp-progress.h.evictor', { callback: () => beats++ });
    await fake.flush();
    await subscribe(onWatcher, token);
    // The first host of the table, with an active stream; then it falls silent.
    fake.publish('mcp-progress.h.silent-host', JSON.stringify({ v: 1, state: 'up' }));
    fake.publish(
      `mcp-progress.s.silent-host.${tok}`,
      JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 1 } }),
    );
    await sawProgress(onWatcher, token, 1);
    // The rest of the table, heard after it.
    for (let i = 1; i < BACKPLANE_MAX_HOSTS; i++) {
      fake.publish(`mcp-progress.h.filler-${i}`, JSON.stringify({ v: 1, state: 'up' }));
    }
    await fake.flush();
    await eventually(async () =>
      (await backplaneOf(onWatcher)).hosts.length === BACKPLANE_MAX_HOSTS ? true : undefined,
    );
    // A 65th host keeps saying it is up until it takes the place of the silent one (heard least recently).
    await eventually(
      () => {
        fake.publish('mcp-progress.h.newcomer', JSON.stringify({ v: 1, state: 'up' }));
        return watcher.stderr().includes('backplane: forgot host silent-host') ? true : undefined;
      },
      20_000,
      'the silent host to be evicted',
    );
    const done = await doneOf(onWatcher, token);
    expect(done).toMatchObject({ progressToken: token, status: 'abandoned' });
    expect(String(done.message)).toContain('host silent-host was not heard from');
    // Two heartbeats of the watcher after the end: anything it published of the token came first.
    const after = beats;
    await eventually(() => (beats >= after + 2 ? true : undefined), 10_000, 'two heartbeats');
    expect(ownOfToken).toEqual([]);
  });
});
