/**
 * @modelcontextprotocol/client 2.x at the newest revision it offers
 * (2026-07-28), over stdio to `mcp-progress mcp` and over Streamable HTTP to
 * /mcp: it negotiates that revision, and receives every progress value in
 * order under its own token, then the result, then nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  startDaemon,
  tempDir,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio, httpBase, runWorker, waitForSubscribers } from '../helpers/mcp.js';
import {
  connectHttpV2,
  connectStdioV2,
  NEWEST_REVISION,
  type Negotiation,
  type TappedV2Client,
} from '../helpers/mcp-v2.js';

let daemon: RunningDaemon;

beforeAll(async () => {
  daemon = await startDaemon();
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

const isProgress = (m: Record<string, unknown>) => m.method === 'notifications/progress';

/** What each mode settles on with the bridge: it offers 2026-07-28 and the 2025 revisions. */
const NEGOTIATED: Record<Negotiation, string> = {
  pin: NEWEST_REVISION,
  auto: NEWEST_REVISION,
  legacy: '2025-11-25',
};

async function watchFive(
  mcp: TappedV2Client,
  token: string,
  negotiation: Negotiation,
): Promise<void> {
  expect(mcp.client.getNegotiatedProtocolVersion()).toBe(NEGOTIATED[negotiation]);
  const seen: number[] = [];
  const call = mcp.client.callTool(
    { name: 'watch_progress', arguments: { progressToken: token, minIntervalMs: 0 } },
    { onprogress: (p) => seen.push(p.progress) },
  );
  // Publish once the watch is subscribed, so that every value is live, not a late-join snapshot.
  await waitForSubscribers(daemon.info, token);
  const worker = await runWorker(
    { MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: token },
    ['5'],
  );
  expect(worker).toMatchObject({ code: 0, stderr: '' });
  const result = await call;
  expect(result.isError).toBeFalsy();
  expect(result.structuredContent).toMatchObject({
    progressToken: token,
    state: 'done',
    status: 'ok',
    timedOut: false,
    progress: 5,
    total: 5,
    updates: 5,
  });
  expect(seen).toEqual([1, 2, 3, 4, 5]);
  // One more round trip: anything sent after the result would arrive before its answer.
  await mcp.client.callTool({ name: 'list_progress', arguments: {} });
  const progress = mcp.received.filter(isProgress);
  const callToken = (progress[0]?.params as { progressToken?: unknown } | undefined)?.progressToken;
  expect(progress.map((m) => m.params)).toEqual(
    [1, 2, 3, 4, 5].map((n) => ({
      progressToken: callToken,
      progress: n,
      total: 5,
      message: `step ${n}`,
    })),
  );
  const resultAt = mcp.received.findIndex(
    (m) =>
      'result' in m &&
      (m.result as { structuredContent?: unknown }).structuredContent !== undefined,
  );
  expect(resultAt).toBeGreaterThan(-1);
  expect(mcp.received.findLastIndex(isProgress)).toBeLessThan(resultAt);
  expect(mcp.errors).toEqual([]);
}

describe.each<Negotiation>(['pin', 'auto', 'legacy'])(
  'a 2.x client in %s mode (pin and auto: 2026-07-28; legacy: initialize)',
  (negotiation) => {
    it('over stdio to mcp-progress mcp: every value in order, then the result, then nothing', async () => {
      const mcp = await connectStdioV2(['--runtime-dir', daemon.runtimeDir], negotiation);
      try {
        await watchFive(mcp, `v2-stdio-${negotiation}`, negotiation);
      } finally {
        await mcp.close();
      }
    });

    it('over Streamable HTTP to /mcp: every value in order, then the result, then nothing', async () => {
      const mcp = await connectHttpV2(daemon.info, negotiation);
      try {
        await watchFive(mcp, `v2-http-${negotiation}`, negotiation);
      } finally {
        await mcp.close();
      }
    });
  },
);

