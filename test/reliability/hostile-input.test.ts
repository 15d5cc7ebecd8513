/**
 * Hostile input against a real daemon: a fuzzer over frames and envelopes and
 * a corpus of adversarial inputs. The daemon never crashes, its memory stays
 * bounded, and an honest worker and subscriber on other connections keep a
 * 100% delivery record throughout.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REJECT_CODES } from '../../src/protocol/errors.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  runCli,
  startDaemon,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { type HonestPair, honestPair } from '../helpers/honest.js';
import { rawWorker } from '../helpers/worker.js';

let daemon: RunningDaemon;
let honest: HonestPair;

beforeAll(async () => {
  daemon = await startDaemon(['--frame-timeout-ms', '300', '--max-streams-per-connection', '1000']);
  honest = await honestPair(daemon.info);
  honest.run();
});

afterAll(async () => {
  const delivered = await honest.finish();
  expect(delivered).toBeGreaterThan(10);
  // Still alive and answering after everything.
  expect((await runCli(['status', '--socket', daemon.info.socket])).code).toBe(0);
  expect(daemon.child.exitCode).toBeNull();
  expect(await daemon.stop()).toBe(0);
  cleanupAll();
});

async function status(): Promise<{ memory: { rss: number }; connections: number }> {
  return JSON.parse((await runCli(['status', '--json', '--socket', daemon.info.socket])).stdout);
}

/** A claim no generated input makes: its ack proves every earlier frame of the connection was answered. */
const SENTINEL_SEQ = Number.MAX_SAFE_INTEGER;
const SENTINEL = `{"type":"claim","data":{"v":1,"progressToken":"hostile-sentinel","seq":${SENTINEL_SEQ}}}\f`;

/**
 * Sends bytes on a fresh connection, ended by a form feed if they were not (so that an
 * unfinished frame is judged now, not at the frame timeout), then a sentinel claim. Waits
 * for the event that ends the case: the daemon closes the connection, or acks the
 * sentinel. `codes` are the rejections before it.
 */
async function hit(bytes: string | Buffer): Promise<{ closed: boolean; codes: string[] }> {
  const worker = await rawWorker(daemon.info.socket);
  const data = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
  const ended = data.length > 0 && data[data.length - 1] === 0x0c;
  worker.write(Buffer.concat([data, Buffer.from(ended ? '' : '\f'), Buffer.from(SENTINEL)]));
  const isSentinel = (r: { type: string; data: unknown }) =>
    (r.data as { seq?: unknown } | undefined)?.seq === SENTINEL_SEQ;
  await eventually(
    () => (worker.isClosed() || worker.replies.some(isSentinel) ? true : undefined),
    15_000,
    'the daemon to close the connection or answer the sentinel',
  );
  const closed = !worker.replies.some(isSentinel);
  if (closed) await worker.closed;
  worker.destroy();
  return {
    closed,
    codes: worker.replies
      .filter((r) => r.type === 'rejected' && !isSentinel(r))
      .map((r) => String((r.data as { code: string }).code)),
  };
}

const json = (value: unknown) => `${JSON.stringify(value)}\f`;

describe('fuzzing frames and envelopes', () => {
  it('survives arbitrary bytes, envelopes and frame data', async () => {
    const eventName = fc.oneof(
      fc.constantFrom(
        'progress',
        'done',
        'ping',
        'status',
        'error',
        'connect',
        '__proto__',
        'constructor',
        'toString',
        'hasOwnProperty',
        '',
      ),
      fc.string({ maxLength: 300 }),
    );
    const frameData = fc.oneof(
      fc.jsonValue(),
      fc.record(
        {
          v: fc.oneof(fc.constant(1), fc.jsonValue()),
          progressToken: fc.oneof(fc.string({ maxLength: 40 }), fc.integer(), fc.jsonValue()),
          progress: fc.oneof(fc.double(), fc.jsonValue()),
          total: fc.oneof(fc.double(), fc.jsonValue()),
          message: fc.oneof(fc.string(), fc.jsonValue()),
          _meta: fc.jsonValue(),
          seq: fc.oneof(fc.nat(), fc.jsonValue()),
          status: fc.oneof(fc.constantFrom('ok', 'error', 'cancelled'), fc.jsonValue()),
        },
        { requiredKeys: [] },
      ),
    );
    const input = fc.oneof(
      fc.uint8Array({ maxLength: 4096 }).map((bytes) => Buffer.from(bytes)),
      fc.tuple(eventName, frameData).map(([type, data]) => json({ type, data })),
      fc
        .array(fc.tuple(eventName, frameData), { maxLength: 20 })
        .map((frames) => frames.map(([type, data]) => json({ type, data })).join('')),
      fc.jsonValue().map((value) => json(value)),
      fc.string({ maxLength: 500 }).map((text) => `${text}\f`),
    );
    await fc.assert(
      fc.asyncProperty(input, async (bytes) => {
        const { closed, codes } = await hit(bytes);
        for (const code of codes) expect(Object.keys(REJECT_CODES)).toContain(code);
        // A connection is closed only after a framing error, and then it says which.
        if (closed) expect(codes.length).toBeGreaterThan(0);
        expect(daemon.child.exitCode).toBeNull();
      }),
      { numRuns: 300 },
    );
  });
});

