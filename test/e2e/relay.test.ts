/**
 * relayProgress inside real MCP servers (SDK 1.x and the v2 server package)
 * over Streamable HTTP, driven by SDK clients; the worker is a Python
 * process that knows only the env it was given.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayProgress } from '../../src/egress/mcp.js';
import type { RelayContext } from '../../src/egress/relay.js';
import {
  cleanupAll,
  eventually,
  type RunningDaemon,
  startDaemon,
  tempDir,
} from '../helpers/daemon.js';
import {
  connectUrl,
  expectSeenInOrder,
  progressParams,
  responseIndex,
  runWorker,
  type TappedClient,
  textOf,
} from '../helpers/mcp.js';
import {
  type HostedServer,
  hostV1,
  hostV2,
  type RenderArgs,
  type RenderV1,
  type RenderV2,
} from '../helpers/relay-servers.js';

let daemon: RunningDaemon;

beforeAll(async () => {
  daemon = await startDaemon();
});
afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

interface WorkerRecord {
  routeKey: string;
  relaying: boolean;
  stdout: string;
}

/** A tool that relays progress from its worker; typed for both SDKs' request contexts. */
function bridged(
  records: WorkerRecord[],
  options: {
    runtimeDir?: () => string;
    onWarning?: (message: string) => void;
    /** false: the tool does no work, it only asks for a relay (for a daemon that is not there). */
    spawn?: boolean;
  } = {},
) {
  return async (args: RenderArgs, context: RelayContext): Promise<string> => {
    await using relay = await relayProgress(context, {
      runtimeDir: options.runtimeDir?.() ?? daemon.runtimeDir,
      minIntervalMs: 0,
      onWarning: options.onWarning,
    });
    const record: WorkerRecord = { routeKey: relay.routeKey, relaying: relay.relaying, stdout: '' };
    records.push(record);
    if (options.spawn === false) return 'nothing to render';
    const worker = await runWorker(
      relay.env,
      [String(args.steps), ...(args.waitCancel ? ['--wait-cancel'] : [])],
      (text) => {
        record.stdout += text;
      },
    );
    if (worker.code !== 0) throw new Error(`the worker failed: ${worker.stderr}`);
    await relay.done;
    return `rendered ${args.steps} frames`;
  };
}

/** The same tool without the bridge: the worker publishes where nobody listens. */
async function plain(args: RenderArgs): Promise<string> {
  const worker = await runWorker(
    { MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: `plain-${randomUUID()}` },
    [String(args.steps)],
  );
  if (worker.code !== 0) throw new Error(`the worker failed: ${worker.stderr}`);
  return `rendered ${args.steps} frames`;
}

const SDKS: Array<{
  name: string;
  host: (render: RenderV1 & RenderV2) => Promise<HostedServer>;
}> = [
  { name: 'SDK 1.x McpServer', host: hostV1 },
  { name: 'v2 @modelcontextprotocol/server McpServer', host: hostV2 },
];

