/**
 * The session hub seen from outside: one --max-sessions for every kind of
 * session, every kind counted, and the unread-buffer cap on /mcp SSE too.
 */
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Daemon } from '../../src/daemon/daemon.js';
import { GatewayClient as NodeGatewayClient } from '../../src/gateway-client/gateway-client.js';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { silentLogger } from '../../src/shared/log.js';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import {
  connectHttp,
  connectStdio,
  httpBase,
  postMcp,
  postRaw,
  RAW_INITIALIZE,
  type TappedClient,
  textOf,
  watchCall,
  watchParams,
} from '../helpers/mcp.js';
import { NEWEST_REVISION } from '../helpers/mcp-v2.js';
import { type RawWorker, rawWorker, workerStatus } from '../helpers/worker.js';

afterAll(() => cleanupAll());

type Status = {
  sessions: number;
  subscriptions: number;
  memory: { rss: number };
  counters: { slowSessionsClosed: number };
};

const statusOf = (worker: RawWorker) => workerStatus<Status>(worker);

/** Opens a WebSocket session; resolves with 101 or the HTTP status and body of the refusal. */
function tryWebSocket(info: DaemonInfo): Promise<{ status: number; body: string; ws?: WebSocket }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(info.url, 'mcp-progress.v1', {
      headers: { authorization: `Bearer ${info.secret}` },
    });
    ws.once('unexpected-response', (_request, response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (text: string) => {
        body += text;
      });
      response.once('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    ws.once('open', () => resolve({ status: 101, body: '', ws }));
    ws.once('error', () => {});
  });
}

/** A raw initialize POST: the HTTP status and body text. */
async function tryMcp(info: DaemonInfo): Promise<{ status: number; body: string }> {
  const response = await postMcp(`${httpBase(info)}/mcp`, RAW_INITIALIZE, {
    authorization: `Bearer ${info.secret}`,
  });
  return { status: response.status, body: await response.text() };
}

/** Ends an SDK client's /mcp session (DELETE), as a well-behaved client does. */
async function endMcp(client: TappedClient): Promise<void> {
  await (client.client.transport as StreamableHTTPClientTransport).terminateSession();
  await client.close();
}

describe('--max-sessions caps every kind of session together', () => {
  it('refuses a third session whatever mix of WebSocket and /mcp the first two were', async () => {
    const daemon = await startDaemon(['--max-sessions', '2']);
    const worker = await rawWorker(daemon.info.socket);
    const mixes = [
      ['websocket', 'websocket'],
      ['websocket', 'mcp'],
      ['mcp', 'websocket'],
      ['mcp', 'mcp'],
    ] as const;
    for (const mix of mixes) {
      const closers: Array<() => Promise<void>> = [];
      for (const kind of mix) {
        if (kind === 'websocket') {
          const gateway = await connectGateway(daemon.info);
          closers.push(() => gateway.close());
        } else {
          const mcp = await connectHttp(daemon.info);
          closers.push(() => endMcp(mcp));
        }
      }
      expect((await statusOf(worker)).sessions, mix.join('+')).toBe(2);
      const refusedWs = await tryWebSocket(daemon.info);
      expect(refusedWs.status, `WebSocket after ${mix.join('+')}`).toBe(503);
      expect(refusedWs.body).toContain('--max-sessions');
      const refusedMcp = await tryMcp(daemon.info);
      expect(refusedMcp.status, `/mcp after ${mix.join('+')}`).toBe(503);
      expect(JSON.parse(refusedMcp.body).error.message).toContain('--max-sessions');
      for (const close of closers) await close();
      await eventually(async () => ((await statusOf(worker)).sessions === 0 ? true : undefined));
    }
    // With the places free again, both kinds are admitted.
    const again = await tryWebSocket(daemon.info);
    expect(again.status).toBe(101);
    again.ws?.close();
    worker.destroy();
    await daemon.stop();
  }, 60_000);

  it('status and /metrics count WebSocket, /mcp and in-process sessions; an in-process one past the cap is refused', async () => {
    const daemon = await Daemon.start(
      { runtimeDir: tempDir(), port: 0, maxSessions: 3 },
      silentLogger,
    );
    const gateway = await connectGateway(daemon.info);
    const mcp = await connectHttp(daemon.info);
    const local = await daemon.progressSource.openSession();
    expect(daemon.status().sessions).toBe(3);
    const metrics = await (
      await fetch(`${httpBase(daemon.info)}/metrics`, {
        headers: { authorization: `Bearer ${daemon.info.secret}` },
      })
    ).text();
    expect(metrics).toMatch(/^mcp_progress_sessions 3$/m);
    await expect(daemon.progressSource.openSession()).rejects.toMatchObject({
      code: 'too_many_sessions',
      message: expect.stringContaining('--max-sessions'),
    });
    expect((await tryWebSocket(daemon.info)).status).toBe(503);
    await local.close();
    expect(daemon.status().sessions).toBe(2);
    const next = await daemon.progressSource.openSession();
    expect(daemon.status().sessions).toBe(3);
    await next.close();
    await endMcp(mcp);
    await gateway.close();
    await eventually(() => (daemon.status().sessions === 0 ? true : undefined));
    await daemon.stop();
  });
});

