/**
 * The parts of the MCP side that need no daemon: what a client has shown
 * about pings, the label table of a session, and the tools' answers.
 */

import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import type { NotificationHandler } from '../../src/gateway-client/gateway-client.js';
import {
  forwardProgress,
  outsideRequest,
  PingRecord,
  pingRecordOf,
} from '../../src/mcp/forward.js';
import { sdkStreams } from '../../src/mcp/http-sessions.js';
import { getAnswer, listAnswer, progressSender, watchResult } from '../../src/mcp/mcp-server.js';
import type { McpProgressNotification } from '../../src/mcp/progress-sends.js';
import { requestChannelOf } from '../../src/mcp/relay.js';
import { statusMessageOf } from '../../src/mcp/relay-task.js';
import type { Notification, StreamSummary } from '../../src/protocol/index.js';
import { MAX_STATUS_MESSAGE_CHARS, RESULT_CONFIRM_TIMEOUT_MS } from '../../src/protocol/limits.js';
import { doneNotification, PROGRESS_METHOD } from '../../src/protocol/notifications.js';
import { PING_WAIT_FLOOR_MS } from '../../src/shared/defaults.js';
import { SubscriptionLabels } from '../../src/shared/subscription-labels.js';
import { eventually } from '../helpers/daemon.js';

describe('PingRecord', () => {
  it('waits the full confirm timeout for a client it knows nothing of', () => {
    expect(new PingRecord().waitMs()).toBe(RESULT_CONFIRM_TIMEOUT_MS);
  });

  it('stops pinging a client that never answered one', () => {
    const record = new PingRecord();
    record.unanswered();
    expect(record.waitMs()).toBe(0);
  });

  it('bounds the wait by the slowest answer of a client that answers, within floor and timeout', () => {
    const record = new PingRecord();
    record.answered(1);
    expect(record.waitMs()).toBe(PING_WAIT_FLOOR_MS);
    record.answered(300);
    expect(record.waitMs()).toBe(1200);
    record.unanswered();
    expect(record.waitMs()).toBe(1200);
    record.answered(5000);
    expect(record.waitMs()).toBe(RESULT_CONFIRM_TIMEOUT_MS);
  });

  it('confirm() records a ping that fails or answers, and skips one it should not send', async () => {
    const record = new PingRecord();
    let pings = 0;
    const failing = record.confirm(async () => {
      pings++;
      throw new Error('timed out');
    });
    await failing?.(0);
    await failing?.(0);
    expect(pings).toBe(1);
    expect(record.confirm(undefined)).toBeUndefined();
  });

  it('is kept per MCP session, per process over stdio, and not at all for stateless HTTP', () => {
    expect(pingRecordOf({ sessionId: 'a', overHttp: true })).toBe(
      pingRecordOf({ sessionId: 'a', overHttp: true }),
    );
    expect(pingRecordOf({ sessionId: 'a', overHttp: true })).not.toBe(
      pingRecordOf({ sessionId: 'b', overHttp: true }),
    );
    expect(pingRecordOf({ overHttp: false })).toBe(pingRecordOf({ overHttp: false }));
    expect(pingRecordOf({ overHttp: true })).not.toBe(pingRecordOf({ overHttp: true }));
  });
});

describe('requestChannelOf', () => {
  const signal = new AbortController().signal;
  it('reads the SDK 1.x extra, the v2 ctx and a FastMCP context; nothing else', () => {
    const v1 = requestChannelOf({
      _meta: { progressToken: 4 },
      signal,
      sendNotification: async () => {},
    });
    expect(v1).toMatchObject({ label: 4, signal });
    expect(v1?.send).toBeTypeOf('function');
    expect(v1?.ping).toBeUndefined();
    const v2 = requestChannelOf({
      mcpReq: {
        _meta: { progressToken: 'x' },
        signal,
        notify: async () => {},
        send: async () => ({}),
      },
    });
    expect(v2).toMatchObject({ label: 'x' });
    expect(v2?.ping).toBeTypeOf('function');
    // No token: nothing to send.
    expect(requestChannelOf({ signal, sendNotification: async () => {} })?.send).toBeUndefined();
    const fast = requestChannelOf({ reportProgress: async () => {}, signal });
    expect(fast).toMatchObject({ label: undefined, ping: undefined, signal });
    for (const other of [undefined, null, 7, {}, { sendNotification: 'no' }])
      expect(requestChannelOf(other)).toBeUndefined();
  });
});