describe('an adversarial corpus', () => {
  it('invalid UTF-8 inside and outside strings', async () => {
    const bad = Buffer.concat([
      Buffer.from('{"type":"progress","data":{"v":1,"progressToken":"'),
      Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
      Buffer.from('","progress":1}}\f'),
    ]);
    const result = await hit(bad);
    // Never U+FFFD: the worker socket decodes bytes itself, UTF-8 before JSON.
    expect(result).toEqual({ closed: true, codes: ['invalid_utf8'] });
    const raw = await hit(Buffer.from([0xff, 0xfe, 0xfd, 0x0c]));
    expect(raw.codes).toEqual(['invalid_utf8']);
    expect(raw.closed).toBe(true);
  });

  it('thousands of unknown fields get a short rejected, and the connection stays open', async () => {
    const data: Record<string, unknown> = { v: 1, progressToken: 'many-fields' };
    for (let i = 0; i < 5000; i++) data[`f${i}`] = 0;
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', data);
    worker.send('progress', { v: 1, progressToken: 'many-fields', progress: 1, seq: 1 });
    const rejected = await worker.reply((r) => r.type === 'rejected');
    const { code, message } = rejected.data as { code: string; message: string };
    expect(code).toBe('unknown_field');
    expect(message).toContain('and 4990 more');
    expect(message.length).toBeLessThan(1024);
    expect((await worker.reply((r) => r.type === 'ack')).data).toEqual({ seq: 1 });
    expect(worker.isClosed()).toBe(false);
    worker.destroy();
  });

  it('deeply nested JSON: refused in data and past the depth cap in _meta; nothing leaks between sessions', async () => {
    const depth = 30_000;
    const nested = `{"type":"progress","data":${'['.repeat(depth)}${']'.repeat(depth)}}\f`;
    const result = await hit(nested);
    expect(result).toEqual({ closed: false, codes: ['invalid_frame'] });
    // Subscribers with coalescing off and on: serialising a 30,000-deep _meta would overflow the stack.
    const watcher = await connectGateway(daemon.info);
    const held = await connectGateway(daemon.info);
    await watcher.request('progress/subscribe', { progressToken: 'deep', minIntervalMs: 0 });
    await held.request('progress/subscribe', { progressToken: 'deep', minIntervalMs: 100 });
    const worker = await rawWorker(daemon.info.socket);
    const deepMeta = (levels: number) =>
      `{"type":"progress","data":{"v":1,"progressToken":"deep","seq":${levels},"_meta":${'['.repeat(levels - 1).replace(/^/, '{"a":')}${']'.repeat(levels - 1)}}}}\f`;
    worker.write(deepMeta(depth));
    const refused = await worker.reply((r) => (r.data as { seq?: number }).seq === depth);
    expect(refused).toMatchObject({ type: 'rejected', data: { code: 'invalid_field' } });
    expect((refused.data as { message: string }).message).toContain('_meta');
    worker.write(deepMeta(32));
    expect((await worker.reply((r) => (r.data as { seq?: number }).seq === 32)).type).toBe('ack');
    worker.write(deepMeta(33));
    expect((await worker.reply((r) => (r.data as { seq?: number }).seq === 33)).type).toBe(
      'rejected',
    );
    await watcher.waitFor(1);
    await held.waitFor(1);
    // Another stream right after: each session gets its own stream's payloads, nothing else.
    const other = await connectGateway(daemon.info);
    await other.request('progress/subscribe', { progressToken: 'after-deep', minIntervalMs: 0 });
    worker.send('progress', { v: 1, progressToken: 'after-deep', progress: 1, seq: 1 });
    await other.waitFor(1);
    expect(other.notifications.map((n) => n.params.progressToken)).toEqual(['after-deep']);
    for (const session of [watcher, held])
      expect(session.notifications.map((n) => n.params.progressToken)).toEqual(['deep']);
    expect(worker.isClosed()).toBe(false);
    worker.destroy();
    await Promise.all([watcher.close(), held.close(), other.close()]);
  });

  it('10 MB without a delimiter is cut off at the frame limit', async () => {
    const worker = await rawWorker(daemon.info.socket);
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    for (let i = 0; i < 10 && !worker.isClosed(); i++) worker.write(chunk);
    await worker.closed;
    expect(worker.replies.map((r) => (r.data as { code: string }).code)).toEqual([
      'frame_too_large',
    ]);
  });

  it('half a frame followed by silence times out and closes', async () => {
    const worker = await rawWorker(daemon.info.socket);
    worker.write('{"type":"progress","data":{"v":1,"progre');
    await worker.closed;
    expect(worker.replies).toEqual([
      {
        type: 'rejected',
        data: { code: 'frame_timeout', message: expect.stringContaining('300 ms') },
      },
    ]);
  });

  it('whitespace after a frame (a newline, CRLF) is not the start of a frame: no frame_timeout', async () => {
    const spaced = await rawWorker(daemon.info.socket);
    spaced.write(`${json({ type: 'ping', data: {} })}\r\n \t`);
    await spaced.reply((r) => r.type === 'pong');
    // A half frame written after the whitespace: its timer runs out first only if the newline armed none.
    const stalled = await rawWorker(daemon.info.socket);
    stalled.write('{"type":"progress"');
    await stalled.closed;
    expect(spaced.isClosed()).toBe(false);
    // A frame after the whitespace is read as usual, and blank frames are skipped.
    spaced.write(`\n\f${json({ type: 'ping', data: {} })}\n`);
    await eventually(() => (spaced.replies.length === 2 ? true : undefined));
    expect(spaced.replies.map((r) => r.type)).toEqual(['pong', 'pong']);
    spaced.destroy();
  });

  it('a busy connection whose reads end mid-frame is not timed out', async () => {
    const subscriber = await connectGateway(daemon.info);
    await subscriber.request('progress/subscribe', { progressToken: 'busy', minIntervalMs: 0 });
    const worker = await rawWorker(daemon.info.socket);
    const frame = (i: number) =>
      json({ type: 'progress', data: { v: 1, progressToken: 'busy', progress: i, seq: i } });
    const ackOrRefusal = (seq: number) => (r: { type: string; data: unknown }) =>
      r.type === 'rejected' || (r.data as { seq?: number }).seq === seq;
    // Its first half frame, after a ping: the pong says the daemon has read it and started its clock.
    let pending = frame(1).slice(0, 20);
    worker.write(`${json({ type: 'ping', data: {} })}${pending}`);
    await worker.reply((r) => r.type === 'pong');
    // Half a frame and silence on another connection, started later: when it times out, the busy
    // connection's first half frame would have timed out too, had its clock not restarted.
    const stalled = await rawWorker(daemon.info.socket);
    stalled.write('{"type":"progress"');
    // Each write completes the previous frame and starts the next: the buffer is never empty.
    // The next write waits for the daemon's ack of the frame just completed, not for a clock.
    let seq = 1;
    for (; !stalled.isClosed(); seq++) {
      const next = frame(seq + 1);
      worker.write(`${frame(seq).slice(20)}${next.slice(0, 20)}`);
      pending = next;
      if ((await worker.reply(ackOrRefusal(seq))).type === 'rejected') break;
    }
    worker.write(pending.slice(20));
    await worker.reply(ackOrRefusal(seq));
    expect(worker.replies.map((r) => r.type)).toEqual(['pong', ...Array(seq).fill('ack')]);
    expect(worker.isClosed()).toBe(false);
    expect(stalled.replies.map((r) => (r.data as { code?: string }).code)).toEqual([
      'frame_timeout',
    ]);
    // Every frame cut across two reads was taken whole: the subscriber saw each value once, in order.
    const seen = (await subscriber.waitFor(seq)).map((n) => n.params.progress);
    expect(seen).toEqual(Array.from({ length: seq }, (_, i) => i + 1));
    await subscriber.close();
    worker.destroy();
  });

  it('__proto__ and constructor keys anywhere', async () => {
    const inputs = [
      '{"type":"progress","data":{"v":1,"progressToken":"p","__proto__":{"polluted":1}}}\f',
      '{"type":"progress","data":{"v":1,"progressToken":"p","constructor":{"prototype":{"polluted":1}}}}\f',
      '{"type":"progress","__proto__":{"polluted":1},"data":{"v":1,"progressToken":"p2"}}\f',
      '{"type":"progress","data":{"v":1,"progressToken":"p3","_meta":{"__proto__":{"polluted":1}}}}\f',
      '{"type":"constructor","data":{}}\f',
    ];
    const worker = await rawWorker(daemon.info.socket);
    for (const input of inputs.slice(0, 4)) worker.write(input);
    await worker.reply(
      (r) => r.type === 'rejected' && (r.data as { code: string }).code === 'unknown_field',
    );
    const last = await hit(inputs[4] ?? '');
    expect(last).toEqual({ closed: true, codes: ['invalid_envelope'] });
    worker.destroy();
  });

  it('huge and tiny numbers', async () => {
    const worker = await rawWorker(daemon.info.socket);
    const cases = ['1e308', '5e-324', '-0', '1e999', '-1e999', '123456789012345678901234567890'];
    for (const [i, n] of cases.entries()) {
      worker.write(
        `{"type":"progress","data":{"v":1,"progressToken":"num-${i}","progress":${n},"seq":${i}}}\f`,
      );
    }
    for (let i = 0; i < cases.length; i++)
      await worker.reply((r) => (r.data as { seq?: number }).seq === i);
    // Finite and within ±(2^53 - 1) only: 1e308 and a 30-digit integer would not survive an int64 or exact reading.
    expect(worker.replies.map((r) => r.type)).toEqual([
      'rejected',
      'ack',
      'ack',
      'rejected',
      'rejected',
      'rejected',
    ]);
    worker.destroy();
  });

  it('100,000 distinct tokens from one connection stay within the caps and memory', async () => {
    const before = await status();
    const worker = await rawWorker(daemon.info.socket);
    // In batches, reading the answers as they come: a worker that never reads is disconnected (1 MiB of replies).
    for (let batch = 0; batch < 100; batch++) {
      const frames: string[] = [];
      for (let i = batch * 1000; i < (batch + 1) * 1000; i++) {
        frames.push(
          json({ type: 'progress', data: { v: 1, progressToken: `flood-${i}`, progress: 1 } }),
        );
      }
      worker.write(frames.join(''));
      worker.send('ping', {});
      const pongs = batch + 1;
      await eventually(() =>
        worker.replies.filter((r) => r.type === 'pong').length === pongs ? true : undefined,
      );
    }
    const rejected = worker.replies.filter((r) => r.type === 'rejected');
    expect(rejected).toHaveLength(99_000);
    expect(new Set(rejected.map((r) => (r.data as { code: string }).code))).toEqual(
      new Set(['too_many_streams']),
    );
    worker.destroy();
    const after = await status();
    const grew = after.memory.rss - before.memory.rss;
    console.log(
      `100,000 tokens from one connection: 1,000 accepted, 99,000 refused; daemon RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher`,
    );
    expect(grew).toBeLessThan(200 * 1024 * 1024);
  });

  it('1,000 connections opened and dropped leave nothing behind', async () => {
    const before = await status();
    // In rounds of 100, each connection answered before it is dropped: a Unix socket's connect
    // succeeds as soon as it is queued, so without waiting a client outruns accept() and the
    // listen queue refuses it (EAGAIN) past its backlog.
    for (let round = 0; round < 10; round++) {
      const workers = await Promise.all(
        Array.from({ length: 100 }, () => rawWorker(daemon.info.socket)),
      );
      for (const w of workers) w.send('ping', {});
      await Promise.all(workers.map((w) => w.reply((r) => r.type === 'pong')));
      for (const w of workers) w.destroy();
    }
    await expect
      .poll(async () => (await status()).connections, { timeout: 10_000 })
      .toBe(before.connections);
  });
});

