/**
 * The daemon's /mcp over Streamable HTTP: an SDK client with the secret,
 * progress on the request's own SSE stream, and the endpoint's checks.
 */
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import {
  connectHttp,
  expectSeenInOrder,
  httpBase,
  progressParams,
  publishWhenWatched,
  responseIndex,
  waitForSubscribers,
} from '../helpers/mcp.js';

const daemon = daemonForFile();

const initialize = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'raw', version: '0' },
  },
};

function post(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${httpBase(daemon.info)}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

describe('MCP over Streamable HTTP at /mcp', () => {
  it('watch_progress streams every update on the request stream, then the result, then nothing', async () => {
    const mcp = await connectHttp(daemon.info);
    const token = 'render-http';
    const seen: number[] = [];
    const call = mcp.client.callTool(
      { name: 'watch_progress', arguments: { progressToken: token, minIntervalMs: 0 } },
      undefined,
      { onprogress: (p) => seen.push(p.progress) },
    );
    await publishWhenWatched(daemon.info, token, 4);
    const result = await call;
    expect(result.structuredContent).toMatchObject({
      progressToken: token,
      state: 'done',
      status: 'ok',
      timedOut: false,
      progress: 4,
      total: 4,
      updates: 4,
    });
    await mcp.client.callTool({ name: 'list_progress', arguments: {} });
    const callMessage = mcp.received.find((m) => 'id' in m && 'result' in m && m.id !== 0);
    const callId = (callMessage as { id: number }).id;
    expect(progressParams(mcp.received)).toEqual(
      [1, 2, 3, 4].map((n) => ({
        progressToken: callId,
        progress: n,
        total: 4,
        message: `step ${n}`,
      })),
    );
    const lastProgressAt = mcp.received.findLastIndex(
      (m) => 'method' in m && m.method === 'notifications/progress',
    );
    expect(lastProgressAt).toBeLessThan(responseIndex(mcp.received, callId));
    expectSeenInOrder(mcp, seen, [1, 2, 3, 4], callId);
    await mcp.close();
  });

  it('a client that disconnects mid tools/call drops its watch and subscription', async () => {
    const auth = { authorization: `Bearer ${daemon.info.secret}` };
    const init = await post(initialize, auth);
    const session = init.headers.get('mcp-session-id') ?? '';
    await init.text();
    const inSession = { ...auth, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, inSession)).text();
    const token = 'abandoned-http';
    const controller = new AbortController();
    const call = fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...inSession,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'watch_progress',
          arguments: { progressToken: token, timeoutMs: 600_000 },
          _meta: { progressToken: 1 },
        },
      }),
      signal: controller.signal,
    })
      .then((response) => response.text())
      .catch((error: Error) => error);
    await waitForSubscribers(daemon.info, token, 1);
    controller.abort();
    expect(await call).toBeInstanceOf(Error);
    // The daemon drops the subscription long before the watch's own 10-minute timeout.
    await waitForSubscribers(daemon.info, token, 0, 20_000);
  });

  it('answers a body that is not JSON with a JSON-RPC parse error', async () => {
    const response = await fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${daemon.info.secret}`,
      },
      body: '{"jsonrpc": "2.0", "id": 0, "method": "initialize",',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: -32700 } });
  });

  it('answers with an SSE stream, never in JSON-response mode', async () => {
    const response = await post(initialize, { authorization: `Bearer ${daemon.info.secret}` });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/);
    const body = await response.text();
    expect(body).toContain('"serverInfo":{"name":"mcp-progress-bridge"');
  });

  it('requires the secret and refuses a foreign Origin', async () => {
    const missing = await post(initialize);
    expect(missing.status).toBe(401);
    expect(await missing.text()).toContain('the secret is missing');
    const wrong = await post(initialize, { authorization: 'Bearer not-the-secret' });
    expect(wrong.status).toBe(401);
    const foreign = await post(initialize, {
      authorization: `Bearer ${daemon.info.secret}`,
      origin: 'http://evil.example',
    });
    expect(foreign.status).toBe(403);
    expect(await foreign.text()).toContain('--allow-origin http://evil.example');
  });

  it('tells a client with an unknown session to start a new one', async () => {
    const response = await post(
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { authorization: `Bearer ${daemon.info.secret}`, 'mcp-session-id': 'no-such-session' },
    );
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { message: /initialize a new session/ } });
  });
});

describe('stopping', () => {
  it('the daemon stops gracefully while an MCP session holds a watch open', async () => {
    const own = await startDaemon();
    const mcp = await connectHttp(own.info);
    const call = mcp.client
      .callTool({ name: 'watch_progress', arguments: { progressToken: 'forever' } })
      .catch((error: Error) => error);
    await waitForSubscribers(own.info, 'forever');
    expect(await own.stop()).toBe(0);
    expect(own.stderr()).toContain('stopped');
    // The SDK client waits to resume a stream that ended without an answer; closing it ends the call.
    await mcp.close();
    expect(await call).toBeInstanceOf(Error);
  });
});
