/** Each cap answers with its documented error, and the daemon goes on serving everyone else. */

import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connectPublisher } from '../../src/client/index.js';
import { encodeFrame } from '../../src/protocol/wire.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  runCli,
  startDaemon,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { honestPair } from '../helpers/honest.js';
import { httpBase } from '../helpers/mcp.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

const code = (data: unknown) => (data as { code?: string }).code;

/** The other session still answers, with no stream made by the refused one; then both end. */
async function expectUnharmed(session: GatewayClient, daemon: RunningDaemon): Promise<void> {
  expect((await session.request('progress/list')).result).toEqual({ streams: [] });
  await session.close();
  await daemon.stop();
}

describe('limits', () => {
  it('max connections: the connection past the cap gets too_many_connections and is closed', async () => {
    const daemon = await startDaemon(['--max-connections', '4']);
    const honest = await honestPair(daemon.info);
    const held = await Promise.all([1, 2, 3].map(() => rawWorker(daemon.info.socket)));
    const extra = await rawWorker(daemon.info.socket);
    await extra.closed;
    expect(extra.replies).toEqual([
      {
        type: 'rejected',
        data: {
          code: 'too_many_connections',
          message: expect.stringContaining('--max-connections'),
        },
      },
    ]);
    await honest.step();
    for (const w of held) w.destroy();
    // Room again once the daemon has seen those connections close (asked over the gateway,
    // since a status request on the socket would itself need a connection).
    const gateway = await connectGateway(daemon.info);
    await expect
      .poll(
        async () =>
          ((await gateway.request('progress/status')).result as { connections: number })
            .connections,
        { timeout: 10_000 },
      )
      .toBe(1);
    await gateway.close();
    const later = await rawWorker(daemon.info.socket);
    later.send('ping', {});
    await later.reply((r) => r.type === 'pong');
    later.destroy();
    await honest.finish();
    const status = JSON.parse(
      (await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout,
    );
    expect(status.counters.connectionsRefused).toBe(1);
    await daemon.stop();
  });

  it('a publisher refused for --max-connections comes back with backoff, not at once, and gets in once there is room', async () => {
    const daemon = await startDaemon(['--max-connections', '1']);
    const held = await rawWorker(daemon.info.socket);
    const refused: Array<{ at: number; message: string }> = [];
    const publisher = await connectPublisher({
      token: 'waits-its-turn',
      socket: daemon.info.socket,
      intervalMs: 0,
      onError: (error) => {
        if (error.code === 'too_many_connections')
          refused.push({ at: performance.now(), message: error.message });
      },
    });
    publisher.update({ progress: 1 });
    await eventually(() => (refused.length >= 6 ? true : undefined), 30_000, 'six refusals');
    expect(refused[0]?.message).toContain('--max-connections');
    expect(refused[0]?.message).toContain('reconnecting with backoff');
    // The waits before reconnects double from 25-50 ms: at least 25 + 50 + 100 + 200 + 400 ms
    // from the first refusal to the sixth. Coming back at once, they were 25-50 ms apart.
    const first = refused[0]?.at ?? 0;
    const sixth = refused[5]?.at ?? 0;
    expect(sixth - first).toBeGreaterThanOrEqual(775);
    const watcher = await connectGateway(daemon.info);
    await watcher.request('progress/subscribe', { progressToken: 'waits-its-turn' });
    held.destroy();
    const [value] = await watcher.waitFor(1, 10_000);
    expect(value?.params.progress).toBe(1);
    await publisher.close();
    await watcher.close();
    await daemon.stop();
  });

  it('max streams: a full table of active streams refuses new ones; existing streams go on', async () => {
    const daemon = await startDaemon(['--max-streams', '3']);
    const worker = await rawWorker(daemon.info.socket);
    for (let i = 1; i <= 4; i++) worker.send('progress', { v: 1, progressToken: `s${i}`, seq: i });
    const fourth = await worker.reply((r) => (r.data as { seq?: number }).seq === 4);
    expect(fourth).toMatchObject({
      type: 'rejected',
      data: { code: 'too_many_streams', progressToken: 's4' },
    });
    worker.send('progress', { v: 1, progressToken: 's1', seq: 5 });
    expect((await worker.reply((r) => (r.data as { seq?: number }).seq === 5)).type).toBe('ack');
    // A done stream makes room: the oldest done stream is evicted for a new one.
    worker.send('done', { v: 1, progressToken: 's2', seq: 6 });
    worker.send('progress', { v: 1, progressToken: 's4', seq: 7 });
    expect((await worker.reply((r) => (r.data as { seq?: number }).seq === 7)).type).toBe('ack');
    worker.destroy();
    await daemon.stop();
  });

  it('max streams: subscribing to new tokens no worker publishes stops at the cap with -32002', async () => {
    const daemon = await startDaemon(['--max-streams', '2']);
    const gateway = await connectGateway(daemon.info);
    expect((await gateway.request('progress/subscribe', { progressToken: 'w1' })).result).toEqual(
      {},
    );
    expect((await gateway.request('progress/subscribe', { progressToken: 'w2' })).result).toEqual(
      {},
    );
    const refused = await gateway.request('progress/subscribe', { progressToken: 'w3' });
    expect(refused.error).toMatchObject({ code: -32002, data: { code: 'too_many_streams' } });
    expect(refused.error?.message).toContain('--max-streams');
    // Leaving a waiting stream makes room.
    await gateway.request('progress/unsubscribe', { progressToken: 'w1' });
    expect((await gateway.request('progress/subscribe', { progressToken: 'w3' })).result).toEqual(
      {},
    );
    await gateway.close();
    await daemon.stop();
  });

  it('max claims: claims of all connections together stop at the cap with too_many_claims; held ones go on', async () => {
    const daemon = await startDaemon(['--max-claims', '3']);
    const honest = await honestPair(daemon.info);
    const first = await rawWorker(daemon.info.socket);
    const second = await rawWorker(daemon.info.socket);
    const seq = (n: number) => (r: { data: unknown }) => (r.data as { seq?: number }).seq === n;
    first.send('claim', { v: 1, progressToken: 'c1', seq: 1 });
    first.send('claim', { v: 1, progressToken: 'c2', seq: 2 });
    expect((await first.reply(seq(2))).type).toBe('ack');
    // The cap counts claims, not tokens: a second connection claiming c1 takes the third.
    second.send('claim', { v: 1, progressToken: 'c1', seq: 3 });
    expect((await second.reply(seq(3))).type).toBe('ack');
    second.send('claim', { v: 1, progressToken: 'c3', seq: 4 });
    const refused = await second.reply(seq(4));
    expect(refused).toMatchObject({
      type: 'rejected',
      data: { code: 'too_many_claims', progressToken: 'c3' },
    });
    expect((refused.data as { message: string }).message).toContain('--max-claims');
    // A claim already held is not a new one, and the claimed tokens still publish and hear cancels.
    second.send('claim', { v: 1, progressToken: 'c1', seq: 5 });
    expect((await second.reply(seq(5))).type).toBe('ack');
    const gateway = await connectGateway(daemon.info);
    expect(
      (await gateway.request('progress/cancel', { progressToken: 'c1' })).result,
    ).toMatchObject({ workers: 2 });
    first.send('progress', { v: 1, progressToken: 'c2', progress: 1, seq: 6 });
    expect((await first.reply(seq(6))).type).toBe('ack');
    // Claims end with their connection: room again.
    first.destroy();
    await first.closed;
    let next = 7;
    await expect
      .poll(
        async () => {
          const n = next++;
          second.send('claim', { v: 1, progressToken: 'c3', seq: n });
          return (await second.reply(seq(n))).type;
        },
        { timeout: 10_000 },
      )
      .toBe('ack');
    await honest.finish();
    const status = JSON.parse(
      (await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout,
    );
    expect(status.counters.framesRejected.too_many_claims).toBe(next - 7);
    expect(status.claims).toBe(2);
    second.destroy();
    await gateway.close();
    await daemon.stop();
  });

  it('max subscriptions per session: -32001 too_many_subscriptions; other sessions unaffected', async () => {
    const daemon = await startDaemon(['--max-subscriptions', '2']);
    const greedy = await connectGateway(daemon.info);
    expect((await greedy.request('progress/subscribe', { progressToken: 'a' })).result).toEqual({});
    expect((await greedy.request('progress/subscribe', { progressToken: 'b' })).result).toEqual({});
    const refused = await greedy.request('progress/subscribe', { progressToken: 'c' });
    expect(refused.error).toMatchObject({ code: -32001, data: { code: 'too_many_subscriptions' } });
    expect(refused.error?.message).toContain('--max-subscriptions');
    const other = await connectGateway(daemon.info);
    expect((await other.request('progress/subscribe', { progressToken: 'c' })).result).toEqual({});
    await Promise.all([greedy.close(), other.close()]);
    await daemon.stop();
  });

  it('max sessions: the session past the cap gets HTTP 503', async () => {
    const daemon = await startDaemon(['--max-sessions', '1']);
    const first = await connectGateway(daemon.info);
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(daemon.info.url, 'mcp-progress.v1', {
        headers: { authorization: `Bearer ${daemon.info.secret}` },
      });
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('open', () => resolve(101));
      ws.once('error', () => {});
    });
    expect(status).toBe(503);
    await expectUnharmed(first, daemon);
  });

  it('frame size: a frame over 64 KiB is refused, a frame just under is accepted', async () => {
    const daemon = await startDaemon();
    const honest = await honestPair(daemon.info);
    const envelope = (message: string) =>
      `{"type":"progress","data":{"v":1,"progressToken":"size","_meta":{"pad":"${message}"},"seq":1}}\f`;
    const overhead = envelope('').length - 1;
    const fits = await rawWorker(daemon.info.socket);
    fits.write(envelope('x'.repeat(65_536 - overhead)));
    expect(await fits.reply(() => true)).toEqual({ type: 'ack', data: { seq: 1 } });
    const tooBig = await rawWorker(daemon.info.socket);
    tooBig.write(envelope('x'.repeat(65_537 - overhead)));
    await tooBig.closed;
    expect(tooBig.replies.map((r) => code(r.data))).toEqual(['frame_too_large']);
    await honest.step();
    fits.destroy();
    await honest.finish();
    await daemon.stop();
  });

  it('a worker that never reads its replies is disconnected, and /metrics counts it', async () => {
    const daemon = await startDaemon();
    const honest = await honestPair(daemon.info);
    const deaf = connect({ path: daemon.info.socket });
    await new Promise<void>((resolve) => deaf.once('connect', () => resolve()));
    // It reads nothing: its replies fill the socket, then the daemon's buffer for it (1 MiB).
    deaf.pause();
    deaf.on('error', () => {});
    const closed = new Promise<void>((resolve) => deaf.once('close', () => resolve()));
    const request = encodeFrame('status', {});
    const batch = request.repeat(500);
    let sent = 0;
    const writeMore = () => {
      while (!deaf.destroyed && sent < 40_000) {
        sent += 500;
        if (!deaf.write(batch)) return;
      }
    };
    deaf.on('drain', writeMore);
    writeMore();
    await closed;
    const metrics = await (
      await fetch(`${httpBase(daemon.info)}/metrics`, {
        headers: { authorization: `Bearer ${daemon.info.secret}` },
      })
    ).text();
    expect(metrics).toMatch(/^mcp_progress_unread_replies_closed_total 1$/m);
    expect(daemon.stderr()).toContain('bytes of replies unread');
    await honest.step();
    await honest.finish();
    await daemon.stop();
  }, 60_000);

  it('a WebSocket message over 64 KiB closes that session with 1009; others go on', async () => {
    const daemon = await startDaemon();
    const big = await connectGateway(daemon.info);
    const other = await connectGateway(daemon.info);
    const closed = new Promise<number>((resolve) => big.ws.once('close', (c) => resolve(c)));
    big.ws.send('x'.repeat(70_000));
    expect(await closed).toBe(1009);
    await expectUnharmed(other, daemon);
  });

  it('a message in more fragments than the WebSocket layer takes closes that session with 1008; others go on', async () => {
    const daemon = await startDaemon();
    const fragmented = await connectGateway(daemon.info);
    const other = await connectGateway(daemon.info);
    const closed = new Promise<number>((resolve) => fragmented.ws.once('close', (c) => resolve(c)));
    // ws takes at most 16,384 fragments of one message (PROTOCOL.md 4.5); one byte each.
    for (let i = 0; i < 16_400 && fragmented.ws.readyState === fragmented.ws.OPEN; i++)
      fragmented.ws.send('x', { fin: false });
    expect(await closed).toBe(1008);
    await expectUnharmed(other, daemon);
  });
});
