/**
 * The one forwarding loop (src/mcp/forward.ts), tested once for both of its
 * callers: watch_progress of `mcp-progress mcp` (a real SDK client over
 * stdio) and relayProgress inside an SDK 1.x server (a real SDK client over
 * Streamable HTTP). A raw worker on the daemon's socket publishes; every
 * test waits for the acks and the results it expects.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayProgress } from '../../src/mcp/index.js';
import type { FastMcpToolContext } from '../../src/mcp/relay.js';
import type { ProgressToken } from '../../src/protocol/frames.js';
import { BIN, eventually } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import {
  connectWithTap,
  progressParams,
  responseIndex,
  waitForSubscribers,
} from '../helpers/mcp.js';
import { type HostedServer, hostV1 } from '../helpers/relay-servers.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const daemon = daemonForFile();
let worker: RawWorker;
let seq = 0;

beforeAll(async () => {
  worker = await rawWorker(daemon.info.socket);
});
afterAll(() => worker.destroy());

/** Publishes progress `values` then done on `token`, and waits for the daemon's acks. */
async function publish(token: ProgressToken, values: number[], done = true): Promise<void> {
  for (const progress of values)
    worker.send('progress', { v: 1, progressToken: token, progress, total: 100, seq: ++seq });
  if (done) worker.send('done', { v: 1, progressToken: token, status: 'ok', seq: ++seq });
  const last = seq;
  await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === last);
}

/** A real SDK client with a tap on what it receives and, optionally, a gateway's quirk on what it sends. */
interface Probe {
  readonly client: Client;
  readonly received: JSONRPCMessage[];
  /** The server's pings the client received. */
  readonly pings: Array<string | number>;
  readonly errors: Error[];
  close(): Promise<void>;
}

/**
 * `rewritePingReplies`: the client's answers to pings leave with another id,
 * as supergateway's stdio->WebSocket does, so the server never sees one.
 */
async function probe(transport: Transport, rewritePingReplies: boolean): Promise<Probe> {
  const pings: Array<string | number> = [];
  const { client, received, errors } = await connectWithTap(transport, (message) => {
    if ('method' in message && message.method === 'ping' && 'id' in message) pings.push(message.id);
  });
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (rewritePingReplies && 'result' in message && pings.includes(message.id))
      return send({ ...message, id: `rewritten-${String(message.id)}` }, options);
    return send(message, options);
  };
  return { client, received, pings, errors, close: () => client.close() };
}

interface Caller {
  connect(rewritePingReplies: boolean): Promise<Probe>;
  /**
   * Starts one tool call that forwards a stream; resolves with the token to
   * publish under once the call is subscribed, and the call itself.
   */
  start(
    probe: Probe,
    onProgress: (value: number) => void,
    stop?: Promise<void>,
  ): Promise<{ token: ProgressToken; call: Promise<unknown> }>;
  close(): Promise<void>;
}

/** watch_progress of `mcp-progress mcp`, over stdio. */
function watchCaller(): Caller {
  return {
    connect: (rewrite) =>
      probe(
        new StdioClientTransport({
          command: process.execPath,
          args: [BIN, 'mcp', '--runtime-dir', daemon.runtimeDir],
          env: { ...(process.env as Record<string, string>), MCP_PROGRESS_SOCKET: '' },
          stderr: 'pipe',
        }),
        rewrite,
      ),
    async start(probe, onProgress, stop) {
      const token = `watch-${randomUUID()}`;
      // To stop early, watch_progress returns at its timeout (and the test publishes no more until then).
      const timeout = stop === undefined ? {} : { timeoutMs: 300 };
      const call = probe.client.callTool(
        {
          name: 'watch_progress',
          arguments: { progressToken: token, minIntervalMs: 0, ...timeout },
        },
        undefined,
        { onprogress: (p) => onProgress(p.progress) },
      );
      await waitForSubscribers(daemon.info, token);
      return { token, call };
    },
    close: async () => {},
  };
}

/** relayProgress in an SDK 1.x server over Streamable HTTP; the tool returns once the worker is done. */
function relayCaller(): Caller {
  const routeKeys: string[] = [];
  let stopping: Promise<void> | undefined;
  let server: HostedServer | undefined;
  return {
    async connect(rewrite) {
      server ??= await hostV1(async (_args, extra) => {
        await using relay = await relayProgress(extra, {
          runtimeDir: daemon.runtimeDir,
          minIntervalMs: 0,
        });
        routeKeys.push(relay.routeKey);
        const done = await (stopping === undefined
          ? relay.done
          : Promise.race([relay.done, stopping]));
        return `done: ${done?.status}`;
      });
      return probe(new StreamableHTTPClientTransport(server.url), rewrite);
    },
    async start(probe, onProgress, stop) {
      stopping = stop;
      const before = routeKeys.length;
      const call = probe.client.callTool({ name: 'render', arguments: { steps: 1 } }, undefined, {
        onprogress: (p) => onProgress(p.progress),
      });
      const token = await eventually(() => routeKeys[before], 10_000, 'the relay to subscribe');
      return { token, call };
    },
    close: async () => {
      await server?.close();
    },
  };
}

const values = (count: number) => Array.from({ length: count }, (_, i) => i + 1);

