/**
 * The NATS backplane across three real daemons and a real nats-server -js:
 * a worker on host A, sessions on hosts B and C (docs/BACKPLANE.md).
 */
import { connect as natsConnect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenSubject } from '../../src/daemon/backplane-names.js';
import { BACKPLANE_MAX_HOSTS } from '../../src/shared/defaults.js';
import { cleanupAll, eventually, type RunningDaemon } from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import {
  doneOf,
  expectIncreasing,
  fresh,
  notificationsOf,
  startHost as startOn,
  subscribe,
} from './hosts.js';
import { natsServer, type RunningNats, startNats } from './nats-server.js';

const startHost = (nats: RunningNats, name: string, extra: string[] = []) =>
  startOn(nats.url, name, extra);

describe.skipIf(natsServer.skip)('the NATS backplane', () => {
  beforeAll(() => natsServer.require());
  let nats: RunningNats;
  let a: RunningDaemon;
  let b: RunningDaemon;
  let onB: GatewayClient;
  let worker: RawWorker;

  beforeAll(async () => {
    nats = await startNats();
    [a, b] = await Promise.all([startHost(nats, 'host-a'), startHost(nats, 'host-b')]);
    onB = await connectGateway(b.info);
    worker = await rawWorker(a.info.socket);
  });

  afterAll(async () => {
    worker?.destroy();
    await onB?.close();
    await Promise.all([a?.stop(), b?.stop()]);
    await nats?.stop();
    cleanupAll();
  });

  it('a worker on host A reaches a session on host B: params verbatim, increasing, done once, nothing after', async () => {
    const token = fresh('cross');
    await subscribe(onB, token, 42);
    const sent = [
      { progress: 1, total: 10, message: 'one' },
      { progress: 2.5, total: 10, _meta: { stage: 'b' } },
      { progress: 9, message: 'nine' },
    ];
    for (const fields of sent) worker.send('progress', { v: 1, progressToken: token, ...fields });
    worker.send('done', { v: 1, progressToken: token, status: 'ok', message: 'finished' });
    await doneOf(onB, 42);
    // The worker's own values, under the subscriber's label: nothing added, rounded or dropped.
    const received = notificationsOf(onB, 42);
    expect(received.map((n) => n.params)).toEqual([
      ...sent.map((fields) => ({ progressToken: 42, ...fields })),
      { progressToken: 42, status: 'ok', message: 'finished' },
    ]);
    expectIncreasing(received);
    // Nothing after done, even when the worker tries again.
    worker.send('progress', { v: 1, progressToken: token, progress: 100 });
    await worker.reply(
      (r) =>
        r.type === 'rejected' && (r.data as { progressToken?: unknown }).progressToken === token,
    );
    const pingToken = fresh('after-done');
    await subscribe(onB, pingToken);
    worker.send('progress', { v: 1, progressToken: pingToken, progress: 1 });
    await eventually(() => (notificationsOf(onB, pingToken).length > 0 ? true : undefined));
    expect(notificationsOf(onB, 42)).toHaveLength(4);
  });

  it('keeps string "7" and integer 7 apart across hosts', async () => {
    const text = `7-${fresh('t')}`;
    const number = 700_000 + Math.floor(Math.random() * 100_000);
    await subscribe(onB, text);
    await subscribe(onB, number);
    worker.send('progress', { v: 1, progressToken: text, progress: 1 });
    worker.send('progress', { v: 1, progressToken: number, progress: 2 });
    worker.send('progress', { v: 1, progressToken: String(number), progress: 3 });
    await eventually(() => (notificationsOf(onB, number).length > 0 ? true : undefined));
    await eventually(() => (notificationsOf(onB, text).length > 0 ? true : undefined));
    expect(notificationsOf(onB, number).map((n) => n.params)).toEqual([
      { progressToken: number, progress: 2 },
    ]);
    const got = await onB.request('progress/get', { progressToken: String(number) });
    expect((got.result as { stream?: { last?: unknown } }).stream?.last).toEqual({
      progressToken: String(number),
      progress: 3,
    });
    const gotNumber = await onB.request('progress/get', { progressToken: number });
    expect((gotNumber.result as { stream?: { last?: unknown } }).stream?.last).toEqual({
      progressToken: number,
      progress: 2,
    });
  });

  it('remote streams appear in progress/list and progress/get with their host; a late joiner on host C gets the last value', async () => {
    const token = fresh('late');
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    worker.send('progress', { v: 1, progressToken: token, progress: 5, message: 'five' });
    const summary = await eventually(async () => {
      const reply = await onB.request('progress/get', { progressToken: token });
      const stream = (reply.result as { stream?: Record<string, unknown> }).stream;
      return (stream?.last as { progress?: number } | undefined)?.progress === 5
        ? stream
        : undefined;
    });
    expect(summary).toMatchObject({ state: 'active', host: 'host-a' });
    const list = await onB.request('progress/list');
    const listed = (list.result as { streams: Array<Record<string, unknown>> }).streams.find(
      (s) => s.progressToken === token,
    );
    expect(listed).toMatchObject({ host: 'host-a', state: 'active' });
    // A's own view names itself.
    const onA = await connectGateway(a.info);
    const local = await onA.request('progress/get', { progressToken: token });
    expect((local.result as { stream?: Record<string, unknown> }).stream?.host).toBe('host-a');
    await onA.close();

    // Host C joins after the values were sent: it learns the last one from the store.
    const c = await startHost(nats, 'host-c');
    const onC = await connectGateway(c.info);
    try {
      await eventually(async () => {
        const reply = await onC.request('progress/get', { progressToken: token });
        const stream = (reply.result as { stream?: { state?: string } }).stream;
        return stream?.state === 'active' ? true : undefined;
      });
      await subscribe(onC, token);
      await eventually(() => (notificationsOf(onC, token).length > 0 ? true : undefined));
      expect(notificationsOf(onC, token).map((n) => n.params)).toEqual([
        { progressToken: token, progress: 5, message: 'five' },
      ]);
      worker.send('done', { v: 1, progressToken: token });
      expect(await doneOf(onC, token)).toEqual({ progressToken: token, status: 'ok' });
      expect(notificationsOf(onC, token)).toHaveLength(2);
    } finally {
      await onC.close();
      await c.stop();
    }
  });

  it("the store is fed each stream's latest message at most every 100 ms, not every value: a paused stream's last value and its end are stored", async () => {
    const token = fresh('kept');
    const kept = `mcp-progress.k.host-a.${tokenSubject(token)}`;
    const nc = await natsConnect({ servers: nats.url });
    try {
      const jsm = await nc.jetstreamManager();
      const stored = async () =>
        JSON.parse(
          (await jsm.streams.getMessage('mcp-progress_streams', { last_by_subj: kept })).string(),
        ) as { kind: string; params: { progress?: number }; last?: { progress: number } };
      const writesBefore = (await jsm.streams.info('mcp-progress_streams')).state.last_seq;
      await subscribe(onB, token);
      const count = 2000;
      for (let i = 1; i <= count; i++) {
        worker.send('progress', { v: 1, progressToken: token, progress: i });
      }
      await eventually(() => (notificationsOf(onB, token).length === count ? true : undefined));
      // The worker pauses: the last value still reaches the store.
      await eventually(
        async () =>
          (await stored().catch(() => undefined))?.params.progress === count ? true : undefined,
        10_000,
        `value ${count} in the store`,
      );
      worker.send('done', { v: 1, progressToken: token });
      await doneOf(onB, token);
      await eventually(
        async () => ((await stored()).kind === 'done' ? true : undefined),
        10_000,
        'the done in the store',
      );
      expect(await stored()).toMatchObject({ kind: 'done', last: { progress: count } });
      // Every value went live; a few went to the store (one per 100 ms while they came).
      const writes = (await jsm.streams.info('mcp-progress_streams')).state.last_seq - writesBefore;
      expect(writes).toBeGreaterThanOrEqual(2);
      expect(writes).toBeLessThan(count / 20);
      expectIncreasing(notificationsOf(onB, token));
    } finally {
      await nc.close();
    }
  });

  it('progress/cancel on host B reaches the worker on host A', async () => {
    const token = fresh('cancel');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    await eventually(() => (notificationsOf(onB, token).length > 0 ? true : undefined));
    const reply = await onB.request('progress/cancel', { progressToken: token, reason: 'stop it' });
    expect(reply.result).toEqual({ workers: 1 });
    const cancel = await worker.reply(
      (r) => r.type === 'cancel' && (r.data as { progressToken?: unknown }).progressToken === token,
    );
    expect(cancel.data).toEqual({ progressToken: token, reason: 'stop it' });
  });

  it('the second host to publish a token gets token_in_use; the first keeps its stream', async () => {
    const token = fresh('twice');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    await eventually(() => (notificationsOf(onB, token).length > 0 ? true : undefined));
    const second = await rawWorker(b.info.socket);
    try {
      second.send('progress', { v: 1, progressToken: token, progress: 50, seq: 1 });
      const rejected = await second.reply((r) => r.type === 'rejected');
      expect(rejected.data).toMatchObject({ code: 'token_in_use', progressToken: token, seq: 1 });
      expect((rejected.data as { message: string }).message).toContain('host-a');
      second.send('done', { v: 1, progressToken: token, seq: 2 });
      await second.reply((r) => r.type === 'rejected' && (r.data as { seq?: number }).seq === 2);
    } finally {
      second.destroy();
    }
    worker.send('progress', { v: 1, progressToken: token, progress: 2 });
    await eventually(() => (notificationsOf(onB, token).length > 1 ? true : undefined));
    expect(notificationsOf(onB, token).map((n) => n.params.progress)).toEqual([1, 2]);
  });

  it('a claim of a token another host publishes is refused with token_in_use naming that host', async () => {
    const token = fresh('claimed-elsewhere');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    await eventually(() => (notificationsOf(onB, token).length > 0 ? true : undefined));
    const claimant = await rawWorker(b.info.socket);
    try {
      claimant.send('claim', { v: 1, progressToken: token, seq: 7 });
      const rejected = await claimant.reply((r) => (r.data as { seq?: number }).seq === 7);
      expect(rejected.type).toBe('rejected');
      expect(rejected.data).toMatchObject({ code: 'token_in_use', progressToken: token });
      expect((rejected.data as { message: string }).message).toContain('host host-a');
      // Not a claimant: a cancel made on B reaches the worker on A, and not this connection.
      const reply = await onB.request('progress/cancel', { progressToken: token });
      expect(reply.result).toEqual({ workers: 1 });
      await worker.reply(
        (r) =>
          r.type === 'cancel' && (r.data as { progressToken?: unknown }).progressToken === token,
      );
      const own = fresh('own-claim');
      claimant.send('claim', { v: 1, progressToken: own, seq: 8 });
      expect((await claimant.reply((r) => (r.data as { seq?: number }).seq === 8)).type).toBe(
        'ack',
      );
      expect(claimant.replies.filter((r) => r.type === 'cancel')).toEqual([]);
    } finally {
      claimant.destroy();
    }
  });

  it('a message another program put on the subjects is ignored, and the daemons go on', async () => {
    const nc = await natsConnect({ servers: nats.url });
    nc.publish('mcp-progress.s.intruder.bm90LWEtdG9rZW4', 'not json');
    nc.publish(
      'mcp-progress.s.intruder.Nw',
      JSON.stringify({ kind: 'progress', params: { progressToken: 8, progress: 1 } }),
    );
    nc.publish(
      'mcp-progress.s.intruder.Nw',
      JSON.stringify({ kind: 'progress', params: { progressToken: 7, progress: 'x' } }),
    );
    nc.publish('mcp-progress.h.intruder', '[]');
    // Invented hosts by the thousand: the table of hosts stays bounded.
    for (let i = 0; i < 1100; i++) {
      nc.publish(`mcp-progress.h.invented-${i}`, JSON.stringify({ v: 1, state: 'up' }));
    }
    nc.publish('mcp-progress.c.host-a', JSON.stringify({ progressToken: { no: 1 } }));
    await nc.flush();
    await nc.close();
    await eventually(() =>
      b.stderr().includes('backplane: ignored a message') ? true : undefined,
    );
    const token = fresh('after-bad');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 1 });
    await eventually(() => (notificationsOf(onB, token).length > 0 ? true : undefined));
    const got = await onB.request('progress/get', { progressToken: 7 });
    expect(got.result).toEqual({});
    const status = (await onB.request('progress/status')).result as {
      backplane: { hosts: unknown[]; invalidMessages: number };
    };
    expect(status.backplane.hosts.length).toBeLessThanOrEqual(BACKPLANE_MAX_HOSTS);
    expect(status.backplane.invalidMessages).toBeGreaterThan(50);
  });
});

