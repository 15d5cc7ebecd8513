/**
 * End to end through real processes: the built CLI runs the daemon, a
 * standard-library Python worker publishes over the Unix socket, and a real
 * `ws` client subscribes through the gateway.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { pythonRawClient } from '../helpers/python.js';

const daemon = daemonForFile();

const progress = (data: Record<string, unknown>) => ({ type: 'progress', data: { v: 1, ...data } });

describe('worker to gateway, verbatim', () => {
  it('delivers params deep-equal to what a Python worker sent, string and integer tokens intact', async () => {
    const gateway = await connectGateway(daemon.info);
    for (const progressToken of ['7', 7, 'ü-job']) {
      expect(
        await gateway.request('progress/subscribe', { progressToken, minIntervalMs: 0 }),
      ).toEqual({
        jsonrpc: '2.0',
        id: expect.any(Number),
        result: {},
      });
    }
    const sent = [
      { progressToken: '7', progress: 1, total: 10, message: 'string seven' },
      {
        progressToken: 7,
        progress: 0.25,
        total: 1,
        _meta: { step: 'render', nested: { list: [1, 'a', null] } },
      },
      { progressToken: 'ü-job', progress: 3 },
      { progressToken: 7, progress: 0.5, message: '' },
    ];
    const result = await pythonRawClient(
      daemon.info.socket,
      sent.map((data, i) => progress({ ...data, seq: i + 1 })),
    );
    expect(result.replies).toEqual(sent.map((_, i) => ({ type: 'ack', data: { seq: i + 1 } })));
    const got = await gateway.waitFor(sent.length);
    expect(got.map((n) => n.method)).toEqual(sent.map(() => 'notifications/progress'));
    // Per token, in order; across tokens, the order they were sent.
    expect(got.map((n) => n.params)).toEqual(sent);
    expect(typeof got[0]?.params.progressToken).toBe('string');
    expect(typeof got[1]?.params.progressToken).toBe('number');
    await gateway.close();
  });

  it('delivers a notification longer than 65,535 bytes whole (a 64-bit WebSocket length)', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'wide', minIntervalMs: 0 });
    // 1e15 is 4 bytes in the frame and 16 in the notification: a frame under the limit that
    // becomes a notification well over 65,535 bytes.
    const numbers = Array.from({ length: 10_000 }, () => '1e15').join(',');
    const frame = `{"type":"progress","data":{"v":1,"progressToken":"wide","progress":1,"_meta":{"n":[${numbers}]},"seq":1}}\f`;
    const result = await pythonRawClient(daemon.info.socket, [frame], 1);
    expect(result.replies).toEqual([{ type: 'ack', data: { seq: 1 } }]);
    const [got] = await gateway.waitFor(1);
    expect(got?.params).toEqual({
      progressToken: 'wide',
      progress: 1,
      _meta: { n: Array.from({ length: 10_000 }, () => 1e15) },
    });
    expect(JSON.stringify(got).length).toBeGreaterThan(65_535);
    await gateway.close();
  });

  it('fans out to every subscriber and relabels with `as`', async () => {
    const a = await connectGateway(daemon.info);
    const b = await connectGateway(daemon.info);
    await a.request('progress/subscribe', { progressToken: 'route-abc', as: 1, minIntervalMs: 0 });
    await b.request('progress/subscribe', { progressToken: 'route-abc', as: 1, minIntervalMs: 0 });
    const c = await connectGateway(daemon.info);
    await c.request('progress/subscribe', { progressToken: 'route-abc', minIntervalMs: 0 });
    await pythonRawClient(daemon.info.socket, [
      progress({ progressToken: 'route-abc', progress: 5, seq: 1 }),
      {
        type: 'done',
        data: { v: 1, progressToken: 'route-abc', status: 'ok', message: 'fin', seq: 2 },
      },
    ]);
    for (const client of [a, b]) {
      expect(await client.waitFor(2)).toEqual([
        { method: 'notifications/progress', params: { progressToken: 1, progress: 5 } },
        {
          method: 'notifications/progress/done',
          params: { progressToken: 1, status: 'ok', message: 'fin' },
        },
      ]);
    }
    expect((await c.waitFor(2))[0]?.params.progressToken).toBe('route-abc');
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  it('lists streams with their last value and state', async () => {
    const gateway = await connectGateway(daemon.info);
    await pythonRawClient(daemon.info.socket, [
      progress({ progressToken: 'listed', progress: 2, total: 4, seq: 1 }),
    ]);
    const reply = await gateway.request('progress/list');
    const streams = (reply.result as { streams: Array<Record<string, unknown>> }).streams;
    const listed = streams.find((s) => s.progressToken === 'listed');
    expect(listed).toMatchObject({
      progressToken: 'listed',
      state: 'active',
      subscribers: 0,
      last: { progressToken: 'listed', progress: 2, total: 4 },
    });
    expect(Math.abs((listed?.updatedAt as number) - Date.now())).toBeLessThan(60_000);
    await gateway.close();
  });

  it('sends cancel to the worker connection that published the token', async () => {
    const worker = connect(daemon.info.socket);
    worker.setEncoding('utf8');
    let received = '';
    worker.on('data', (t: string) => {
      received += t;
    });
    await new Promise((r) => worker.once('connect', r));
    worker.write(
      `${JSON.stringify(progress({ progressToken: 'cancel-me', progress: 1, seq: 1 }))}\f`,
    );
    await expect.poll(() => received).toContain('"ack"');
    const gateway = await connectGateway(daemon.info);
    const reply = await gateway.request('progress/cancel', {
      progressToken: 'cancel-me',
      reason: 'user asked',
    });
    expect(reply.result).toEqual({ workers: 1 });
    await expect.poll(() => received).toContain('"cancel"');
    const cancel = received.split('\f').find((f) => f.includes('"cancel"'));
    expect(JSON.parse(cancel ?? '{}')).toEqual({
      type: 'cancel',
      data: { progressToken: 'cancel-me', reason: 'user asked' },
    });
    worker.destroy();
    await gateway.close();
  });
});

describe('bad input gets a clear answer and hurts no one else', () => {
  /** An honest subscriber and publisher that must not notice the bad clients. */
  let watcher: GatewayClient;
  let honestProgress = 0;
  const honest = async () => {
    honestProgress++;
    const result = await pythonRawClient(daemon.info.socket, [
      progress({ progressToken: 'honest', progress: honestProgress, seq: honestProgress }),
    ]);
    expect(result.replies).toEqual([{ type: 'ack', data: { seq: honestProgress } }]);
  };

  beforeAll(async () => {
    watcher = await connectGateway(daemon.info);
    await watcher.request('progress/subscribe', { progressToken: 'honest', minIntervalMs: 0 });
  });
  afterAll(async () => {
    expect(watcher.notifications.map((n) => n.params.progress)).toEqual(
      Array.from({ length: honestProgress }, (_, i) => i + 1),
    );
    await watcher.close();
  });

  const frameErrors: Array<[string, unknown, string, RegExp]> = [
    ['data null', { type: 'progress', data: null }, 'invalid_frame', /must be a JSON object/],
    ['data an array', { type: 'progress', data: [1, 2] }, 'invalid_frame', /got an array/],
    [
      'missing v',
      { type: 'progress', data: { progressToken: 'x', progress: 1 } },
      'unsupported_version',
      /field v is missing/,
    ],
    [
      'v 2',
      progress({ v: 2, progressToken: 'x' }),
      'unsupported_version',
      /field v: expected the number 1/,
    ],
    [
      '1e999',
      '{"type":"progress","data":{"v":1,"progressToken":"x","progress":1e999}}\f',
      'invalid_field',
      /field progress: .*Infinity/,
    ],
    [
      'an unknown field',
      progress({ progressToken: 'x', colour: 'red' }),
      'unknown_field',
      /unknown field "colour"/,
    ],
    ['an empty token', progress({ progressToken: '' }), 'invalid_token', /progressToken/],
    ['a fractional token', progress({ progressToken: 1.5 }), 'invalid_token', /safe integer/],
    [
      'total below zero',
      progress({ progressToken: 'x', total: -1 }),
      'invalid_field',
      /field total/,
    ],
    [
      'a bad done status',
      { type: 'done', data: { v: 1, progressToken: 'x', status: 'failed' } },
      'invalid_field',
      /field status/,
    ],
    [
      'an unknown event',
      { type: 'progres', data: {} },
      'unknown_event',
      /workers send progress, done/,
    ],
  ];

  for (const [name, frame, code, message] of frameErrors) {
    it(`${name}: rejected ${code}, the connection stays open`, async () => {
      const result = await pythonRawClient(
        daemon.info.socket,
        [frame, progress({ progressToken: `after-${name}`, progress: 1, seq: 99 })],
        2,
      );
      expect(result.replies[0]).toMatchObject({ type: 'rejected', data: { code } });
      expect(String(result.replies[0]?.data.message)).toMatch(message);
      // The same connection goes on working.
      expect(result.replies[1]).toEqual({ type: 'ack', data: { seq: 99 } });
      expect(result.closed).toBe(false);
      await honest();
    });
  }

  it('names the token and seq of a rejected frame when they were valid', async () => {
    const result = await pythonRawClient(daemon.info.socket, [
      progress({ progressToken: 'corr', total: 'ten', seq: 41 }),
    ]);
    expect(result.replies[0]).toMatchObject({
      type: 'rejected',
      data: { code: 'invalid_field', progressToken: 'corr', seq: 41 },
    });
  });

  const framingErrors: Array<[string, string, string]> = [
    ['a null envelope', 'null\f', 'invalid_envelope'],
    ['an array envelope', '[1,2]\f', 'invalid_envelope'],
    ['invalid JSON', '{"type":"progress",\f', 'invalid_json'],
    [
      'an oversize frame',
      `{"type":"progress","data":{"v":1,"progressToken":"big","message":"${'x'.repeat(70_000)}"}}\f`,
      'frame_too_large',
    ],
    ['a reserved event name', '{"type":"error","data":{}}\f', 'reserved_event'],
    ['a prototype event name', '{"type":"__proto__","data":{}}\f', 'invalid_envelope'],
  ];

  for (const [name, raw, code] of framingErrors) {
    it(`${name}: rejected ${code}, then the connection closes`, async () => {
      const result = await pythonRawClient(daemon.info.socket, [raw], 1);
      expect(result.replies).toHaveLength(1);
      expect(result.replies[0]).toMatchObject({ type: 'rejected', data: { code } });
      expect(String(result.replies[0]?.data.message).length).toBeGreaterThan(20);
      expect(result.closed).toBe(true);
      await honest();
    });
  }

  it('answers frames before a framing error, and none after it', async () => {
    const result = await pythonRawClient(
      daemon.info.socket,
      [
        progress({ progressToken: 'pre', progress: 1, seq: 1 }),
        'not json\f',
        progress({ progressToken: 'post', progress: 1, seq: 2 }),
      ],
      3,
    );
    expect(result.replies.map((r) => r.type)).toEqual(['ack', 'rejected']);
    expect(result.closed).toBe(true);
  });
});