describe('SubscriptionLabels', () => {
  const progress = (token: string | number, value: number): Notification => ({
    jsonrpc: '2.0',
    method: 'notifications/progress',
    params: { progressToken: token, progress: value },
  });
  const done = (token: string | number): Notification => ({
    jsonrpc: '2.0',
    method: 'notifications/progress/done',
    params: { progressToken: token, status: 'ok' },
  });

  it('routes by label, drops what does not increase, and ends at done', () => {
    const labels = new SubscriptionLabels();
    const got: Notification[] = [];
    labels.add({ progressToken: 'route', as: 1 }, (n) => got.push(n));
    expect(() => labels.add({ progressToken: 'other', as: 1 }, () => {})).toThrow(
      expect.objectContaining({ code: 'duplicate_subscription' }),
    );
    expect(labels.deliver(progress('route', 1))).toBe(false);
    expect(labels.deliver(progress(1, 1))).toBe(true);
    expect(labels.deliver(progress(1, 1))).toBe(false);
    expect(labels.deliver(progress(1, 2))).toBe(true);
    expect(labels.deliver(done(1))).toBe(true);
    expect(labels.deliver(progress(1, 3))).toBe(false);
    expect(got.map((n) => n.params)).toEqual([
      { progressToken: 1, progress: 1 },
      { progressToken: 1, progress: 2 },
      { progressToken: 1, status: 'ok' },
    ]);
    expect(labels.size).toBe(0);
  });

  it('remove() ends only its own entry', () => {
    const labels = new SubscriptionLabels();
    const first = labels.add({ progressToken: 't' }, () => {});
    expect(labels.remove(first)).toBe(true);
    const second = labels.add({ progressToken: 't' }, () => {});
    expect(labels.remove(first)).toBe(false);
    expect(labels.live()).toEqual([second]);
  });
});

describe('the tool answers', () => {
  const summary = (fields: Partial<StreamSummary>): StreamSummary => ({
    progressToken: 'job',
    state: 'active',
    subscribers: 0,
    startedAt: 1000,
    updatedAt: 4000,
    ...fields,
  });

  it('watchResult: done wins over the summary, and the duration comes from the summary', () => {
    const result = watchResult(
      'job',
      { progressToken: 1, progress: 9, total: 10, message: 'nine' },
      { progressToken: 1, status: 'ok', message: 'finished' },
      summary({ state: 'done', status: 'ok' }),
      3,
    );
    expect(result).toEqual({
      progressToken: 'job',
      state: 'done',
      timedOut: false,
      progress: 9,
      total: 10,
      message: 'finished',
      status: 'ok',
      durationMs: 3000,
      updates: 3,
    });
  });

  it('watchResult: at the timeout, the state and last value are the daemon’s', () => {
    expect(
      watchResult(
        'job',
        undefined,
        undefined,
        summary({ last: { progressToken: 'job', progress: 2 } }),
      ),
    ).toEqual({ progressToken: 'job', state: 'active', timedOut: true, progress: 2, updates: 0 });
    expect(watchResult('job', undefined, undefined, undefined)).toMatchObject({
      state: 'waiting',
      timedOut: true,
    });
  });

  it('listAnswer leaves waiting streams out; getAnswer treats one as not found', () => {
    const answer = listAnswer([summary({ state: 'waiting', progressToken: 'w' }), summary({})]);
    expect(answer.structuredContent.streams.map((s) => s.progressToken)).toEqual(['job']);
    expect(listAnswer([]).content[0]?.text).toBe('No jobs are publishing progress.');
    expect(getAnswer('w', summary({ state: 'waiting' })).structuredContent).toEqual({
      progressToken: 'w',
      found: false,
    });
    expect(getAnswer('job', summary({})).structuredContent).toMatchObject({
      found: true,
      stream: { progressToken: 'job', state: 'active' },
    });
  });
});

