/**
 * The backplane's rules under faults, each with real daemons and a real nats-server -js:
 * done on every host once, a dying worker, a host cut off from NATS, NATS down at start,
 * NATS restarted mid-stream, credentials and TLS (docs/BACKPLANE.md, the failure table).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as natsConnect } from 'nats';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BackplaneSubjects, tokenSubject } from '../../src/daemon/backplane-names.js';
import { DEFAULT_NATS_PREFIX, DEFAULTS } from '../../src/daemon/options.js';
import {
  BACKPLANE_MAX_UNCONFIRMED,
  BACKPLANE_MAX_UNCONFIRMED_BYTES,
  BACKPLANE_MISSED_HEARTBEATS,
  BACKPLANE_STALL_HEARTBEATS,
  PAUSE_TOLERANCE_PERIODS,
} from '../../src/shared/defaults.js';
import { cuttableLink } from '../helpers/cuttable-link.js';
import {
  cleanupAll,
  collectOutput,
  eventually,
  expectDaemonRefuses,
  ROOT,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { stopWhileIdle, wakeAfterTimers } from '../helpers/stand-still.js';
import { tool } from '../helpers/tools.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import {
  doneOf,
  expectIncreasing,
  fresh,
  GRACE_MS,
  hostArgs,
  joined,
  notificationsOf,
  progressOf,
  sawProgress,
  startHost,
  streamOn,
  subscribe,
} from './hosts.js';
import {
  freePort,
  makeCertificates,
  natsServer,
  type RunningNats,
  startNats,
} from './nats-server.js';
import { mintOperator } from './operator.js';

/** The configuration docs/BACKPLANE.md gives for one team's prefix, word for word. */
const PREFIX_PERMISSIONS = readFileSync(join(ROOT, 'docs/backplane-permissions.conf'), 'utf8');

const openssl = tool('openssl', {
  debian: 'openssl',
  probe: ['openssl', 'version'],
  why: 'the certificates of the TLS backplane test',
});

/** The daemons' --nats-heartbeat-ms (a library option: the tests' daemons take the default). */
const HEARTBEAT_MS = DEFAULTS.natsHeartbeatMs;

/** What each test started, stopped in reverse at its end. */
let open: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of open.reverse()) await close();
  open = [];
  cleanupAll();
});

async function nats(start?: Parameters<typeof startNats>[0]): Promise<RunningNats> {
  const server = await startNats(start);
  open.push(() => server.stop());
  return server;
}

async function host(
  url: string,
  name: string,
  extra: string[] = [],
  runtimeDir?: string,
): Promise<RunningDaemon> {
  const daemon = await startHost(url, name, extra, runtimeDir);
  open.push(() => daemon.stop());
  return daemon;
}

async function session(daemon: RunningDaemon): Promise<GatewayClient> {
  const gateway = await connectGateway(daemon.info);
  open.push(() => gateway.close());
  return gateway;
}

async function worker(daemon: RunningDaemon): Promise<RawWorker> {
  const connection = await rawWorker(daemon.info.socket);
  open.push(() => connection.destroy());
  return connection;
}

/** Sends a frame with a seq and waits for its ack: the daemon took it. */
async function accepted(
  connection: RawWorker,
  type: 'progress' | 'done',
  data: Record<string, unknown>,
): Promise<void> {
  const seq = Math.floor(Math.random() * 1e9);
  connection.send(type, { v: 1, ...data, seq });
  const reply = await connection.reply(
    (r) => (r.data as { seq?: number } | undefined)?.seq === seq,
  );
  expect(reply.type).toBe('ack');
}

/** Counts the heartbeats host `name` puts on the backplane from now on, as the other hosts hear them. */
async function heartbeatsOf(url: string, name: string): Promise<() => number> {
  const nc = await natsConnect({ servers: url });
  open.push(() => nc.close());
  let beats = 0;
  nc.subscribe(new BackplaneSubjects(DEFAULT_NATS_PREFIX, name).heartbeatOf(name), {
    callback: () => beats++,
  });
  await nc.flush();
  return () => beats;
}

/** Waits until the daemon behind `on` hears host `name`: known, and up. */
function hears(on: GatewayClient, name: string): Promise<true> {
  return eventually(
    async () => {
      const { result } = await on.request('progress/status');
      const { hosts } = (result as { backplane: { hosts: Array<{ name: string; state: string }> } })
        .backplane;
      return hosts.some((known) => known.name === name && known.state === 'up') ? true : undefined;
    },
    20_000,
    `host ${name} to be heard, up`,
  );
}

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

/**
 * A worker on `from` publishes value 1 of a fresh token, and a session on `to` that subscribed
 * to it first has seen it: the backplane between the two carries values.
 */
async function firstValueCrosses(
  from: RunningDaemon,
  to: RunningDaemon,
  label: string,
): Promise<{ token: string; onTo: GatewayClient; publisher: RawWorker }> {
  const onTo = await session(to);
  const token = fresh(label);
  await subscribe(onTo, token);
  const publisher = await worker(from);
  await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
  await sawProgress(onTo, token, 1);
  return { token, onTo, publisher };
}