/**
 * The progress the client received for the call with request id `id` (the
 * SDK client's progressToken is its request id: initialize is 0, the first call 1).
 */
function expectAllBeforeResult(
  probe: Probe,
  id: number,
  expected: number[],
  options: { handlerChecked?: boolean } = {},
): void {
  const resultAt = responseIndex(probe.received, id);
  expect(resultAt).toBeGreaterThan(-1);
  const mine = (messages: JSONRPCMessage[]) =>
    progressParams(messages).filter((p) => p.progressToken === id);
  // Under the caller's own token, every value, in order, before the result.
  expect(mine(probe.received.slice(0, resultAt)).map((p) => p.progress)).toEqual(expected);
  expect(mine(probe.received.slice(resultAt + 1))).toEqual([]);
  if (options.handlerChecked === false) return;
  const unknown = probe.errors.filter((e) => e.message.includes('unknown token'));
  expect(unknown).toEqual([]);
}

describe.each([
  { name: 'watch_progress of `mcp-progress mcp` over stdio', makeCaller: watchCaller },
  { name: 'relayProgress in an SDK 1.x server over Streamable HTTP', makeCaller: relayCaller },
])('the forwarding loop, for $name', ({ makeCaller }) => {
  const caller = makeCaller();
  afterAll(() => caller.close());

  it('forwards every update in order, all of it before the result and nothing after, pinging once', async () => {
    const probe = await caller.connect(false);
    const seen: number[] = [];
    const { token, call } = await caller.start(probe, (v) => seen.push(v));
    await publish(token, values(20));
    await call;
    // One more round trip: anything sent after the result would have arrived by its answer.
    await probe.client.listTools();
    expectAllBeforeResult(probe, 1, values(20));
    expect(seen).toEqual(values(20));
    expect(probe.pings).toHaveLength(1);
    await probe.close();
  });

  it('a client whose ping answers never come back (supergateway) is pinged once, and not again', async () => {
    const probe = await caller.connect(true);
    for (const id of [1, 2]) {
      const seen: number[] = [];
      const { token, call } = await caller.start(probe, (v) => seen.push(v));
      await publish(token, values(5));
      await call;
      // On the wire, every value before the result. Without a ping nothing proves the client
      // dispatched the last one before the result (typescript-sdk#2580), so its handler is not checked.
      expectAllBeforeResult(probe, id, values(5), { handlerChecked: id === 1 });
      if (id === 1) expect(seen).toEqual(values(5));
      // The first call pinged and got no answer; the second does not ping at all.
      expect(probe.pings).toHaveLength(1);
    }
    await probe.close();
  });

  it('stopped before the stream is done: nothing reaches the client after the result', async () => {
    const probe = await caller.connect(false);
    let firstSeen = () => {};
    const stop = new Promise<void>((resolve) => {
      firstSeen = resolve;
    });
    const seen: number[] = [];
    const { token, call } = await caller.start(
      probe,
      (v) => {
        seen.push(v);
        firstSeen();
      },
      stop,
    );
    await publish(token, [1], false);
    await call;
    // The stream goes on after the result, and ends.
    await publish(token, values(50).slice(1));
    await probe.client.listTools();
    expectAllBeforeResult(probe, 1, [1]);
    expect(seen).toEqual([1]);
    await probe.close();
  });

  it('a call without updates sends no ping', async () => {
    const probe = await caller.connect(false);
    const { token, call } = await caller.start(probe, () => {});
    await publish(token, []);
    await call;
    expect(probe.pings).toEqual([]);
    expect(progressParams(probe.received)).toEqual([]);
    await probe.close();
  });
});

describe('relayProgress with other tool contexts', () => {
  it('a FastMCP context: progress goes through its reportProgress, in order, without a token', async () => {
    const reported: unknown[] = [];
    const context: FastMcpToolContext = {
      reportProgress: async (progress) => {
        reported.push(progress);
      },
      signal: new AbortController().signal,
    };
    const warnings: string[] = [];
    const relay = await relayProgress(context, {
      runtimeDir: daemon.runtimeDir,
      minIntervalMs: 0,
      onWarning: (m) => warnings.push(m),
    });
    expect(relay.relaying).toBe(true);
    await publish(relay.routeKey, values(3));
    expect(await relay.done).toEqual({ progressToken: relay.routeKey, status: 'ok' });
    await relay.close();
    // FastMCP adds the client's own token itself.
    expect(reported).toEqual(values(3).map((progress) => ({ progress, total: 100 })));
    expect(warnings).toEqual([]);
  });

  it('a context it does not know costs one warning, and the worker still gets an env', async () => {
    const warnings: string[] = [];
    const onWarning = (message: string) => warnings.push(message);
    for (let i = 0; i < 2; i++) {
      const relay = await relayProgress({ reply: () => {} } as never, {
        runtimeDir: daemon.runtimeDir,
        onWarning,
      });
      expect(relay.relaying).toBe(false);
      expect(relay.env.MCP_PROGRESS_TOKEN).toBe(relay.routeKey);
      expect(await relay.done).toBeUndefined();
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('a context it does not know');
    expect(warnings[0]).toContain('FastMCP');
  });
});
