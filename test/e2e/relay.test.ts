/**
 * relayProgress inside real MCP servers (SDK 1.x and the v2 server package)
 * over Streamable HTTP, driven by SDK clients; the worker is a Python
 * process that knows only the env it was given.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { relayProgress } from '../../src/mcp/index.js';
import type { RelayContext } from '../../src/mcp/relay.js';
import { eventually, startDaemon, tempDir } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import {
  connectUrl,
  expectSeenInOrder,
  openRawSession,
  postMcp,
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

const daemon = daemonForFile();

interface WorkerRecord {
  routeKey: string;
  relaying: boolean;
  stdout: string;
}

/** The tool of a server whose relay is inactive (`spawn: false`) still answers, as without the bridge. */
async function expectRunsWithoutProgress(
  client: Awaited<ReturnType<typeof connectUrl>>,
): Promise<void> {
  const result = await client.client.callTool(
    { name: 'render', arguments: { steps: 1 } },
    undefined,
    { onprogress: () => {} },
  );
  expect(result.isError).toBeFalsy();
  expect(textOf(result)).toBe('nothing to render');
}

/** A tool that relays progress from its worker; typed for both SDKs' request contexts. */
function bridged(
  records: WorkerRecord[],
  options: {
    runtimeDir?: () => string;
    onWarning?: (message: string) => void;
    /** Explicit daemon url and secret instead of daemon.json. */
    gateway?: { url: string; secret: string };
    /** false: the tool does no work, it only asks for a relay (for a daemon that is not there). */
    spawn?: boolean;
    /** Awaited once the relay is subscribed, before the worker starts. */
    barrier?: () => Promise<void>;
  } = {},
) {
  return async (args: RenderArgs, context: RelayContext): Promise<string> => {
    await using relay = await relayProgress(context, {
      runtimeDir: options.runtimeDir?.() ?? daemon.runtimeDir,
      ...(options.gateway ?? {}),
      minIntervalMs: 0,
      onWarning: options.onWarning,
    });
    const record: WorkerRecord = { routeKey: relay.routeKey, relaying: relay.relaying, stdout: '' };
    records.push(record);
    if (options.spawn === false) return 'nothing to render';
    await options.barrier?.();
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
    // Neither worker starts before both relays are subscribed: both token-1 subscriptions are live at once.
    const barrier = meetingOf(2);
    const server = await host(bridged(records, { barrier }));
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

  it.each([
    { case: 'no daemon.json', runtimeDir: () => tempDir() },
    { case: 'a stale daemon.json (dead pid, refused port)', runtimeDir: staleRuntimeDir },
  ])(
    'an unreachable daemon ($case) costs one warning and never the tool call',
    async ({ runtimeDir }) => {
      const records: WorkerRecord[] = [];
      const warnings: string[] = [];
      const nowhere = await runtimeDir();
      const server = await host(
        bridged(records, {
          runtimeDir: () => nowhere,
          onWarning: (m) => warnings.push(m),
          spawn: false,
        }),
      );
      const client = await connectUrl(server.url);
      for (let i = 0; i < 2; i++) await expectRunsWithoutProgress(client);
      expect(records.map((r) => r.relaying)).toEqual([false, false]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('progress is not relayed');
      expect(warnings[0]).toContain('mcp-progress daemon');
      // Said once, not "cannot reach the daemon at X (cannot reach the daemon at X: ...)".
      expect(warnings[0]?.split('daemon at').length).toBeLessThanOrEqual(2);
      await client.close();
      await server.close();
    },
  );

  it('a relative $MCP_PROGRESS_RUNTIME_DIR costs one warning that says so, and never the tool call', async () => {
    const records: WorkerRecord[] = [];
    const warnings: string[] = [];
    const saved = {
      dir: process.env.MCP_PROGRESS_RUNTIME_DIR,
      socket: process.env.MCP_PROGRESS_SOCKET,
    };
    process.env.MCP_PROGRESS_RUNTIME_DIR = 'relative/dir';
    delete process.env.MCP_PROGRESS_SOCKET;
    try {
      // No runtime dir of its own: the relay finds the daemon from the environment.
      const server = await host(
        bridged(records, {
          runtimeDir: () => '',
          onWarning: (m) => warnings.push(m),
          spawn: false,
        }),
      );
      const client = await connectUrl(server.url);
      await expectRunsWithoutProgress(client);
      expect(records.map((r) => r.relaying)).toEqual([false]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('progress is not relayed');
      expect(warnings[0]).toContain('"relative/dir", a relative path');
      await client.close();
      await server.close();
    } finally {
      if (saved.dir === undefined) delete process.env.MCP_PROGRESS_RUNTIME_DIR;
      else process.env.MCP_PROGRESS_RUNTIME_DIR = saved.dir;
      if (saved.socket !== undefined) process.env.MCP_PROGRESS_SOCKET = saved.socket;
    }
  });

  it('a daemon that refuses the connection (its session cap) is reported as such, not as unreachable', async () => {
    const capped = await startDaemon(['--max-sessions', '1']);
    const holder = await connectGateway(capped.info);
    const records: WorkerRecord[] = [];
    const warnings: string[] = [];
    const server = await host(
      bridged(records, {
        runtimeDir: () => capped.runtimeDir,
        onWarning: (m) => warnings.push(m),
        spawn: false,
      }),
    );
    const client = await connectUrl(server.url);
    try {
      const result = await client.client.callTool(
        { name: 'render', arguments: { steps: 1 } },
        undefined,
        { onprogress: () => {} },
      );
      expect(textOf(result)).toBe('nothing to render');
      expect(records.map((r) => r.relaying)).toEqual([false]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('refused the connection (HTTP 503)');
      expect(warnings[0]).toContain('--max-sessions');
      expect(warnings[0]).not.toContain('cannot reach');
      expect(warnings[0]).not.toContain('Start it');
    } finally {
      await client.close();
      await server.close();
      await holder.close();
      await capped.stop();
    }
  });

  it('closing while the worker still publishes: nothing reaches the client after the result', async () => {
    let firstProgress = () => {};
    const progressed = new Promise<void>((resolve) => {
      firstProgress = resolve;
    });
    let worker: Promise<unknown> = Promise.resolve();
    const server = await host(async (_args: RenderArgs, context: RelayContext) => {
      const relay = await relayProgress(context, {
        runtimeDir: daemon.runtimeDir,
        minIntervalMs: 0,
      });
      // Many acknowledged steps: the worker is still publishing long after the relay closes.
      worker = runWorker(relay.env, ['3000']);
      await progressed;
      await relay.close();
      return 'closed early';
    });
    const client = await connectUrl(server.url);
    const result = await client.client.callTool(
      { name: 'render', arguments: { steps: 1 } },
      undefined,
      { onprogress: () => firstProgress() },
    );
    expect(textOf(result)).toBe('closed early');
    // The worker publishes to the end after the result; then one more round trip.
    expect(await worker).toMatchObject({ code: 0, stderr: '' });
    await client.client.listTools();
    const resultAt = responseIndex(client.received, 1);
    expect(resultAt).toBeGreaterThan(0);
    const lastProgressAt = client.received.findLastIndex(
      (m) => 'method' in m && m.method === 'notifications/progress',
    );
    expect(lastProgressAt).toBeGreaterThan(-1);
    expect(lastProgressAt).toBeLessThan(resultAt);
    const values = progressParams(client.received).map((p) => p.progress as number);
    expect(values.length).toBeLessThan(3000);
    expect(values).toEqual(values.toSorted((x, y) => x - y));
    expect(client.errors).toEqual([]);
    await client.close();
    await server.close();
  });

  it('close() returns when the daemon has stopped answering (SIGSTOP)', async () => {
    const own = await startDaemon();
    let subscribed: (relaying: boolean) => void = () => {};
    const relaying = new Promise<boolean>((resolve) => {
      subscribed = resolve;
    });
    let proceed = () => {};
    const stopped = new Promise<void>((resolve) => {
      proceed = resolve;
    });
    const server = await host(async (_args: RenderArgs, context: RelayContext) => {
      const relay = await relayProgress(context, { runtimeDir: own.runtimeDir, minIntervalMs: 0 });
      subscribed(relay.relaying);
      await stopped;
      await relay.close();
      return 'closed';
    });
    const client = await connectUrl(server.url);
    const call = client.client.callTool({ name: 'render', arguments: { steps: 1 } }, undefined, {
      onprogress: () => {},
    });
    try {
      expect(await relaying).toBe(true);
      own.child.kill('SIGSTOP');
      proceed();
      expect(textOf(await call)).toBe('closed');
    } finally {
      own.child.kill('SIGCONT');
      await client.close();
      await server.close();
      await own.stop();
    }
  });
});

/** A barrier: each caller waits until `count` callers have arrived. */
function meetingOf(count: number): () => Promise<void> {
  let arrived = 0;
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return () => {
    arrived++;
    if (arrived >= count) open();
    return opened;
  };
}

/** A runtime dir whose daemon.json names a dead pid, a missing socket and a port nobody listens on. */
async function staleRuntimeDir(): Promise<string> {
  const dir = tempDir();
  const listener = createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const { port } = listener.address() as { port: number };
  await new Promise<void>((resolve) => listener.close(() => resolve()));
  writeFileSync(
    join(dir, 'daemon.json'),
    JSON.stringify({
      pid: 2 ** 22 + 1,
      version: '0.1.0',
      socket: join(dir, 'bridge.sock'),
      url: `ws://127.0.0.1:${port}/ws`,
      secret: 'stale-secret',
    }),
    { mode: 0o600 },
  );
  return dir;
}

/** initialize, initialized and one tools/call without a token, as raw HTTP; returns the call's body. */
async function rawToolCall(url: URL): Promise<string> {
  const inSession = await openRawSession(url);
  const call = await postMcp(
    url,
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'render', arguments: { steps: 2 } },
    },
    inSession,
  );
  return call.text();
}