describe.each(SDKS)('relayProgress in a $name', ({ host }) => {
  it('two sessions that both use token 1 each see only their own progress, in order', async () => {
    const records: WorkerRecord[] = [];
    const server = await host(bridged(records));
    const [a, b] = await Promise.all([connectUrl(server.url), connectUrl(server.url)]);
    const seen = new Map<TappedClient, number[]>([
      [a, []],
      [b, []],
    ]);
    const call = (client: TappedClient, steps: number) =>
      client.client.callTool({ name: 'render', arguments: { steps } }, undefined, {
        onprogress: (p) => seen.get(client)?.push(p.progress),
      });
    const [ra, rb] = await Promise.all([call(a, 3), call(b, 5)]);
    expect(textOf(ra)).toBe('rendered 3 frames');
    expect(textOf(rb)).toBe('rendered 5 frames');
    // Both clients' tokens are the integer 1 (their request id), and each got its own worker's values.
    for (const [client, steps] of [
      [a, 3],
      [b, 5],
    ] as const) {
      expect(progressParams(client.received)).toEqual(
        Array.from({ length: steps }, (_, i) => ({
          progressToken: 1,
          progress: i + 1,
          total: steps,
          message: `step ${i + 1}`,
        })),
      );
      // All of it before the result, nothing after.
      const lastProgressAt = client.received.findLastIndex(
        (m) => 'method' in m && m.method === 'notifications/progress',
      );
      expect(lastProgressAt).toBeLessThan(responseIndex(client.received, 1));
      expectSeenInOrder(
        client,
        seen.get(client) ?? [],
        Array.from({ length: steps }, (_, i) => i + 1),
        1,
      );
    }
    // Each worker had a fresh route key, not the client's token.
    expect(records.map((r) => r.relaying)).toEqual([true, true]);
    expect(new Set(records.map((r) => r.routeKey)).size).toBe(2);
    for (const record of records) expect(record.routeKey).toMatch(/^relay-[0-9a-f-]{36}$/);
    await Promise.all([a.close(), b.close()]);
    await server.close();
  });

  it('a cancel from the client reaches the worker as a cancel frame', async () => {
    const records: WorkerRecord[] = [];
    const server = await host(bridged(records));
    const client = await connectUrl(server.url);
    const controller = new AbortController();
    const call = client.client
      .callTool({ name: 'render', arguments: { steps: 1, waitCancel: true } }, undefined, {
        signal: controller.signal,
        onprogress: () => controller.abort('the user pressed stop'),
      })
      .catch((error: Error) => error);
    expect(await call).toBeInstanceOf(Error);
    const record = await eventually(
      () => (records[0]?.stdout.includes('\n') ? records[0] : undefined),
      10_000,
      'the worker to print the cancel frame',
    );
    expect(JSON.parse(record.stdout)).toEqual({
      type: 'cancel',
      data: { progressToken: record.routeKey, reason: 'the MCP client cancelled the request' },
    });
    await client.close();
    await server.close();
  });

  it('without a progress token the response is byte for byte that of a server without the bridge', async () => {
    const records: WorkerRecord[] = [];
    const withBridge = await host(bridged(records));
    const without = await host(plain);
    const bridgedBody = await rawToolCall(withBridge.url);
    const plainBody = await rawToolCall(without.url);
    expect(bridgedBody).toContain('rendered 2 frames');
    expect(bridgedBody).toBe(plainBody);
    // The worker still got a usable env and ran; nothing was relayed.
    expect(records).toEqual([
      { routeKey: expect.stringMatching(/^relay-/), relaying: false, stdout: '' },
    ]);
    await withBridge.close();
    await without.close();
  });

  it('an unreachable daemon costs one warning and never the tool call', async () => {
    const records: WorkerRecord[] = [];
    const warnings: string[] = [];
    const nowhere = tempDir();
    const server = await host(
      bridged(records, {
        runtimeDir: () => nowhere,
        onWarning: (m) => warnings.push(m),
        spawn: false,
      }),
    );
    const client = await connectUrl(server.url);
    for (let i = 0; i < 2; i++) {
      const result = await client.client.callTool(
        { name: 'render', arguments: { steps: 1 } },
        undefined,
        { onprogress: () => {} },
      );
      expect(result.isError).toBeFalsy();
      expect(textOf(result)).toBe('nothing to render');
    }
    expect(records.map((r) => r.relaying)).toEqual([false, false]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('progress is not relayed');
    await client.close();
    await server.close();
  });
});

/** initialize, initialized and one tools/call without a token, as raw HTTP; returns the call's body. */
async function rawToolCall(url: URL): Promise<string> {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const init = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '0' },
      },
    }),
  });
  const session = init.headers.get('mcp-session-id') ?? '';
  await init.text();
  const withSession = {
    ...headers,
    'mcp-session-id': session,
    'mcp-protocol-version': '2025-06-18',
  };
  const initialized = await fetch(url, {
    method: 'POST',
    headers: withSession,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  await initialized.text();
  const call = await fetch(url, {
    method: 'POST',
    headers: withSession,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'render', arguments: { steps: 2 } },
    }),
  });
  return call.text();
}
