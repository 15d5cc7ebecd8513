/**
 * Issue 23 item 6: one legal frame could close a reading subscriber. The smallest
 * --max-session-buffer-bytes now holds the largest notification and the largest reply
 * (src/protocol/limits.ts), and a session that reads is never closed for one big message.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  FRAME_DELIMITER,
  MAX_FRAME_BYTES,
  MAX_NOTIFICATION_BYTES,
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
});