describe('the 2026-07-28 revision beside the 2025 ones', () => {
  it('a 2.x client lists the same tools, with the same schemas, as an SDK 1.x client', async () => {
    const modern = await connectStdioV2(['--runtime-dir', daemon.runtimeDir], 'pin');
    const legacy = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    try {
      // Each SDK names its own JSON Schema dialect ($schema); the schemas themselves match.
      const bare = (schema: unknown) => {
        const { $schema: _dialect, ...rest } = (schema ?? {}) as Record<string, unknown>;
        return rest;
      };
      const shape = (
        tools: Array<{ name: string; inputSchema: unknown; outputSchema?: unknown }>,
      ) =>
        tools
          .map(({ name, inputSchema, outputSchema }) => ({
            name,
            inputSchema: bare(inputSchema),
            outputSchema: bare(outputSchema),
          }))
          .sort((a, b) => a.name.localeCompare(b.name));
      const modernTools = shape((await modern.client.listTools()).tools);
      expect(modernTools.map((t) => t.name)).toEqual([
        'get_progress',
        'list_progress',
        'watch_progress',
      ]);
      expect(modernTools).toEqual(shape((await legacy.client.listTools()).tools));
    } finally {
      await modern.close();
      await legacy.close();
    }
  });

  it('over stdio with no daemon running, a pinned 2.x client gets an embedded one', async () => {
    // The 2.x client probes server/discover on a second, short-lived `mcp` process first.
    const runtimeDir = tempDir();
    const mcp = await connectStdioV2(['--runtime-dir', runtimeDir], 'pin');
    try {
      expect(mcp.client.getNegotiatedProtocolVersion()).toBe(NEWEST_REVISION);
      const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
      expect(listed.structuredContent).toEqual({ streams: [] });
      expect((await readDaemonInfo(runtimeDir)).socket).toBeTruthy();
    } finally {
      await mcp.close();
    }
  });

  it('over HTTP, a 2026-07-28 client that disconnects mid tools/call drops its watch', async () => {
    const token = 'abandoned-v2-http';
    const controller = new AbortController();
    const call = fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${daemon.info.secret}`,
        'mcp-protocol-version': NEWEST_REVISION,
        'mcp-method': 'tools/call',
        'mcp-name': 'watch_progress',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'watch_progress',
          arguments: { progressToken: token, timeoutMs: 600_000 },
          _meta: {
            progressToken: 1,
            'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
            'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
      signal: controller.signal,
    })
      .then((response) => response.text())
      .catch((error: Error) => error);
    await waitForSubscribers(daemon.info, token, 1);
    controller.abort();
    expect(await call).toBeInstanceOf(Error);
    const gateway = await connectGateway(daemon.info);
    try {
      await eventually(
        async () => {
          const reply = await gateway.request('progress/list');
          const streams = (reply.result as { streams: Array<Record<string, unknown>> }).streams;
          const mine = streams.filter((s) => s.progressToken === token);
          return mine.every((s) => s.subscribers === 0) ? true : undefined;
        },
        20_000,
        'the abandoned watch to unsubscribe',
      );
    } finally {
      await gateway.close();
    }
  });
});

describe('stopping', () => {
  it('the daemon stops gracefully while a 2026-07-28 request holds a watch open on /mcp', async () => {
    const own = await startDaemon();
    const mcp = await connectHttpV2(own.info, 'pin');
    const call = mcp.client
      .callTool({ name: 'watch_progress', arguments: { progressToken: 'forever-v2' } })
      .catch((error: Error) => error);
    await waitForSubscribers(own.info, 'forever-v2');
    expect(await own.stop()).toBe(0);
    expect(own.stderr()).toContain('stopped');
    await mcp.close();
    expect(await call).toBeInstanceOf(Error);
  });
});

describe('routing by revision on /mcp', () => {
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${daemon.info.secret}`,
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it('a request claiming a revision the bridge does not serve is told which it does', async () => {
    const response = await post({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/list',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2099-01-01',
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    });
    const text = await response.text();
    expect(response.status, text).toBeGreaterThanOrEqual(400);
    expect(text).toContain(NEWEST_REVISION);
    expect(text).not.toContain('initialize a new session');
  });

  it('a claim-less request without a session is still told to initialize', async () => {
    const response = await post({ jsonrpc: '2.0', id: 8, method: 'tools/list' });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('initialize');
  });
});