describe('forwardProgress', () => {
  /** A forwarding over a session whose deliveries the test makes, into a channel that records. */
  async function forwarding(failAt = Number.POSITIVE_INFINITY) {
    let deliver: NotificationHandler = () => {};
    const sent: number[] = [];
    let released = 0;
    const send = async (notification: McpProgressNotification) => {
      // As the SDK's send once its client has gone.
      if (sent.length + 1 >= failAt) throw new Error('Not connected');
      sent.push(notification.params.progress);
    };
    const session = {
      subscribe: async (_params: unknown, handler: NotificationHandler) => {
        deliver = handler;
        return { unsubscribe: async () => {} };
      },
    };
    const forwarded = await forwardProgress(
      session,
      { progressToken: 't', minIntervalMs: 0 },
      outsideRequest(undefined, send),
      {
        release: async () => {
          released++;
        },
      },
    );
    const update = (progress: number) =>
      deliver({
        jsonrpc: '2.0',
        method: PROGRESS_METHOD,
        params: { progressToken: 't', progress },
      });
    const done = () => deliver(doneNotification({ progressToken: 't', status: 'ok' }));
    return { forwarded, sent, update, done, released: () => released };
  }

  it('forwards and counts updates while forwarding; none after stop', async () => {
    const { forwarded, sent, update } = await forwarding();
    update(1);
    update(2);
    await forwarded.stop();
    update(3);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([1, 2]);
    expect(forwarded.updates).toBe(2);
    expect(forwarded.last?.progress).toBe(2);
  });

  it('a failed send (the client went away) stops by itself: the subscription is released and done settles without a stop()', async () => {
    const { forwarded, sent, update, done, released } = await forwarding(2);
    let settled = false;
    void forwarded.done.then(() => {
      settled = true;
    });
    update(1);
    update(2);
    expect(await forwarded.ended).toBe('failed');
    // A caller that awaits only `done` (relay.done) is not left hanging, even as the worker's done comes.
    done();
    await eventually(
      () => (settled ? true : undefined),
      5000,
      'done to settle after the failed send',
    );
    expect(await forwarded.done).toBeUndefined();
    expect(released()).toBe(1);
    expect(sent).toEqual([1]);
    await forwarded.stop();
    expect(released()).toBe(1);
  });

  it('forwards nothing after done', async () => {
    const { forwarded, sent, update, done } = await forwarding();
    update(1);
    done();
    update(2);
    await forwarded.done;
    expect(sent).toEqual([1]);
    expect(forwarded.updates).toBe(1);
  });
});

describe("relayTask's statusMessage", () => {
  const active: StreamSummary = {
    progressToken: 'relay-0',
    state: 'active',
    subscribers: 1,
    startedAt: 1000,
    updatedAt: 4000,
    last: { progressToken: 'relay-0', progress: 3, total: 12, message: 'encoding' },
    rate: 1.5,
    etaMs: 6000,
  };

  it('is describeStream under the label, never the route key', () => {
    expect(statusMessageOf(active, 'render')).toBe(
      '"render" active at 3/12 (25%), 1.5/s, about 6 s left: encoding',
    );
  });

  it(`is cut to ${MAX_STATUS_MESSAGE_CHARS} UTF-16 units with an ellipsis, not inside a surrogate pair`, () => {
    const long = {
      ...active,
      last: {
        ...active.last,
        progressToken: 'relay-0',
        progress: 3,
        message: `${'x'.repeat(150)}😀${'y'.repeat(200)}`,
      },
    };
    const line = statusMessageOf(long, 'render');
    expect(line).toHaveLength(MAX_STATUS_MESSAGE_CHARS);
    expect(line.endsWith('…')).toBe(true);
    expect(line.startsWith('"render" active at 3/12 (25%), 1.5/s, about 6 s left: xxx')).toBe(true);
    const atEmoji = {
      ...active,
      last: {
        ...active.last,
        progressToken: 'relay-0',
        progress: 3,
        message: `${'x'.repeat(143)}😀z`,
      },
    };
    expect(statusMessageOf(atEmoji, 'render')).toHaveLength(MAX_STATUS_MESSAGE_CHARS - 1);
  });
});