describe.skipIf(natsServer.skip)('backplane faults', () => {
  beforeAll(() => natsServer.require());
  it('done reaches every host once, and nothing follows it', async () => {
    const server = await nats();
    const [a, b, c] = await Promise.all([
      host(server.url, 'host-a'),
      host(server.url, 'host-b'),
      host(server.url, 'host-c'),
    ]);
    const [onB, onC] = await Promise.all([session(b), session(c)]);
    const publisher = await worker(a);
    const token = fresh('once');
    await Promise.all([subscribe(onB, token), subscribe(onC, token)]);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await accepted(publisher, 'done', { progressToken: token, status: 'error', message: 'bad' });
    for (const on of [onB, onC]) {
      expect(await doneOf(on, token)).toEqual({
        progressToken: token,
        status: 'error',
        message: 'bad',
      });
    }
    // After done the token is closed on its host; a later stream on the same worker still
    // arrives, so anything sent for the first token would have arrived before it.
    publisher.send('progress', { v: 1, progressToken: token, progress: 2, seq: 7 });
    const refused = await publisher.reply((r) => (r.data as { seq?: number }).seq === 7);
    expect(refused.data).toMatchObject({ code: 'stream_closed' });
    const marker = fresh('marker');
    await Promise.all([subscribe(onB, marker), subscribe(onC, marker)]);
    await accepted(publisher, 'progress', { progressToken: marker, progress: 1 });
    await Promise.all([sawProgress(onB, marker, 1), sawProgress(onC, marker, 1)]);
    for (const on of [onB, onC]) {
      expect(notificationsOf(on, token).map((n) => n.method)).toEqual([
        'notifications/progress',
        'notifications/progress/done',
      ]);
      expect(await streamOn(on, token)).toMatchObject({ state: 'done', host: 'host-a' });
    }
  });

  it('a worker that dies is abandoned on every host, with the reason', async () => {
    const server = await nats();
    const [a, b, c] = await Promise.all([
      host(server.url, 'dies-a'),
      host(server.url, 'dies-b'),
      host(server.url, 'dies-c'),
    ]);
    const [onA, onB, onC] = await Promise.all([session(a), session(b), session(c)]);
    const token = fresh('dies');
    await Promise.all([onA, onB, onC].map((on) => subscribe(on, token)));
    const publisher = await rawWorker(a.info.socket);
    await accepted(publisher, 'progress', { progressToken: token, progress: 4 });
    await Promise.all([onB, onC].map((on) => sawProgress(on, token, 4)));
    publisher.destroy();
    for (const on of [onA, onB, onC]) {
      const done = await doneOf(on, token);
      expect(done).toMatchObject({ progressToken: token, status: 'abandoned' });
      expect(String(done.message)).toContain('the worker disconnected without sending done');
      expect(notificationsOf(on, token)).toHaveLength(2);
    }
  });

  it('a host cut off from NATS: the others end its streams as abandoned after the grace; it keeps its own and catches up when back', async () => {
    const server = await nats();
    const link = await cuttableLink(server.port);
    open.push(() => link.close());
    const [a, b] = await Promise.all([host(link.url, 'cut-a'), host(server.url, 'cut-b')]);
    const [onA, onB] = await Promise.all([session(a), session(b)]);
    const [onAWorker, onBWorker] = await Promise.all([worker(a), worker(b)]);
    const fromA = fresh('from-a');
    const fromB = fresh('from-b');
    await Promise.all([subscribe(onA, fromA), subscribe(onB, fromA), subscribe(onA, fromB)]);
    await accepted(onAWorker, 'progress', { progressToken: fromA, progress: 1 });
    await accepted(onBWorker, 'progress', { progressToken: fromB, progress: 1 });
    await Promise.all([sawProgress(onB, fromA, 1), sawProgress(onA, fromB, 1)]);

    await link.cut();
    await eventually(() => (a.stderr().includes('backplane: lost NATS') ? true : undefined));
    // A goes on locally: its own session sees its worker's values.
    await accepted(onAWorker, 'progress', { progressToken: fromA, progress: 2 });
    await sawProgress(onA, fromA, 2);
    await accepted(onBWorker, 'progress', { progressToken: fromB, progress: 2 });
    // B: A is silent, lost, and after the grace its stream ends as abandoned.
    const done = await doneOf(onB, fromA);
    expect(done).toMatchObject({ status: 'abandoned' });
    expect(String(done.message)).toContain('host cut-a left the backplane (no heartbeat for 3 s)');
    expect(String(done.message)).toContain(`within ${GRACE_MS / 1000} s`);
    const seenByB = (await onB.request('progress/status')).result as {
      backplane: { hosts: Array<{ name: string; state: string }> };
    };
    expect(seenByB.backplane.hosts).toContainEqual(
      expect.objectContaining({ name: 'cut-a', state: 'lost' }),
    );
    // A invents nothing about B's stream while cut off: still active, at the last value it heard.
    expect(await streamOn(onA, fromB)).toMatchObject({
      state: 'active',
      host: 'cut-b',
      last: { progressToken: fromB, progress: 1 },
    });

    await link.mend();
    await eventually(
      () => (a.stderr().includes('backplane: NATS reconnected') ? true : undefined),
      20_000,
    );
    // A catches up with what B published meanwhile; B keeps its end: nothing after done.
    await sawProgress(onA, fromB, 2);
    expect(progressOf(onA, fromB)).toEqual([1, 2]);
    await hears(onB, 'cut-a');
    expect(notificationsOf(onB, fromA).map((n) => n.method)).toEqual([
      'notifications/progress',
      'notifications/progress/done',
    ]);
  });

  it('a daemon killed -9 and started again at once: its streams end as abandoned on the others after the grace', async () => {
    const server = await nats();
    const runtimeDir = tempDir();
    const first = await startHost(server.url, 'again-a', [], runtimeDir);
    open.push(() => first.stop('SIGKILL'));
    const b = await host(server.url, 'again-b');
    const onB = await session(b);
    const token = fresh('again');
    await subscribe(onB, token);
    const publisher = await rawWorker(first.info.socket);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await sawProgress(onB, token, 1);
    first.child.kill('SIGKILL');
    publisher.destroy();
    // Back before B misses three heartbeats: B never loses the host, the new daemon ends the stream.
    const again = await host(server.url, 'again-a', [], runtimeDir);
    const done = await doneOf(onB, token);
    expect(done).toMatchObject({ progressToken: token, status: 'abandoned' });
    // The new daemon's end; on a machine so loaded that the restart took more than three
    // heartbeats, B's own (the host was lost): without either, B would wait for ever.
    expect(String(done.message)).toMatch(
      /the worker disconnected without sending done|host again-a left the backplane/,
    );
    expect(notificationsOf(onB, token)).toHaveLength(2);
    expect(await streamOn(await session(again), token)).toMatchObject({
      state: 'done',
      host: 'again-a',
    });
  });

  it("a token two hosts publish is the first host's on a third: the second one's messages are ignored, not merged", async () => {
    const server = await nats();
    const [a, c] = await Promise.all([host(server.url, 'first-a'), host(server.url, 'first-c')]);
    const { token, onTo: onC, publisher } = await firstValueCrosses(a, c, 'first');
    // A second host, as another daemon would publish, before it knew of host A's stream.
    const nc = await natsConnect({ servers: server.url });
    const subject = `mcp-progress.s.second-b.${tokenSubject(token)}`;
    nc.publish(
      subject,
      JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 50 } }),
    );
    nc.publish(
      subject,
      JSON.stringify({ v: 1, kind: 'done', params: { progressToken: token, status: 'ok' } }),
    );
    await nc.flush();
    await nc.close();
    await eventually(() =>
      c.stderr().includes('host first-a published it first') ? true : undefined,
    );
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await sawProgress(onC, token, 2);
    expect(progressOf(onC, token)).toEqual([1, 2]);
    expect(await streamOn(onC, token)).toMatchObject({ state: 'active', host: 'first-a' });
  });

  it('a conflict is warned about once a stream: a later stream of the same token, after the first was forgotten, is warned about again', async () => {
    const server = await nats();
    const short = ['--retention-ms', '200'];
    const [a, c] = await Promise.all([
      host(server.url, 'again-first-a', short),
      host(server.url, 'again-first-c', short),
    ]);
    const { token, publisher } = await firstValueCrosses(a, c, 'again-first');
    const onA = await session(a);
    const onC = await session(c);
    const warning = 'host again-first-a published it first';
    const conflict = async () => {
      const nc = await natsConnect({ servers: server.url });
      nc.publish(
        `mcp-progress.s.again-second-b.${tokenSubject(token)}`,
        JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 50 } }),
      );
      await nc.flush();
      await nc.close();
    };
    await conflict();
    await eventually(() => (count(c.stderr(), warning) === 1 ? true : undefined));
    await conflict();
    // The same stream: warned about once.
    await accepted(publisher, 'done', { progressToken: token });
    const forgotten = (on: GatewayClient) =>
      eventually(
        async () => ((await streamOn(on, token)) === undefined ? true : undefined),
        20_000,
        'the done stream to be forgotten after --retention-ms',
      );
    await Promise.all([forgotten(onA), forgotten(onC)]);
    // A new stream of the token, and the other host again.
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await eventually(
      async () => ((await streamOn(onC, token))?.state === 'active' ? true : undefined),
      20_000,
      'the new stream to reach host C',
    );
    await conflict();
    await eventually(
      () => (count(c.stderr(), warning) === 2 ? true : undefined),
      20_000,
      () => `a second warning (host C logged:\n${c.stderr()})`,
    );
  });

  it('a store an earlier version made on the live subjects: one warning that says to remove it, and live values go on', async () => {
    const server = await nats();
    const nc = await natsConnect({ servers: server.url });
    open.push(() => nc.close());
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'mcp-progress_streams', subjects: ['mcp-progress.s.>'] });
    const [a, b] = await Promise.all([host(server.url, 'old-a'), host(server.url, 'old-b')]);
    for (const daemon of [a, b]) {
      expect(daemon.stderr()).toContain(
        'backplane: the JetStream store mcp-progress_streams captures mcp-progress.s.>, not mcp-progress.k.>: an older mcp-progress-bridge made it',
      );
      expect(count(daemon.stderr(), 'nats stream rm mcp-progress_streams')).toBe(1);
    }
    await firstValueCrosses(a, b, 'old-store');
  });

  it('NATS down at start: the daemon runs locally with one warning, retries, and joins when NATS comes up', async () => {
    const port = await freePort();
    const url = `nats://127.0.0.1:${port}`;
    const a = await startDaemon(hostArgs(url, 'early-a', ['--log-level', 'debug']));
    open.push(() => a.stop());
    await eventually(() => (a.stderr().includes('backplane: cannot join NATS') ? true : undefined));
    expect(a.stderr()).toContain('running locally, retrying every 2 s');
    // Local work goes on meanwhile.
    const onA = await session(a);
    const token = fresh('early');
    await subscribe(onA, token);
    const publisher = await worker(a);
    await accepted(publisher, 'progress', { progressToken: token, progress: 3, message: 'local' });
    await sawProgress(onA, token, 3);
    await eventually(
      () => (count(a.stderr(), 'NATS still unreachable') >= 2 ? true : undefined),
      20_000,
      'two more attempts',
    );
    expect(count(a.stderr(), 'cannot join NATS')).toBe(1);

    const server = await nats({ port });
    await joined(a, 'early-a');
    const b = await host(server.url, 'early-b');
    const onB = await session(b);
    // What A published before it joined is on the backplane now.
    await eventually(async () =>
      (await streamOn(onB, token))?.state === 'active' ? true : undefined,
    );
    expect(await streamOn(onB, token)).toMatchObject({
      host: 'early-a',
      last: { progressToken: token, progress: 3, message: 'local' },
    });
    await subscribe(onB, token);
    await accepted(publisher, 'done', { progressToken: token });
    expect(await doneOf(onB, token)).toEqual({ progressToken: token, status: 'ok' });
    expect(count(a.stderr(), 'cannot join NATS')).toBe(1);
  });

  it('NATS restarted mid-stream: everyone resubscribes, no value repeats or regresses, the last one is restored', async () => {
    const first = await startNats();
    const [a, b] = await Promise.all([host(first.url, 'restart-a'), host(first.url, 'restart-b')]);
    const onB = await session(b);
    const publisher = await worker(a);
    const token = fresh('restart');
    await subscribe(onB, token);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await sawProgress(onB, token, 2);

    await first.stop();
    await Promise.all(
      [a, b].map((d) =>
        eventually(() => (d.stderr().includes('backplane: lost NATS') ? true : undefined)),
      ),
    );
    // Accepted on host A while NATS is down.
    for (const progress of [3, 4, 5]) {
      await accepted(publisher, 'progress', { progressToken: token, progress, total: 5 });
    }
    await nats({ port: first.port, storeDir: first.storeDir });
    await Promise.all(
      [a, b].map((d) =>
        eventually(
          () => (d.stderr().includes('backplane: NATS reconnected') ? true : undefined),
          20_000,
        ),
      ),
    );
    await sawProgress(onB, token, 5);
    const values = progressOf(onB, token);
    expect(new Set(values).size).toBe(values.length);
    expectIncreasing(notificationsOf(onB, token));
    expect(values.at(-1)).toBe(5);
    // A host joining now learns the last value from the store the restarted NATS kept.
    const c = await host(first.url, 'restart-c');
    const onC = await session(c);
    await eventually(async () =>
      (await streamOn(onC, token))?.state === 'active' ? true : undefined,
    );
    expect((await streamOn(onC, token))?.last).toEqual({
      progressToken: token,
      progress: 5,
      total: 5,
    });
    await accepted(publisher, 'done', { progressToken: token });
    await doneOf(onB, token);
    expect(notificationsOf(onB, token).filter((n) => n.method.endsWith('/done'))).toHaveLength(1);
  });

  it('a host too slow to read is cut off by NATS as a slow consumer; back, it restores the newest value and the end, and the others lose nothing', async () => {
    const server = await nats({
      config: 'max_payload: 65536\nmax_pending: 262144\nwrite_deadline: "1s"\n',
    });
    const [a, b, c] = await Promise.all([
      host(server.url, 'slow-a'),
      host(server.url, 'slow-b'),
      host(server.url, 'slow-c'),
    ]);
    const [onB, onC] = await Promise.all([session(b), session(c)]);
    const token = fresh('slow');
    await Promise.all([subscribe(onB, token), subscribe(onC, token)]);
    const publisher = await worker(a);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await Promise.all([sawProgress(onB, token, 1), sawProgress(onC, token, 1)]);
    // B stops reading (stopped, as a host swapping or overloaded): far more than the kernel's
    // socket buffers and NATS's max_pending can hold goes its way.
    b.child.kill('SIGSTOP');
    const last = 6000;
    const text = 'x'.repeat(4000);
    try {
      for (let progress = 2; progress < last; progress++) {
        publisher.send('progress', { v: 1, progressToken: token, progress, message: text });
      }
      await accepted(publisher, 'progress', {
        progressToken: token,
        progress: last,
        message: 'last',
      });
      await eventually(
        () => (server.stderr().includes('Slow Consumer Detected') ? true : undefined),
        20_000,
        'NATS to cut off the slow host',
      );
    } finally {
      b.child.kill('SIGCONT');
    }
    await accepted(publisher, 'done', { progressToken: token });
    // C, which kept reading, got every value; B, back, the newest and the end, in order.
    await doneOf(onC, token);
    expect(progressOf(onC, token)).toHaveLength(last);
    // Seen once to time out in a full run, never alone: B's log says what it went through.
    await doneOf(onB, token).catch((error: Error) => {
      throw new Error(`${error.message}; host B logged:\n${b.stderr()}`);
    });
    expect(progressOf(onB, token).at(-1)).toBe(last);
    expectIncreasing(notificationsOf(onB, token));
    expect(notificationsOf(onB, token).filter((n) => n.method.endsWith('/done'))).toHaveLength(1);
    expect(b.stderr()).toContain('backplane: lost NATS');
  });

  it('a host that itself stood still (SIGSTOP) does not take the others for lost when it wakes: their heartbeats are in its socket, unread', async () => {
    const server = await nats();
    const link = await cuttableLink(server.port);
    open.push(() => link.close());
    const [a, b] = await Promise.all([host(server.url, 'wake-a'), host(link.url, 'wake-b')]);
    const { token, onTo: onB, publisher } = await firstValueCrosses(a, b, 'wake');
    const onA = await session(a);
    await Promise.all([hears(onA, 'wake-b'), hears(onB, 'wake-a')]);
    const beatsOfA = await heartbeatsOf(server.url, 'wake-a');
    // What NATS sends B from now on (A's heartbeats among it) waits unread.
    link.hold();
    await stopWhileIdle(b);
    try {
      // A takes B for lost: more than BACKPLANE_MISSED_HEARTBEATS of B's heartbeats went by.
      await eventually(
        () => (a.stderr().includes('host wake-b is lost') ? true : undefined),
        20_000,
        'host A to take the stopped B for lost',
      );
      // B sleeps through more than BACKPLANE_MISSED_HEARTBEATS of A's heartbeats besides: woken,
      // its review finds A silent for longer than that, unless it sees its own pause.
      await whileStill(beatsOfA, BACKPLANE_MISSED_HEARTBEATS + 2);
    } finally {
      await wakeAfterTimers(b, link);
    }
    // A, past its grace, may have forgotten B: it knows B again, as a host that is up.
    await hears(onA, 'wake-b');
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await sawProgress(onB, token, 2);
    // What B logged on waking was written before it answered the status.
    await onB.request('progress/status');
    await new Promise((resolve) => setImmediate(resolve));
    expect(
      b
        .stderr()
        .split('\n')
        .filter((line) => line.includes('is lost')),
    ).toEqual([]);
  });

  it('a grace that runs out while this host itself stood still (SIGSTOP) starts again when it wakes: the other host, back meanwhile and unread yet, keeps its streams', async () => {
    const server = await nats();
    const link = await cuttableLink(server.port);
    open.push(() => link.close());
    // A's grace: room enough to stop A once it took B for lost, on a loaded machine too.
    const graceOfA = 2000;
    const [a, b] = await Promise.all([
      host(link.url, 'still-a', ['--abandon-grace-ms', String(graceOfA)]),
      host(server.url, 'still-b'),
    ]);
    const { token, onTo: onA, publisher } = await firstValueCrosses(b, a, 'still');
    const beatsOfB = await heartbeatsOf(server.url, 'still-b');
    b.child.kill('SIGSTOP');
    try {
      await eventually(
        () => (a.stderr().includes('host still-b is lost') ? true : undefined),
        20_000,
        'host A to take the stopped B for lost',
      );
      // What NATS sends A from now on (B's heartbeats among it) waits unread.
      link.hold();
      await stopWhileIdle(a);
    } finally {
      b.child.kill('SIGCONT');
    }
    try {
      // B beats again, unheard by A, which sleeps through its grace and through more than
      // PAUSE_TOLERANCE_PERIODS of its heartbeats (B's first beat comes as B wakes).
      await whileStill(
        beatsOfB,
        Math.ceil(Math.max(graceOfA, PAUSE_TOLERANCE_PERIODS * HEARTBEAT_MS) / HEARTBEAT_MS) + 2,
      );
    } finally {
      await wakeAfterTimers(a, link);
    }
    await eventually(
      () => (a.stderr().includes('host still-b is back') ? true : undefined),
      20_000,
      'host A to hear B again',
    );
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await eventually(
      () =>
        notificationsOf(onA, token).some(
          (n) => n.params.progress === 2 || n.method.endsWith('/done'),
        )
          ? true
          : undefined,
      20_000,
      "value 2 (or an end) of B's stream on A",
    );
    // Not abandoned on A: B was back before A could have heard it gone for a whole grace.
    expect(notificationsOf(onA, token).map((n) => [n.method, n.params.progress])).toEqual([
      ['notifications/progress', 1],
      ['notifications/progress', 2],
    ]);
    expect(a.stderr()).toContain(
      `backplane: this daemon stood still (more than ${(PAUSE_TOLERANCE_PERIODS * HEARTBEAT_MS) / 1000} s between two checks): host still-b gets a fresh ${graceOfA / 1000} s`,
    );
  });

  it('a flush in flight while this host stood still (SIGSTOP) does not make it take NATS as lost when it wakes: the answer waits unread', async () => {
    const server = await nats();
    let sentByA = '';
    const link = await cuttableLink(server.port, {
      seeDaemon: (chunk) => {
        sentByA += chunk.toString('latin1');
      },
    });
    open.push(() => link.close());
    const [a, b] = await Promise.all([host(link.url, 'flush-a'), host(server.url, 'flush-b')]);
    const { token, publisher } = await firstValueCrosses(a, b, 'flush');
    const onA = await session(a);
    const unconfirmedOnA = async () =>
      (
        (await onA.request('progress/status')).result as {
          backplane: { unconfirmed: number };
        }
      ).backplane.unconfirmed;
    await eventually(
      async () => ((await unconfirmedOnA()) === 0 ? true : undefined),
      20_000,
      "NATS to confirm A's messages",
    );
    const beatsOfB = await heartbeatsOf(server.url, 'flush-b');
    // Just after a PING of the client's own (one a heartbeat), so that the next PING is the flush.
    const idle = sentByA.length;
    await eventually(
      () => (sentByA.indexOf('PING\r\n', idle) >= 0 ? true : undefined),
      20_000,
      "a PING of A's client",
    );
    // What NATS answers A waits unread: the flush of value 2 stays in flight.
    link.hold();
    const before = sentByA.length;
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await eventually(
      () => {
        const published = sentByA.indexOf(tokenSubject(token), before);
        return published >= 0 && sentByA.indexOf('PING\r\n', published) >= 0 ? true : undefined;
      },
      20_000,
      'A to ask NATS to confirm value 2',
    );
    await stopWhileIdle(a);
    try {
      // A stands still for longer than its stall window, BACKPLANE_STALL_HEARTBEATS heartbeats.
      await whileStill(beatsOfB, BACKPLANE_STALL_HEARTBEATS + 2);
    } finally {
      await wakeAfterTimers(a, link);
    }
    await eventually(
      async () => ((await unconfirmedOnA()) === 0 ? true : undefined),
      20_000,
      'A to read the answer to its flush',
    );
    // What A logged on waking was written before it answered the status.
    await new Promise((resolve) => setImmediate(resolve));
    expect(a.stderr()).not.toContain('has not answered');
    expect(a.stderr()).not.toContain('lost NATS');
  });

  it('a NATS server that stops answering (SIGSTOP): the publishing daemon takes it as lost, keeps within its caps what it holds, and sends the newest value and the end when NATS answers again', async () => {
    const server = await nats();
    const [a, b] = await Promise.all([host(server.url, 'stall-a'), host(server.url, 'stall-b')]);
    const { token, onTo: onB, publisher } = await firstValueCrosses(a, b, 'stall');
    const onA = await session(a);
    const backplaneOfA = async () =>
      (
        (await onA.request('progress/status')).result as {
          backplane: { connected: boolean; unconfirmed: number; unconfirmedBytes: number };
        }
      ).backplane;
    const withinCaps = (status: { unconfirmed: number; unconfirmedBytes: number }) => {
      expect(status.unconfirmed).toBeLessThanOrEqual(BACKPLANE_MAX_UNCONFIRMED);
      expect(status.unconfirmedBytes).toBeLessThanOrEqual(BACKPLANE_MAX_UNCONFIRMED_BYTES);
    };
    // Values with a large _meta, as from a worker that sends its state along.
    const _meta = { state: 'x'.repeat(16 * 1024) };
    let progress = 1;
    const sendSome = (n: number) => {
      for (let i = 0; i < n; i++) {
        publisher.send('progress', { v: 1, progressToken: token, progress: ++progress, _meta });
      }
    };
    server.child.kill('SIGSTOP');
    // Whatever happens below, the server is not left stopped for the cleanup's SIGTERM.
    open.push(() => server.child.kill('SIGCONT'));
    try {
      // Its socket stays open: only its silence tells the daemon, which must stop writing into it.
      await eventually(
        async () => {
          sendSome(10);
          const status = await backplaneOfA();
          withinCaps(status);
          return status.connected ? undefined : true;
        },
        20_000,
        'the daemon to take the stopped NATS as lost',
      );
      expect(a.stderr()).toContain('backplane: NATS has not answered for 3 s');
      // Cut off: twice the byte cap's worth of values, of which it keeps no more than the cap.
      sendSome(Math.ceil((2 * BACKPLANE_MAX_UNCONFIRMED_BYTES) / _meta.state.length));
      await accepted(publisher, 'progress', { progressToken: token, progress: ++progress });
      const status = await backplaneOfA();
      expect(status.connected).toBe(false);
      withinCaps(status);
    } finally {
      server.child.kill('SIGCONT');
    }
    await eventually(
      async () => ((await backplaneOfA()).connected ? true : undefined),
      30_000,
      'the daemon to reconnect',
    );
    await accepted(publisher, 'done', { progressToken: token });
    // B, whose NATS stopped too, gets the newest value and the end, in order, once.
    await sawProgress(onB, token, progress);
    expect(await doneOf(onB, token)).toEqual({ progressToken: token, status: 'ok' });
    expectIncreasing(notificationsOf(onB, token));
    expect(notificationsOf(onB, token).filter((n) => n.method.endsWith('/done'))).toHaveLength(1);
  }, 90_000);

  it('a server that requires a user and password refuses a daemon without them, and takes one with them in the URL', async () => {
    const server = await nats({
      config: 'authorization { user: alice, password: "s3cret-pw" }\n',
    });
    const withCredentials = `nats://alice:s3cret-pw@127.0.0.1:${server.port}`;
    const outsider = await startDaemon(hostArgs(server.url, 'outsider'));
    open.push(() => outsider.stop());
    await eventually(() =>
      outsider.stderr().includes('backplane: cannot join NATS') ? true : undefined,
    );
    expect(outsider.stderr()).toContain('refused the credentials');
    const [a, b] = await Promise.all([
      host(withCredentials, 'auth-a'),
      host(withCredentials, 'auth-b'),
    ]);
    const onB = await session(b);
    const onOutsider = await session(outsider);
    const token = fresh('auth');
    await Promise.all([subscribe(onB, token), subscribe(onOutsider, token)]);
    const publisher = await worker(a);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await sawProgress(onB, token, 1);
    // The outsider heard nothing, and no log shows the password.
    expect(notificationsOf(onOutsider, token)).toEqual([]);
    expect(await streamOn(onOutsider, token)).toMatchObject({ state: 'waiting' });
    for (const daemon of [outsider, a, b]) expect(daemon.stderr()).not.toContain('s3cret-pw');
  });

  it('NATS permissions confine a user to its prefix: the documented configuration works, and nothing else', async () => {
    const server = await nats({ config: PREFIX_PERMISSIONS });
    const alice = (name: string) => `nats://${name}:${name}-pw@127.0.0.1:${server.port}`;
    const [a, b] = await Promise.all([
      host(alice('alice'), 'team-a-1', ['--nats-prefix', 'team-a']),
      host(alice('alice'), 'team-a-2', ['--nats-prefix', 'team-a']),
    ]);
    const { token } = await firstValueCrosses(a, b, 'team');
    // A late joiner reads the store through the consumer the configuration allows.
    const late = await host(alice('alice'), 'team-a-late', ['--nats-prefix', 'team-a']);
    expect(await streamOn(await session(late), token)).toMatchObject({
      state: 'active',
      host: 'team-a-1',
    });
    // Its consumer request, pulls and delete are all allowed: no warning.
    expect(late.stderr()).not.toContain('cannot catch up');
    // Alice under another team's prefix is refused by the server.
    const trespasser = await startDaemon(hostArgs(alice('alice'), 'team-a-3'));
    open.push(() => trespasser.stop());
    await eventually(() =>
      trespasser.stderr().includes('backplane: cannot join NATS') ? true : undefined,
    );
    expect(trespasser.stderr()).not.toContain('backplane: joined');
  });

  it.skipIf(openssl.skip)(
    'tls:// with --nats-ca joins a TLS server; without the CA the certificate is refused',
    async () => {
      openssl.require();
      const tls = makeCertificates();
      const server = await nats({
        config: `tls { cert_file: "${tls.cert}", key_file: "${tls.key}" }\n`,
        scheme: 'tls',
      });
      const untrusting = await startDaemon(hostArgs(server.url, 'no-ca'));
      open.push(() => untrusting.stop());
      await eventually(() =>
        untrusting.stderr().includes('backplane: cannot join NATS') ? true : undefined,
      );
      expect(untrusting.stderr()).toMatch(/backplane: cannot join NATS[^\n]*certificate/);
      const [a, b] = await Promise.all([
        host(server.url, 'tls-a', ['--nats-ca', tls.ca]),
        host(server.url, 'tls-b', ['--nats-ca', tls.ca]),
      ]);
      await firstValueCrosses(a, b, 'tls');
    },
  );

  it('--nats-creds and --nats-ca must name readable files; a creds file is handed to the NATS client', async () => {
    await expectDaemonRefuses(
      ['--nats', 'nats://127.0.0.1:1', '--nats-creds', '/nonexistent/user.creds'],
      'option --nats-creds: expected a readable file',
    );
    await expectDaemonRefuses(
      ['--nats', 'tls://127.0.0.1:1', '--nats-ca', '/nonexistent/ca.pem'],
      'option --nats-ca: expected a readable file',
    );
    // A creds file the client cannot read as one is its error, said in the warning.
    const server = await nats();
    const creds = join(tempDir(), 'broken.creds');
    writeFileSync(creds, 'not a creds file\n');
    const daemon = await startDaemon(hostArgs(server.url, 'creds', ['--nats-creds', creds]));
    open.push(() => daemon.stop());
    await eventually(() =>
      daemon.stderr().includes('backplane: cannot join NATS') ? true : undefined,
    );
    expect(daemon.stderr()).not.toContain('backplane: joined');
  });

  it('joins a server in operator mode with a minted creds file; a stranger or expired one is refused with a reason', async () => {
    const operator = await mintOperator();
    const server = await nats({ config: operator.config });
    const [credsA, credsB, stranger, expired] = await Promise.all([
      operator.user('jwt-a'),
      operator.user('jwt-b'),
      operator.user('jwt-stranger', { signer: 'stranger' }),
      operator.user('jwt-expired', { expiresAt: Date.now() - 60_000 }),
    ]);
    const [a, b] = await Promise.all([
      host(server.url, 'jwt-a', ['--nats-creds', credsA]),
      host(server.url, 'jwt-b', ['--nats-creds', credsB]),
    ]);
    const onB = await session(b);
    const token = fresh('jwt');
    await subscribe(onB, token);
    const publisher = await worker(a);
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    await accepted(publisher, 'done', { progressToken: token, status: 'ok' });
    expect(await doneOf(onB, token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(onB, token)).toEqual([1]);

    const refused = async (creds: string, name: string): Promise<string> => {
      const daemon = await startDaemon(hostArgs(server.url, name, ['--nats-creds', creds]));
      open.push(() => daemon.stop());
      await eventually(() =>
        daemon.stderr().includes('backplane: cannot join NATS') ? true : undefined,
      );
      expect(daemon.stderr()).not.toContain('backplane: joined');
      return daemon.stderr();
    };
    expect(await refused(stranger, 'jwt-stranger')).toMatch(
      /server refused the credentials in --nats-creds [^\n]*jwt-stranger\.creds[^\n]*account the server trusts/,
    );
    expect(await refused(expired, 'jwt-expired')).toMatch(
      /user JWT in --nats-creds [^\n]*jwt-expired\.creds expired at \d{4}-\d\d-\d\dT[^\n]*mint a new creds file/,
    );
  });

  it("a cluster of two servers, hosts on different ones: the publishing host's server killed mid-stream, the stream goes on through the other, nothing lost or repeated", async () => {
    const [port1, port2, route1, route2] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const member = (name: string, route: number, peer: number) =>
      `server_name: ${name}\ncluster {\n  name: bridge\n  listen: 127.0.0.1:${route}\n  routes: [nats-route://127.0.0.1:${peer}]\n}\n`;
    const [n1, n2] = await Promise.all([
      nats({ port: port1, config: member('n1', route1, route2) }),
      nats({ port: port2, config: member('n2', route2, route1) }),
    ]);
    // Both URLs, as a user gives a cluster (--nats takes a comma-separated list).
    const urls = `${n1.url},${n2.url}`;
    const serverOf = (daemon: RunningDaemon) =>
      /backplane: joined NATS \S*:(\d+) /.exec(daemon.stderr())?.[1];
    const a = await host(urls, 'cluster-a');
    // The client takes its servers in random order: B starts again until it is on the other one.
    // Stopped once, at the end, whichever B it is then.
    let b = await startHost(urls, 'cluster-b');
    open.push(() => b.stop());
    for (let tries = 1; serverOf(b) === serverOf(a); tries++) {
      expect(tries, 'B landed on the same server as A every time').toBeLessThan(12);
      await b.stop();
      b = await startHost(urls, 'cluster-b');
    }
    const onB = await session(b);
    const token = fresh('cluster');
    await subscribe(onB, token);
    const publisher = await worker(a);
    const values = Array.from({ length: 60 }, (_, i) => i + 1);
    for (const progress of values.slice(0, 10)) {
      await accepted(publisher, 'progress', { progressToken: token, progress });
    }
    await sawProgress(onB, token, 10);
    for (const progress of values.slice(10, 20)) {
      await accepted(publisher, 'progress', { progressToken: token, progress });
    }
    // Values 11 to 20 may still be on their way through A's server when it dies.
    const killed = serverOf(a) === String(n1.port) ? n1 : n2;
    killed.child.kill('SIGKILL');
    for (const progress of values.slice(20)) {
      await accepted(publisher, 'progress', { progressToken: token, progress });
    }
    await accepted(publisher, 'done', { progressToken: token, status: 'ok' });
    expect(await doneOf(onB, token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(onB, token)).toEqual(values);
    expect(
      notificationsOf(onB, token).filter((n) => n.method === 'notifications/progress/done'),
    ).toHaveLength(1);
    expect(a.stderr()).toMatch(/backplane: NATS reconnected to \S*:(\d+)/);
    expect(a.stderr()).not.toContain(`reconnected to 127.0.0.1:${killed.port}`);
  });

  it('a JetStream that never answers the catch-up: a daemon stopped meanwhile exits at once, and one left running gives up with one warning and keeps the live path', async () => {
    // The catch-up's consumer request of B's user goes nowhere (the server drops it), as in a
    // cluster without JetStream quorum; A's user may do everything.
    const server = await nats({
      config: `authorization {
  users = [
    { user: full, password: full-pw }
    { user: mute, password: mute-pw, permissions: {
        publish: { allow: [">"], deny: ["$JS.API.CONSUMER.CREATE.>", "$JS.API.CONSUMER.DURABLE.CREATE.>"] }
        subscribe: { allow: [">"] } } }
  ]
}
`,
    });
    const as = (user: string) => `nats://${user}:${user}-pw@127.0.0.1:${server.port}`;
    const a = await host(as('full'), 'mute-a');
    const publisher = await worker(a);
    const token = fresh('mute');
    await accepted(publisher, 'progress', { progressToken: token, progress: 1 });
    // In the store before B comes: B's catch-up has something to read.
    const nc = await natsConnect({ servers: server.url, user: 'full', pass: 'full-pw' });
    open.push(() => nc.close());
    const jsm = await nc.jetstreamManager();
    await eventually(
      async () =>
        (await jsm.streams.info('mcp-progress_streams')).state.messages > 0 ? true : undefined,
      10_000,
      'the value in the store',
    );
    const violations = () => server.stderr().split('CONSUMER.CREATE').length - 1;

    // Stopped while its catch-up waits: nothing of the catch-up may keep the process alive.
    const stopped = await startDaemon(hostArgs(as('mute'), 'mute-b'));
    open.push(() => stopped.stop());
    await eventually(() => (violations() > 0 ? true : undefined), 15_000, 'the refused request');
    stopped.child.kill('SIGTERM');
    // Its shutdown takes a moment; nats.js's ordered consumer kept it alive for minutes.
    await eventually(
      () =>
        stopped.child.exitCode !== null || stopped.child.signalCode !== null ? true : undefined,
      20_000,
      'B to exit after SIGTERM',
    );

    // The same in a process of its own that goes on after Daemon.stop(): no timer of the catch-up
    // is left (nats.js's ordered consumer left one retrying; a stop leaves others unref'd at most).
    const script = `
      const { Daemon } = await import(${JSON.stringify(join(ROOT, 'dist/daemon/daemon.js'))});
      const silent = { error() {}, warn() {}, info() {}, debug() {} };
      const daemon = await Daemon.start(${JSON.stringify({ runtimeDir: tempDir(), port: 0, nats: [as('mute')], natsName: 'mute-c' })}, silent);
      console.log('started');
      process.stdin.once('data', async () => {
        process.stdin.destroy();
        await daemon.stop();
        console.log('after stop: ' + JSON.stringify(process.getActiveResourcesInfo()));
        process.exit(0);
      });`;
    const before = violations();
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    open.push(() => child.kill('SIGKILL'));
    const output = collectOutput(child);
    await eventually(
      () => (violations() > before ? true : undefined),
      15_000,
      () => `the refused request of the child (${output.stdout()}${output.stderr()})`,
    );
    child.stdin?.write('stop\n');
    await waitForExit(child);
    const resources = /after stop: (.*)/.exec(output.stdout())?.[1];
    expect(resources, output.stderr()).toBeDefined();
    expect(JSON.parse(resources as string)).not.toContain('Timeout');

    // Left running: it gives up, says so once, joins, and live values reach it.
    const b = await host(as('mute'), 'mute-b');
    expect(b.stderr().match(/cannot catch up from the JetStream store/g)).toHaveLength(1);
    expect(b.stderr()).toMatch(
      /backplane: cannot catch up from the JetStream store mcp-progress_streams \(no answer to the consumer request within 5 s\): live values go on/,
    );
    const onB = await session(b);
    await subscribe(onB, token);
    await accepted(publisher, 'progress', { progressToken: token, progress: 2 });
    await sawProgress(onB, token, 2);
  }, 60_000);
});

