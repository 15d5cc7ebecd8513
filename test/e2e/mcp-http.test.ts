/**
 * The daemon's /mcp over Streamable HTTP: the endpoint's checks. The watch, disconnect and stop
 * scenarios, for every client and transport, are in mcp-transports.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { publishAccepted } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import {
  connectHttp,
  httpBase,
  MCP_POST_HEADERS,
  openRawSession,
  postMcp,
  publishWhenWatched,
  RAW_INITIALIZE,
  resumeSse,
  waitForSubscribers,
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

  it('frames every event of a watch as one whole HTTP chunk, whatever its UTF-8 length', async () => {
    // After the first event the daemon writes each event straight to the socket as a chunk of its
    // own (http-sessions.ts, writeChunk), sized by hand: multi-byte characters count as bytes.
    const messages = ['ascii', 'é', '😀 émoji', '日本語のメッセージ', 'ü'.repeat(300), 'last'];
    const mcp = await connectHttp(daemon.info);
    try {
      const token = 'multi-byte-messages';
      const seen: Array<string | undefined> = [];
      const call = mcp.client.callTool(
        { name: 'watch_progress', arguments: { progressToken: token, minIntervalMs: 0 } },
        undefined,
        // A miscounted chunk garbles the stream: the result never arrives, and the call says so.
        { onprogress: (progress) => seen.push(progress.message), timeout: 10_000 },
      );
      await waitForSubscribers(daemon.info, token);
      const where = ['--socket', daemon.info.socket, '--token', token];
      for (const message of messages) await publishAccepted(where, '--message', message);
      await publishAccepted(where, '--done');
      const result = await call;
      expect(result.isError).not.toBe(true);
      expect(seen).toEqual(messages);
    } finally {
      await mcp.close();
    }
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