/**
 * A daemon at --max-sessions 1 whose first WebSocket upgrade is held between its checks and its
 * handshake: helpers/hold-module.mjs holds the load of the WebSocket side (rpc.js), which that
 * upgrade starts once it passed every check. `held()` waits until an upgrade is held there;
 * `fillTheOnlyPlace()` then opens an /mcp session, which takes the one place; `release()` lets the
 * held upgrade go on to its handshake.
 */
async function daemonHoldingAnUpgrade() {
  const hold = tempDir();
  const daemon = await startDaemon(
    ['--max-sessions', '1', '--log-level', 'debug'],
    tempDir(),
    undefined,
    {
      NODE_OPTIONS: `--import ${join(import.meta.dirname, '../helpers/hold-module.mjs')}`,
      MCP_PROGRESS_TEST_HOLD_MODULE: '/dist/daemon/rpc.js',
      MCP_PROGRESS_TEST_HOLD_DIR: hold,
    },
  );
  return {
    daemon,
    held: () =>
      eventually(
        () => (existsSync(join(hold, 'held')) ? true : undefined),
        10_000,
        'an upgrade held before its handshake',
      ),
    fillTheOnlyPlace: async (worker: RawWorker) => {
      await openRawSession(daemon.info);
      expect((await statusOf(worker)).sessions).toBe(1);
    },
    release: () => writeFileSync(join(hold, 'release'), ''),
  };
}

/** How many WebSocket upgrades the daemon refused at the session cap, from its debug log. */
const refusedAtCap = (daemon: RunningDaemon) =>
  daemon.stderr().split('refused a WebSocket upgrade (HTTP 503)').length - 1;

describe('a session that takes the last place while an upgrade is between its check and its handshake', () => {
  it('the gateway client is refused as at the check (gateway_refused, too_many_sessions), not connected and then dropped', async () => {
    const { daemon, held, fillTheOnlyPlace, release } = await daemonHoldingAnUpgrade();
    const worker = await rawWorker(daemon.info.socket);
    const states: string[] = [];
    const connecting = NodeGatewayClient.connect({
      runtimeDir: daemon.runtimeDir,
      onState: (state) => states.push(state),
    });
    // Caught at once: the promise is awaited only after the release.
    const outcome = connecting.then(
      (client) => ({ client, error: undefined }),
      (error: unknown) => ({ client: undefined, error }),
    );
    await held();
    await fillTheOnlyPlace(worker);
    release();
    const { client, error } = await outcome;
    await client?.close();
    expect(client, 'connect() resolved: the client took the refusal for a session').toBeUndefined();
    expect(error).toMatchObject({
      code: 'gateway_refused',
      message: expect.stringMatching(/HTTP 503.*--max-sessions.*\(too_many_sessions\)$/),
    });
    expect(states).toEqual([]);
    expect(refusedAtCap(daemon)).toBe(1);
    expect((await statusOf(worker)).sessions).toBe(1);
    worker.destroy();
    await daemon.stop();
  }, 60_000);

  it('`mcp-progress tail` says the daemon refused it and why, and waits', async () => {
    const { daemon, held, fillTheOnlyPlace, release } = await daemonHoldingAnUpgrade();
    const worker = await rawWorker(daemon.info.socket);
    const tail = spawn(process.execPath, [BIN, 'tail', '--runtime-dir', daemon.runtimeDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collectOutput(tail);
    try {
      await held();
      await fillTheOnlyPlace(worker);
      release();
      const said = await eventually(
        () => (output.stderr().includes('said no') ? output.stderr() : undefined),
        10_000,
        'tail to say the daemon refused it',
      );
      expect(said).toMatch(
        /^mcp-progress tail: the daemon refused the connection \(HTTP 503\): .*--max-sessions.* \(too_many_sessions\); the daemon is running and said no/,
      );
      expect(tail.exitCode).toBeNull();
    } finally {
      tail.kill();
      await waitForExit(tail);
    }
    worker.destroy();
    await daemon.stop();
  }, 60_000);

  it("`mcp-progress mcp` fails the call at once with the daemon's reason: no second connect, no embed", async () => {
    const { daemon, held, fillTheOnlyPlace, release } = await daemonHoldingAnUpgrade();
    const worker = await rawWorker(daemon.info.socket);
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir, '--log-level', 'debug']);
    const call = mcp.client.callTool({ name: 'list_progress', arguments: {} });
    await held();
    await fillTheOnlyPlace(worker);
    release();
    const listed = await call;
    expect(listed.isError).toBe(true);
    expect(textOf(listed)).toMatch(
      /the daemon refused the connection \(HTTP 503\): .*\(too_many_sessions\)/,
    );
    // One upgrade, refused once: not opened, closed, and tried again.
    expect(refusedAtCap(daemon)).toBe(1);
    expect(mcp.stderr()).not.toContain('went away');
    expect(mcp.stderr()).not.toContain('no live daemon');
    expect(mcp.stderr()).not.toContain('started one in this process');
    await mcp.close();
    worker.destroy();
    await daemon.stop();
  }, 60_000);
});

