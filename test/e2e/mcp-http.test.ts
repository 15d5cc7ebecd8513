/**
 * The daemon's /mcp over Streamable HTTP: the endpoint's checks. The watch, disconnect and stop
 * scenarios, for every client and transport, are in mcp-transports.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { daemonForFile } from '../helpers/file-daemon.js';
import {
  httpBase,
  MCP_POST_HEADERS,
  openRawSession,
  postMcp,
  publishWhenWatched,
  RAW_INITIALIZE,
  resumeSse,
  watchCall,
} from '../helpers/mcp.js';

const daemon = daemonForFile();

const post = (body: unknown, headers: Record<string, string> = {}) =>
  postMcp(`${httpBase(daemon.info)}/mcp`, body, headers);

describe('MCP over Streamable HTTP at /mcp', () => {
  it('answers a body that is not JSON with a JSON-RPC parse error', async () => {
    const response = await fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${daemon.info.secret}` },
      body: '{"jsonrpc": "2.0", "id": 0, "method": "initialize",',
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: -32700 } });
  });

  it('answers with an SSE stream, never in JSON-response mode', async () => {
    const response = await post(RAW_INITIALIZE, { authorization: `Bearer ${daemon.info.secret}` });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/);
    const body = await response.text();
    expect(body).toContain('"serverInfo":{"name":"mcp-progress-bridge"');
  });

  it('requires the secret and refuses a foreign Origin', async () => {
    const missing = await post(RAW_INITIALIZE);
    expect(missing.status).toBe(401);
    expect(await missing.text()).toContain('the secret is missing');
    const wrong = await post(RAW_INITIALIZE, { authorization: 'Bearer not-the-secret' });
    expect(wrong.status).toBe(401);
    const foreign = await post(RAW_INITIALIZE, {
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

  it("keeps a watch's progress events for Last-Event-ID: a client resuming after one gets the rest and the result", async () => {
    const url = `${httpBase(daemon.info)}/mcp`;
    const session = await openRawSession(url, { authorization: `Bearer ${daemon.info.secret}` });
    const token = 'resume-after-progress';
    const call = postMcp(url, watchCall(7, token, 30_000), session);
    await publishWhenWatched(daemon.info, token, 3);
    const body = await (await call).text();
    const events = [...body.matchAll(/event: message\nid: (\S+)\ndata: (.*)\n\n/g)].map(
      ([, id, data]) => ({ id: id ?? '', data: data ?? '' }),
    );
    const progress = events.filter((event) => event.data.includes('notifications/progress'));
    expect(progress.map((event) => JSON.parse(event.data).params.progress)).toEqual([1, 2, 3]);
    expect(events.at(-1)?.data).toContain('"id":7');
    // The stream "dropped" after the first progress event: the client asks again from there.
    const resumed = await resumeSse(url, session, progress[0]?.id ?? '', '"id":7');
    expect(resumed).toBe(
      events
        .slice(events.indexOf(progress[0] as (typeof events)[number]) + 1)
        .map((event) => `event: message\nid: ${event.id}\ndata: ${event.data}\n\n`)
        .join(''),
    );
  });
});