describe.skipIf(natsServer.skip)('a host that dies', () => {
  beforeAll(() => natsServer.require());
  let nats: RunningNats;
  afterAll(async () => {
    await nats?.stop();
    cleanupAll();
  });

  it('has its streams marked abandoned on the others after the grace, once', async () => {
    nats = await startNats();
    const [a, b] = await Promise.all([startHost(nats, 'doomed'), startHost(nats, 'watcher')]);
    const onB = await connectGateway(b.info);
    const worker = await rawWorker(a.info.socket);
    const token = fresh('doomed');
    await subscribe(onB, token);
    worker.send('progress', { v: 1, progressToken: token, progress: 3 });
    await eventually(() => (notificationsOf(onB, token).length > 0 ? true : undefined));
    a.child.kill('SIGKILL');
    const done = await doneOf(onB, token);
    expect(done).toMatchObject({ progressToken: token, status: 'abandoned' });
    expect(String(done.message)).toContain('host doomed left the backplane');
    expect(notificationsOf(onB, token).map((n) => n.method)).toEqual([
      'notifications/progress',
      'notifications/progress/done',
    ]);
    worker.destroy();
    await onB.close();
    await b.stop();
  });
});

describe.skipIf(natsServer.skip)('a late joiner and a large store', () => {
  beforeAll(() => natsServer.require());
  let nats: RunningNats;
  afterAll(async () => {
    await nats?.stop();
    cleanupAll();
  });

  it('reads every stream of a store larger than one pull of the catch-up, each at its end and last value', async () => {
    nats = await startNats();
    const a = await startHost(nats, 'host-a');
    // 600 finished streams of a host "many", two values each on their kept subjects: the store
    // keeps the last of each.
    const count = 600;
    const tokens = Array.from({ length: count }, (_, i) => `many-${process.pid}-${i}`);
    const subject = (token: string) => `mcp-progress.k.many.${tokenSubject(token)}`;
    const nc = await natsConnect({ servers: nats.url });
    for (const token of tokens) {
      nc.publish(
        subject(token),
        JSON.stringify({ v: 1, kind: 'progress', params: { progressToken: token, progress: 1 } }),
      );
      nc.publish(
        subject(token),
        JSON.stringify({
          v: 1,
          kind: 'done',
          params: { progressToken: token, status: 'ok' },
          last: { progressToken: token, progress: 2 },
        }),
      );
    }
    await nc.flush();
    const jsm = await nc.jetstreamManager();
    await eventually(async () =>
      (await jsm.streams.info('mcp-progress_streams')).state.messages === count ? true : undefined,
    );
    await nc.close();

    const c = await startHost(nats, 'host-c');
    const onC = await connectGateway(c.info);
    try {
      const list = await onC.request('progress/list');
      const streams = (list.result as { streams: Array<Record<string, unknown>> }).streams.filter(
        (s) => s.host === 'many',
      );
      expect(streams.map((s) => s.progressToken).sort()).toEqual([...tokens].sort());
      for (const stream of streams) {
        expect(stream).toMatchObject({ state: 'done', status: 'ok', last: { progress: 2 } });
      }
      expect(c.stderr()).not.toContain('cannot catch up');
    } finally {
      await onC.close();
      await Promise.all([c.stop(), a.stop()]);
    }
  });
});
