/** Faults the daemon must absorb: workers that vanish, subscribers that stop reading. */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { MIN_SESSION_BUFFER_BYTES } from '../../src/protocol/limits.js';
import { cleanupAll, eventually, runCli, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { honestPair } from '../helpers/honest.js';
import { pythonRawClient } from '../helpers/python.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

/** A daemon that abandons a stream GRACE_MS after its worker is gone, and a gateway watching TOKEN. */
async function watching(token: string, graceMs: number) {
  const daemon = await startDaemon(['--abandon-grace-ms', String(graceMs)]);
  const watcher = await connectGateway(daemon.info);
  await watcher.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
  return {
    daemon,
    watcher,
    /** Closes the watcher, then stops the daemon. */
    async stop(): Promise<void> {
      await watcher.close();
      await daemon.stop();
    },
  };
}

describe('a worker that dies without done', () => {
  it('ends its stream as abandoned after the grace period, so nobody waits for ever', async () => {
    const { daemon, watcher, stop } = await watching('orphan', 300);
    // A separate Python process publishes, then exits without done.
    await pythonRawClient(daemon.info.socket, [
      { type: 'progress', data: { v: 1, progressToken: 'orphan', progress: 3, seq: 1 } },
    ]);
    const [progress, done] = await watcher.waitFor(2);
    expect(progress?.params).toEqual({ progressToken: 'orphan', progress: 3 });
    expect(done).toEqual({
      method: 'notifications/progress/done',
      params: {
        progressToken: 'orphan',
        status: 'abandoned',
        message: expect.stringContaining('within 0.3 s'),
      },
    });
    await stop();
  });

  it('a worker that claimed its token and died before its first update is abandoned too', async () => {
    const { daemon, watcher, stop } = await watching('stillborn', 300);
    await pythonRawClient(daemon.info.socket, [
      { type: 'claim', data: { v: 1, progressToken: 'stillborn', seq: 1 } },
    ]);
    const [done] = await watcher.waitFor(1);
    expect(done).toMatchObject({
      method: 'notifications/progress/done',
      params: { progressToken: 'stillborn', status: 'abandoned' },
    });
    await stop();
  });

  it('a worker that reconnects within the grace period keeps its stream', async () => {
    const { daemon, watcher, stop } = await watching('phoenix', 5000);
    await pythonRawClient(daemon.info.socket, [
      { type: 'progress', data: { v: 1, progressToken: 'phoenix', progress: 1, seq: 1 } },
    ]);
    await pythonRawClient(daemon.info.socket, [
      { type: 'progress', data: { v: 1, progressToken: 'phoenix', progress: 2, seq: 1 } },
      { type: 'done', data: { v: 1, progressToken: 'phoenix', seq: 2 } },
    ]);
    expect((await watcher.waitFor(3)).map((n) => n.params.status ?? n.params.progress)).toEqual([
      1,
      2,
      'ok',
    ]);
    await stop();
  });
});

/** A WebSocket client written by hand, so that it can stop reading entirely. */
async function stalledSubscriber(url: string, secret: string, token: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `GET /ws HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Protocol: mcp-progress.v1\r\nAuthorization: Bearer ${secret}\r\n\r\n`,
  );
  await new Promise<void>((resolve) => {
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
  });
  sendRequest(socket, 1, 'progress/subscribe', { progressToken: token, minIntervalMs: 0 });
  socket.pause();
  return socket;
}

/** Writes one JSON-RPC request as a masked WebSocket text frame (a client must mask). */
function sendRequest(socket: Socket, id: number, method: string, params: object): void {
  const payload = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] ?? 0)));
  socket.write(
    Buffer.concat([
      Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]),
      mask,
      masked,
    ]),
  );
}

/** Reads a paused WebSocket to its end and returns the close code the server sent. */
async function closeCodeOf(socket: Socket): Promise<number | undefined> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.resume();
  await new Promise((resolve) => socket.once('close', resolve));
  let data = Buffer.concat(chunks);
  while (data.length >= 2) {
    const opcode = (data[0] ?? 0) & 0x0f;
    let length = (data[1] ?? 0) & 0x7f;
    let offset = 2;
    if (length === 126) {
      length = data.readUInt16BE(2);
      offset = 4;
    } else if (length === 127) {
      length = Number(data.readBigUInt64BE(2));
      offset = 10;
    }
    if (data.length < offset + length) return undefined;
    if (opcode === 0x8) return data.readUInt16BE(offset);
    data = data.subarray(offset + length);
  }
  return undefined;
}

