/**
 * Issue 23 item 6: one legal frame could close a reading subscriber. The smallest
 * --max-session-buffer-bytes now holds the largest notification and the largest reply
 * (src/protocol/limits.ts), and a session that reads is never closed for one big message.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import {
  FRAME_DELIMITER,
  MAX_FRAME_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_NOTIFICATION_BYTES,
  MAX_REPLY_BYTES,
  MAX_TOKEN_BYTES,
  MAX_WS_MESSAGE_BYTES,
  MIN_SESSION_BUFFER_BYTES,
} from '../../src/protocol/limits.js';
import { cleanupAll, daemonStart, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

/**
 * The text of the largest notification a legal frame makes: a full-size frame whose `_meta` is
 * numbers that grow when written again (`1e15,`, 5 bytes here, becomes `1000000000000000,`).
 */
function fullSizeFrame(token: string, progress: number): string {
  const text = (numbers: number) =>
    `{"type":"progress","data":{"v":1,"progressToken":${JSON.stringify(token)},"progress":${progress},"seq":${progress},"_meta":{"n":[${Array(numbers).fill('1e15').join(',')}]}}}`;
  const fits = Math.floor((MAX_FRAME_BYTES - text(0).length) / 5);
  const frame = text(fits);
  expect(Buffer.byteLength(frame)).toBeLessThanOrEqual(MAX_FRAME_BYTES);
  expect(Buffer.byteLength(frame)).toBeGreaterThan(MAX_FRAME_BYTES - 8);
  return `${frame}${FRAME_DELIMITER}`;
}

/** The bytes of the reply to one request with this `id`, as the WebSocket brought it. */
function replyBytes(ws: WebSocket, id: string, method: string, params: unknown): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (data: Buffer) => {
      if ((JSON.parse(data.toString('utf8')) as { id?: unknown }).id !== id) return;
      ws.off('message', onMessage);
      resolve(data.length);
    };
    ws.on('message', onMessage);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  });
}

/** The longest id a request for `method` with `params` may have: the request fills a message. */
function longestId(method: string, params: unknown): string {
  const request = JSON.stringify({ jsonrpc: '2.0', id: '', method, params });
  return 'i'.repeat(MAX_WS_MESSAGE_BYTES - Buffer.byteLength(request));
}

/** Text of `bytes` UTF-8 bytes that JSON writes six times as long (`\u0001` each). */
const controls = (bytes: number) => '\u0001'.repeat(bytes);

describe('--max-session-buffer-bytes', () => {
  it('below the largest notification and reply together is refused at start, naming the minimum', async () => {
    const result = await daemonStart(['--max-session-buffer-bytes', '65536']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--max-session-buffer-bytes');
    expect(result.stderr).toContain(String(MIN_SESSION_BUFFER_BYTES));
  });

  it('at its minimum, a reading subscriber gets every full-size notification and stays open', async () => {
    const daemon = await startDaemon([
      '--max-session-buffer-bytes',
      String(MIN_SESSION_BUFFER_BYTES),
    ]);
    const subscriber = await connectGateway(daemon.info);
    let closedWith: number | undefined;
    subscriber.ws.once('close', (code) => {
      closedWith = code;
    });
    let largest = 0;
    subscriber.ws.on('message', (data: Buffer) => {
      largest = Math.max(largest, data.length);
    });
    await subscriber.request('progress/subscribe', { progressToken: 'big', minIntervalMs: 0 });
    const worker = await rawWorker(daemon.info.socket);
    const count = 8;
    for (let i = 1; i <= count; i++) {
      worker.write(fullSizeFrame('big', i));
      await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === i);
    }
    const got = await subscriber.waitFor(count, 30_000);
    expect(got.map((n) => n.params.progress)).toEqual(
      Array.from({ length: count }, (_, i) => i + 1),
    );
    // The frames were the worst case, and the limit bounds them.
    expect(largest).toBeGreaterThan(MAX_FRAME_BYTES * 3);
    expect(largest).toBeLessThanOrEqual(MAX_NOTIFICATION_BYTES);
    const status = (await subscriber.request('progress/status')).result as {
      counters: { slowSessionsClosed: number };
    };
    expect(status.counters.slowSessionsClosed).toBe(0);
    expect(closedWith).toBeUndefined();
    await subscriber.close();
    worker.destroy();
    await daemon.stop();
  }, 60_000);

  it('the largest notification and reply the daemon can be made to send are within their limits', async () => {
    const daemon = await startDaemon([
      '--max-session-buffer-bytes',
      String(MIN_SESSION_BUFFER_BYTES),
    ]);
    const gateway = await connectGateway(daemon.info);
    const worker = await rawWorker(daemon.info.socket);
    // A notification: a full-size frame under the longest `as` token JSON can write.
    let largestNotification = 0;
    gateway.ws.on('message', (data: Buffer) => {
      if (data.includes('"method":"notifications/progress"')) {
        largestNotification = Math.max(largestNotification, data.length);
      }
    });
    await gateway.request('progress/subscribe', {
      progressToken: 'b',
      as: controls(MAX_TOKEN_BYTES),
      minIntervalMs: 0,
    });
    worker.write(fullSizeFrame('b', 1));
    await gateway.waitFor(1, 30_000);
    // A reply: a task whose stream has a full-size last value, while it works (its summary is the
    // stream's) and once it failed with the longest done message JSON can write (it keeps the
    // summary without _meta, 4.2.3), and the done stream's own summary; with the longest token,
    // asked for with the longest id.
    const replies: Record<string, number> = {};
    const reply = async (what: string, method: string, params: unknown) => {
      replies[what] = await replyBytes(gateway.ws, longestId(method, params), method, params);
    };
    for (const token of ['t', controls(MAX_TOKEN_BYTES)]) {
      const name = token === 't' ? 'short token' : 'longest token';
      worker.write(fullSizeFrame(token, 1));
      await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 1);
      worker.replies.length = 0;
      const created = await gateway.request('task/create', { progressToken: token });
      const { taskId } = (created.result as { task: { taskId: string } }).task;
      await reply(`task/get working, ${name}`, 'task/get', { taskId });
      worker.send('done', {
        v: 1,
        progressToken: token,
        status: 'error',
        message: controls(MAX_MESSAGE_BYTES),
        seq: 2,
      });
      await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 2);
      worker.replies.length = 0;
      await reply(`task/get failed, ${name}`, 'task/get', { taskId });
      await reply(`task/cancel failed, ${name}`, 'task/cancel', { taskId });
      await reply(`progress/get, ${name}`, 'progress/get', { progressToken: token });
    }
    expect(largestNotification).toBeLessThanOrEqual(MAX_NOTIFICATION_BYTES);
    for (const [what, bytes] of Object.entries(replies)) {
      // The ones with a full-size value are the worst case: the written-again value is 3x a frame.
      if (!what.includes(' failed,')) expect(bytes, what).toBeGreaterThan(MAX_FRAME_BYTES * 3);
      expect(bytes, what).toBeLessThanOrEqual(MAX_REPLY_BYTES);
    }
    await gateway.close();
    worker.destroy();
    await daemon.stop();
  }, 60_000);
});