async function readAll(response: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of response) text += String(chunk);
  return text;
}

/** Opens an /mcp session with raw POSTs (initialize, initialized): the headers of its later POSTs. */
async function openRawSession(info: DaemonInfo): Promise<Record<string, string>> {
  const init = await postRaw(info, RAW_INITIALIZE);
  const sessionId = String(init.headers['mcp-session-id']);
  await readAll(init);
  const inSession = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' };
  await readAll(
    await postRaw(info, { jsonrpc: '2.0', method: 'notifications/initialized' }, inSession),
  );
  return inSession;
}

const PADDING = 'x'.repeat(1000);

/** 500 progress frames of about 1 KB for `token`, values after `from`, as one write. */
function paddedBatch(token: string, from: number): string {
  const frames: string[] = [];
  for (let progress = from + 1; progress <= from + 500; progress++) {
    frames.push(
      `{"type":"progress","data":{"v":1,"progressToken":"${token}","progress":${progress},"message":"${PADDING}"}}\f`,
    );
  }
  return frames.join('');
}

/**
 * What each stalled-reader test starts with: a daemon whose sessions may each hold 1 MiB unread
 * (the cap applies to the healthy subscriber too: 1 MiB leaves it room on a loaded machine), a
 * worker, and a healthy WebSocket subscriber of `token` beside the reader the test stalls.
 */
async function cappedBesideHealthy(token: string) {
  const daemon = await startDaemon(['--max-session-buffer-bytes', String(1024 * 1024)]);
  const worker = await rawWorker(daemon.info.socket);
  const healthy = await connectGateway(daemon.info);
  await healthy.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
  return { daemon, worker, healthy };
}

/** The flood of the stalled-reader tests: padded batches for `token`, counted. */
function firehose(worker: RawWorker, token: string) {
  let sent = 0;
  const publish = () => {
    worker.write(paddedBatch(token, sent));
    sent += 500;
  };
  return {
    sent: () => sent,
    publish,
    /** Publishes until the daemon says it closed a slow session (loopback buffers hold many MiB). */
    untilSlowClosed: (what: string) =>
      eventually(
        async () => {
          publish();
          const status = await statusOf(worker);
          return status.counters.slowSessionsClosed === 1 ? status : undefined;
        },
        60_000,
        what,
      ),
    /** Ends the stream; `healthy`, subscribed to it, got every value in order, then the done. */
    async expectEveryValue(healthy: GatewayClient): Promise<void> {
      worker.send('done', { v: 1, progressToken: token, seq: 1 });
      await worker.reply((r) => r.type === 'ack');
      const got = await healthy.waitFor(sent + 1, 60_000);
      expect(got.at(-2)?.params.progress).toBe(sent);
      expect(got.at(-1)?.method).toBe('notifications/progress/done');
    },
  };
}