describe('without --nats', () => {
  /** Starts and stops a daemon in a child whose loader refuses to load `nats` at all. */
  async function startWithNatsForbidden(options: Record<string, unknown>): Promise<string> {
    const hooks = `export async function resolve(specifier, context, next) {
      if (specifier === 'nats') throw new Error('the nats package was loaded');
      return next(specifier, context);
    }`;
    const script = `
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
      const { Daemon } = await import(${JSON.stringify(join(ROOT, 'dist/daemon/daemon.js'))});
      const silent = { error() {}, warn() {}, info() {}, debug() {} };
      try {
        const daemon = await Daemon.start(${JSON.stringify(options)}, silent);
        await daemon.stop();
        console.log('started without nats');
      } catch (error) {
        console.log('failed: ' + error.message);
      }
      process.exit(0);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collectOutput(child);
    await waitForExit(child);
    return output.stdout() + output.stderr();
  }

  it('loads nothing of NATS (and the check would see it if it did)', async () => {
    const plain = await startWithNatsForbidden({ runtimeDir: tempDir(), port: 0 });
    expect(plain).toContain('started without nats');
    const joining = await startWithNatsForbidden({
      runtimeDir: tempDir(),
      port: 0,
      nats: ['nats://127.0.0.1:1'],
    });
    expect(joining).toContain('the nats package was loaded');
  });
});

/**
 * Waits, while one host stands still, for `beats` more heartbeats of another (counted by
 * `beatsOfOther`): the sleeper's clock.
 */
async function whileStill(beatsOfOther: () => number, beats: number): Promise<void> {
  const from = beatsOfOther();
  await eventually(
    () => (beatsOfOther() - from >= beats ? true : undefined),
    20_000,
    `the other host to beat ${beats} times while this one stands still`,
  );
}