/**
 * Sends raw bytes to the gateway's HTTP port; resolves with all that came back before the daemon
 * closed the connection ('' when it closed without a word, or said nothing for 5 s).
 */
function rawHttp(bytes: string): Promise<string> {
  const { port } = new URL(daemon.info.url);
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port) });
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      answer += chunk;
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(answer));
    socket.setTimeout(5000, () => socket.destroy());
    socket.write(bytes);
  });
}

describe('JSON-RPC ids that a double cannot hold', () => {
  it('are echoed exactly as sent (1e999 was echoed as null, a 30-digit id rounded)', async () => {
    const gateway = await connectGateway(daemon.info);
    const raw: string[] = [];
    gateway.ws.on('message', (data: Buffer) => raw.push(data.toString('utf8')));
    const ids = [
      '1e999',
      '-1e999',
      '123456789012345678901234567890',
      '0.1000000000000000055511151231257827',
    ];
    for (const id of ids) {
      gateway.ws.send(
        `{"jsonrpc":"2.0","id":${id},"method":"progress/get","params":{"progressToken":"none"}}`,
      );
      // An error reply echoes it too.
      gateway.ws.send(`{"jsonrpc":"2.0","id":${id},"method":"progress/nope"}`);
    }
    const replies = await eventually(() => (raw.length >= ids.length * 2 ? raw : undefined));
    ids.forEach((id, i) => {
      expect(replies[2 * i]).toBe(`{"jsonrpc":"2.0","id":${id},"result":{}}`);
      expect(replies[2 * i + 1]).toMatch(
        new RegExp(
          `^\\{"jsonrpc":"2\\.0","id":${id.replace(/[.]/g, '\\.')},"error":\\{"code":-32601,`,
        ),
      );
    });
    // Ids a double holds are echoed as before.
    expect((await gateway.request('progress/get', { progressToken: 'none' })).result).toEqual({});
    await gateway.close();
  });
});