describe("/mcp's direct progress sends", () => {
  it("find the SDK transport's SSE streams where the pinned SDK keeps them (else every send pays its checks)", () => {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => 'id' });
    expect(sdkStreams(transport)).toBeDefined();
  });
});

describe('progressSender', () => {
  /** A server on one end of the SDK's in-memory pair; what reaches the other end, and each send's options. */
  async function connected() {
    const server = new McpServer({ name: 'test', version: '0' });
    const [serverEnd, clientEnd] = InMemoryTransport.createLinkedPair();
    const received: JSONRPCMessage[] = [];
    const options: Array<TransportSendOptions | undefined> = [];
    clientEnd.onmessage = (message) => received.push(message);
    await clientEnd.start();
    const send = serverEnd.send.bind(serverEnd);
    serverEnd.send = (message, sendOptions) => {
      options.push(sendOptions);
      return send(message, sendOptions);
    };
    await server.connect(serverEnd);
    return { server, received, options };
  }

  const update = (progress: number): McpProgressNotification => ({
    method: PROGRESS_METHOD,
    params: { progressToken: 'call', progress },
  });

  /** The parts of the SDK's handler extra that progressSender reads. */
  function extraOf(fields: { signal?: AbortSignal; taskId?: string }) {
    const viaSdk: unknown[] = [];
    const extra = {
      requestId: 7,
      signal: fields.signal ?? new AbortController().signal,
      taskId: fields.taskId,
      sendNotification: async (notification: unknown) => {
        viaSdk.push(notification);
      },
    };
    return { extra: extra as unknown as Parameters<typeof progressSender>[1], viaSdk };
  }

  it('sends each update as a JSON-RPC notification tied to its request, as the SDK would', async () => {
    const { server, received, options } = await connected();
    const send = progressSender(server, extraOf({}).extra);
    await send(update(1));
    await send(update(2));
    expect(received).toEqual([
      { jsonrpc: '2.0', ...update(1) },
      { jsonrpc: '2.0', ...update(2) },
    ]);
    expect(options).toEqual([{ relatedRequestId: 7 }, { relatedRequestId: 7 }]);
  });

  it('sends nothing once the request is cancelled, and says so by resolving', async () => {
    const { server, received } = await connected();
    const cancel = new AbortController();
    const send = progressSender(server, extraOf({ signal: cancel.signal }).extra);
    await send(update(1));
    cancel.abort();
    await expect(send(update(2))).resolves.toBeUndefined();
    expect(received).toEqual([{ jsonrpc: '2.0', ...update(1) }]);
  });

  it("leaves a task's request to the SDK, which queues its notifications for tasks/result", async () => {
    const { server, received } = await connected();
    const { extra, viaSdk } = extraOf({ taskId: 'task-1' });
    await progressSender(server, extra)(update(1));
    expect(viaSdk).toEqual([update(1)]);
    expect(received).toEqual([]);
  });

  it('rejects, as the SDK does, on a server that is not connected', async () => {
    const server = new McpServer({ name: 'test', version: '0' });
    await expect(progressSender(server, extraOf({}).extra)(update(1))).rejects.toMatchObject({
      code: 'closed',
      message: expect.stringContaining('not connected'),
    });
  });
});