describe('a WebSocket subscriber that stops reading', () => {
  it('is closed with 4008 when the replies to its own requests pass the buffer cap', async () => {
    const daemon = await startDaemon([
      '--max-session-buffer-bytes',
      String(MIN_SESSION_BUFFER_BYTES),
    ]);
    const stalled = await stalledSubscriber(daemon.info.url, daemon.info.secret, 'unread');
    // Each status reply is about 450 bytes. Loopback buffers can grow to tens of MiB (tcp_rmem), so
    // the test asks in batches until the daemon says it closed the session, rather than guessing a count.
    let id = 2;
    const slowClosed = async () => {
      for (const end = id + 10_000; id < end; id++) sendRequest(stalled, id, 'progress/status', {});
      const status = JSON.parse(
        (await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout,
      );
      return status.counters.slowSessionsClosed === 1 ? true : undefined;
    };
    await eventually(slowClosed, 60_000, 'the stalled session to be closed as slow');
    expect(await closeCodeOf(stalled)).toBe(4008);
    await daemon.stop();
  }, 90_000);

  it('is closed with 4008 past the buffer cap; memory stays bounded; other subscribers are unaffected', async () => {
    const cap = 1024 * 1024;
    const daemon = await startDaemon(['--max-session-buffer-bytes', String(cap)]);
    const token = 'firehose';
    const stalled = await stalledSubscriber(daemon.info.url, daemon.info.secret, token);
    const healthy = await connectGateway(daemon.info);
    await healthy.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const honest = await honestPair(daemon.info);
    const statusOf = async () =>
      JSON.parse((await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout);
    await expect
      .poll(async () => (await statusOf()).subscriptions, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(3);
    const before = await statusOf();
    const worker = await rawWorker(daemon.info.socket);
    const padding = 'x'.repeat(1000);
    const frames = 40_000; // about 40 MB of notifications for the stalled reader
    for (let i = 1; i <= frames; i += 500) {
      const batch: string[] = [];
      for (let j = i; j < i + 500; j++)
        batch.push(
          `{"type":"progress","data":{"v":1,"progressToken":"${token}","progress":${j},"message":"${padding}"}}\f`,
        );
      worker.write(batch.join(''));
      worker.send('ping', {});
      const pongs = Math.ceil(i / 500);
      await eventually(() =>
        worker.replies.filter((r) => r.type === 'pong').length >= pongs ? true : undefined,
      );
      await honest.step();
    }
    const after = await statusOf();
    expect(after.counters.slowSessionsClosed).toBe(1);
    // 40 MB went past the stalled reader; the daemon held at most its cap for it.
    const grew = after.memory.rss - before.memory.rss;
    console.log(
      `slow consumer: ${frames} frames of ~1 KB past a stalled reader; daemon RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher, session closed 4008`,
    );
    // The bound itself, from the daemon's own account rather than RSS (which GC timing moves):
    // it held at most the cap, plus the one notification that passed it, for the stalled reader.
    const unread = /websocket session \d+ closed: (\d+) bytes unread/i.exec(daemon.stderr());
    expect(unread, daemon.stderr()).not.toBeNull();
    expect(Number(unread?.[1])).toBeGreaterThan(cap);
    expect(Number(unread?.[1])).toBeLessThanOrEqual(cap + 2048);
    expect(await closeCodeOf(stalled)).toBe(4008);
    await healthy.waitFor(frames, 30_000);
    expect(healthy.notifications.at(-1)?.params.progress).toBe(frames);
    expect(healthy.notifications.map((n) => n.params.progress)).toEqual(
      Array.from({ length: frames }, (_, i) => i + 1),
    );
    await honest.finish();
    worker.destroy();
    await healthy.close();
    await daemon.stop();
  });
});