/** How a refusal's body (one JSON-RPC error) begins its message when the message begins with `text`. */
function message(text: string): string {
  return `"message": ${JSON.stringify(text).slice(0, -1)}`;
}

/** Matches a whole HTTP/1.1 answer: its status line and, anywhere in its body, `text` verbatim. */
function answer(status: number, text: string): RegExp {
  const quoted = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^HTTP/1\\.1 ${status} [^]*${quoted}`);
}

describe('hostile HTTP requests to the gateway port', () => {
  it('answers request targets that no URL parser accepts, and goes on serving', async () => {
    // Each gets the answer a well-formed target of its path gets: the path is what precedes '?'.
    // The daemon's own Host: any other name is 421 before the target is looked at.
    const host = new URL(daemon.info.url).host;
    for (const target of ['//', '//x?access_token=a', '/%', '/mcp?%zz', 'http://[', '*', '/\\']) {
      const path = target.split('?')[0] ?? '';
      const asked = `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n`;
      expect(await rawHttp(`${asked}Connection: close\r\n\r\n`), target).toMatch(
        path === '/mcp'
          ? answer(401, message('the secret is missing: send `Authorization: Bearer <secret>`'))
          : answer(404, message(`nothing is served at ${path}: the WebSocket gateway is at /ws`)),
      );
      expect(
        await rawHttp(`${asked}Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n`),
        `${target} (upgrade)`,
      ).toMatch(answer(404, message(`no WebSocket endpoint at ${path}: use /ws`)));
      expect(daemon.child.exitCode, target).toBeNull();
    }
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 200 }), async (target) => {
        await rawHttp(
          `GET ${target.replace(/[\s]/g, '')}x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        );
        expect(daemon.child.exitCode).toBeNull();
      }),
      { numRuns: 100 },
    );
    const health = await fetch(new URL('/healthz', daemon.info.url.replace(/^ws/, 'http')));
    expect(health.status).toBe(200);
  });
});