describe('an /mcp client that stops reading its SSE stream', () => {
  it('is closed past --max-session-buffer-bytes; the daemon holds no more for it; others go on', async () => {
    const token = 'sse-firehose';
    const { daemon, worker, healthy } = await cappedBesideHealthy(token);
    const inSession = await openRawSession(daemon.info);
    // The watch's SSE response is never read: its bytes pile up in the daemon unless it is capped.
    const stalled = await postRaw(daemon.info, watchCall(1, token, 600_000), inSession);
    stalled.pause();
    await eventually(async () => ((await statusOf(worker)).subscriptions === 2 ? true : undefined));
    const before = await statusOf(worker);
    const flood = firehose(worker, token);
    const after = await flood.untilSlowClosed('the stalled /mcp session to be closed as slow');
    const grew = after.memory.rss - before.memory.rss;
    console.log(
      `/mcp slow consumer: ${flood.sent()} frames of ~1 KB past a stalled SSE reader; daemon RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher when it was closed`,
    );
    expect(after.sessions).toBe(1);
    await expectGoneWhileOthersGotAll(daemon.info, inSession, () =>
      flood.expectEveryValue(healthy),
    );
    stalled.destroy();
    await healthy.close();
    worker.destroy();
    await daemon.stop();
  }, 90_000);
});

/**
 * The /mcp session closed as slow is gone (its id gets 404), and the healthy subscriber beside it
 * got every value (`othersGotAll`).
 */
async function expectGoneWhileOthersGotAll(
  info: DaemonInfo,
  inSession: Record<string, string>,
  othersGotAll: () => Promise<void>,
): Promise<void> {
  const gone = await postRaw(info, { jsonrpc: '2.0', id: 2, method: 'ping' }, inSession);
  expect(gone.statusCode).toBe(404);
  await readAll(gone);
  await othersGotAll();
}

/** Opens the session's standalone SSE stream (GET /mcp): the response, its body unread. */
function getStream(info: DaemonInfo, inSession: Record<string, string>): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${httpBase(info)}/mcp`);
    get(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        agent: false,
        headers: {
          ...inSession,
          authorization: `Bearer ${info.secret}`,
          accept: 'text/event-stream',
        },
      },
      resolve,
    ).once('error', reject);
  });
}

describe('an /mcp client that stops reading its standalone GET stream', () => {
  it('is closed past --max-session-buffer-bytes: the progress of a task, of no request, goes there', async () => {
    const token = 'get-stream-firehose';
    const { daemon, worker, healthy } = await cappedBesideHealthy(token);
    const inSession = await openRawSession(daemon.info);
    const stalled = await getStream(daemon.info, inSession);
    expect(stalled.statusCode).toBe(200);
    stalled.pause();
    // watch_progress as a task: the call is answered at once, and the task's progress (which
    // belongs to no request) goes to the session's GET stream, which is never read.
    const call = await postRaw(
      daemon.info,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { ...watchParams(token, 600_000), task: { ttl: 600_000 } },
      },
      inSession,
    );
    expect(await readAll(call)).toContain('"taskId"');
    await eventually(async () => ((await statusOf(worker)).subscriptions === 2 ? true : undefined));
    const before = await statusOf(worker);
    const flood = firehose(worker, token);
    // Bounded, so that without the cap the daemon is not driven out of memory: 64 MiB of frames,
    // far past the cap and what loopback's buffers hold.
    let after = before;
    while (after.counters.slowSessionsClosed === 0 && flood.sent() < 64_000) {
      flood.publish();
      after = await statusOf(worker);
    }
    const grew = after.memory.rss - before.memory.rss;
    console.log(
      `/mcp GET stream slow consumer: ${flood.sent()} frames of ~1 KB past a stalled GET reader; daemon RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher`,
    );
    expect(
      after.counters.slowSessionsClosed,
      `the session closed as slow after ${flood.sent()} frames (RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher)`,
    ).toBe(1);
    // Unbounded, the stream held every frame: 190 MiB more RSS at 64,000 of them.
    expect(grew, 'daemon RSS growth, bytes').toBeLessThan(64 * 2 ** 20);
    expect(after.sessions).toBe(1);
    await expectGoneWhileOthersGotAll(daemon.info, inSession, () =>
      flood.expectEveryValue(healthy),
    );
    stalled.destroy();
    await healthy.close();
    worker.destroy();
    await daemon.stop();
  }, 120_000);
});

describe('a 2026-07-28 /mcp client that stops reading its SSE stream', () => {
  it('is closed past --max-session-buffer-bytes, like a 2025 session; others go on', async () => {
    const token = 'sse-firehose-sessionless';
    const { daemon, worker, healthy } = await cappedBesideHealthy(token);
    // No session: the request carries the revision in its _meta and in its headers. Its response
    // starts with the first value, so it is awaited once values flow.
    const params = watchParams(token, 600_000);
    const answered = postRaw(
      daemon.info,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          ...params,
          _meta: {
            ...(params._meta as object),
            'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
            'io.modelcontextprotocol/clientInfo': { name: 'stalled', version: '0' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      },
      {
        'mcp-protocol-version': NEWEST_REVISION,
        'mcp-method': 'tools/call',
        'mcp-name': 'watch_progress',
      },
    );
    await eventually(async () => ((await statusOf(worker)).subscriptions === 2 ? true : undefined));
    const before = await statusOf(worker);
    expect(before.sessions).toBe(2);
    const flood = firehose(worker, token);
    flood.publish();
    // Never read: with no reader the response takes no more than its buffers hold.
    const stalled = await answered;
    stalled.pause();
    expect(stalled.statusCode).toBe(200);
    const after = await flood.untilSlowClosed(
      'the stalled 2026-07-28 request to be closed as slow',
    );
    const grew = after.memory.rss - before.memory.rss;
    console.log(
      `2026-07-28 /mcp slow consumer: ${flood.sent()} frames of ~1 KB past a stalled SSE reader; daemon RSS ${(grew / 2 ** 20).toFixed(1)} MiB higher when it was closed`,
    );
    expect(after.sessions).toBe(1);
    // Its watch ended with it: only the healthy subscriber is left.
    await eventually(async () => ((await statusOf(worker)).subscriptions === 1 ? true : undefined));
    // The response ends: what was written before the close, then nothing.
    stalled.resume();
    await new Promise<void>((resolve) => {
      stalled.once('close', resolve);
      stalled.once('end', resolve);
    });
    await flood.expectEveryValue(healthy);
    stalled.destroy();
    await healthy.close();
    worker.destroy();
    await daemon.stop();
  }, 90_000);
});

describe('an /mcp client that reads its SSE stream late', () => {
  it('gets every event once, in order (ids and values increasing), then the result', async () => {
    // Progress events go straight to the response while the SDK's stream has caught up, and
    // through the stream while the response waits for drain: the switch must keep the order.
    const daemon = await startDaemon(['--max-session-buffer-bytes', String(256 * 1024 * 1024)]);
    const worker = await rawWorker(daemon.info.socket);
    const token = 'late-reader';
    const inSession = await openRawSession(daemon.info);
    const watch = await postRaw(daemon.info, watchCall(1, token, 600_000), inSession);
    watch.pause();
    let text = '';
    watch.setEncoding('utf8');
    watch.on('data', (chunk: string) => {
      text += chunk;
    });
    const ended = new Promise<void>((resolve) => watch.once('end', resolve));
    await eventually(async () => ((await statusOf(worker)).subscriptions === 1 ? true : undefined));
    let sent = 0;
    const publish = async (frames: number) => {
      for (let batch = 0; batch < frames / 500; batch++) {
        worker.write(paddedBatch(token, sent));
        sent += 500;
        await statusOf(worker); // the daemon has handled the batch
      }
    };
    // 16 MB unread: more than loopback's buffers hold, so the response waits for drain.
    await publish(16_000);
    watch.resume();
    // More while the backlog drains, then the end.
    await publish(8_000);
    worker.send('done', { v: 1, progressToken: token, seq: 1 });
    await worker.reply((r) => r.type === 'ack');
    await ended;
    const ids: number[] = [];
    const values: number[] = [];
    let result: unknown;
    for (const event of text.split('\n\n')) {
      const data = /^data: (.*)$/m.exec(event)?.[1];
      if (data === undefined || data === '') continue;
      const message = JSON.parse(data) as {
        method?: string;
        params?: { progress: number };
        result?: unknown;
      };
      // Every event carries its id, for a client that resumes with Last-Event-ID.
      const id = /^id: (.*)$/m.exec(event)?.[1];
      expect(id, `an event without an id: ${event.slice(0, 80)}`).toBeDefined();
      ids.push(Number(id?.slice(id.lastIndexOf(':') + 1)));
      if (message.method === 'notifications/progress') {
        expect(result, 'nothing after the result').toBeUndefined();
        values.push(message.params?.progress ?? Number.NaN);
      } else if (message.result !== undefined) result = message.result;
    }
    expect(result).toBeDefined();
    expect(values.at(-1)).toBe(sent);
    const unordered = values.findIndex((value, i) => i > 0 && !(value > (values[i - 1] ?? 0)));
    expect(unordered, `value ${values[unordered]} after ${values[unordered - 1]}`).toBe(-1);
    const idsUnordered = ids.findIndex((id, i) => i > 0 && !(id > (ids[i - 1] ?? 0)));
    expect(idsUnordered, `event id ${ids[idsUnordered]} after ${ids[idsUnordered - 1]}`).toBe(-1);
    worker.destroy();
    await daemon.stop();
  }, 120_000);
});
