/**
 * The MCP clients the bridge serves, behind one face, so that a scenario is written once and run
 * over each: SDK 1.x and 2.x, over stdio to `mcp-progress mcp` and over Streamable HTTP to /mcp.
 */
import { expect } from 'vitest';
import type { RunningDaemon } from './daemon.js';
import {
  connectHttp,
  connectStdio,
  expectSeenInOrder,
  httpBase,
  openRawSession,
  postMcp,
  progressParams,
  publishWhenWatched,
  type TappedClient,
} from './mcp.js';
import {
  connectHttpV2,
  connectStdioV2,
  NEWEST_REVISION,
  type Negotiation,
  type TappedV2Client,
} from './mcp-v2.js';

type Message = Record<string, unknown>;

export interface CallResult {
  isError?: boolean;
  structuredContent?: unknown;
}

/** A connected client of either SDK. */
export interface McpClientUnderTest {
  /** Every JSON-RPC message it received, in order. */
  readonly received: readonly Message[];
  call(
    name: string,
    args: Record<string, unknown>,
    onprogress?: (progress: number) => void,
  ): Promise<CallResult>;
  /** Checks what onprogress saw, and that the client reported no error a correct server causes. */
  expectSeen(seen: number[], expected: number[], token: unknown): void;
  close(): Promise<void>;
}

export interface McpTransport {
  readonly name: string;
  /** SDK 1.x: the progressToken of a call is its request id. */
  readonly tokenIsRequestId: boolean;
  connect(daemon: RunningDaemon): Promise<McpClientUnderTest>;
}

function fromV1(mcp: TappedClient): McpClientUnderTest {
  return {
    received: mcp.received as unknown as Message[],
    call: (name, args, onprogress) =>
      mcp.client.callTool(
        { name, arguments: args },
        undefined,
        onprogress === undefined ? undefined : { onprogress: (p) => onprogress(p.progress) },
      ) as Promise<CallResult>,
    expectSeen: (seen, expected, token) =>
      expectSeenInOrder(mcp, seen, expected, token as string | number),
    close: () => mcp.close(),
  };
}

/** What each 2.x mode settles on with the bridge: it offers 2026-07-28 and the 2025 revisions. */
export const NEGOTIATED: Record<Negotiation, string> = {
  pin: NEWEST_REVISION,
  auto: NEWEST_REVISION,
  legacy: '2025-11-25',
};

function fromV2(mcp: TappedV2Client, negotiation: Negotiation): McpClientUnderTest {
  expect(mcp.client.getNegotiatedProtocolVersion()).toBe(NEGOTIATED[negotiation]);
  return {
    received: mcp.received,
    call: (name, args, onprogress) =>
      mcp.client.callTool(
        { name, arguments: args },
        onprogress === undefined ? undefined : { onprogress: (p) => onprogress(p.progress) },
      ) as Promise<CallResult>,
    expectSeen: (seen, expected) => {
      expect(seen).toEqual(expected);
      expect(mcp.errors).toEqual([]);
    },
    close: () => mcp.close(),
  };
}

const V2_MODES: Negotiation[] = ['pin', 'auto', 'legacy'];

export const STDIO_TRANSPORTS: McpTransport[] = [
  {
    name: 'SDK 1.x over stdio',
    tokenIsRequestId: true,
    connect: async (daemon) => fromV1(await connectStdio(['--runtime-dir', daemon.runtimeDir])),
  },
  ...V2_MODES.map((negotiation) => ({
    name: `SDK 2.x (${negotiation}) over stdio`,
    tokenIsRequestId: false,
    connect: async (daemon: RunningDaemon) =>
      fromV2(await connectStdioV2(['--runtime-dir', daemon.runtimeDir], negotiation), negotiation),
  })),
];

export const HTTP_TRANSPORTS: McpTransport[] = [
  {
    name: 'SDK 1.x over HTTP',
    tokenIsRequestId: true,
    connect: async (daemon) => fromV1(await connectHttp(daemon.info)),
  },
  ...V2_MODES.map((negotiation) => ({
    name: `SDK 2.x (${negotiation}) over HTTP`,
    tokenIsRequestId: false,
    connect: async (daemon: RunningDaemon) =>
      fromV2(await connectHttpV2(daemon.info, negotiation), negotiation),
  })),
];

/** The response that carries watch_progress's result for `token`, and where it arrived. */
export function watchResultOf(
  received: readonly Message[],
  token: unknown,
): { at: number; id: unknown } {
  const at = received.findIndex(
    (m) =>
      'result' in m &&
      (m.result as { structuredContent?: { progressToken?: unknown } }).structuredContent
        ?.progressToken === token,
  );
  return { at, id: received[at]?.id };
}

/**
 * watch_progress while a worker publishes `steps` updates: every update arrives, verbatim and in
 * order, under the call's own token, then the result, then nothing.
 */
export async function expectWatchHappyPath(
  transport: McpTransport,
  mcp: McpClientUnderTest,
  daemon: RunningDaemon,
  token: string,
  steps = 5,
): Promise<void> {
  const seen: number[] = [];
  const call = mcp.call('watch_progress', { progressToken: token, minIntervalMs: 0 }, (p) =>
    seen.push(p),
  );
  await publishWhenWatched(daemon.info, token, steps);
  const result = await call;
  expect(result.isError).toBeFalsy();
  expect(result.structuredContent).toMatchObject({
    progressToken: token,
    state: 'done',
    status: 'ok',
    timedOut: false,
    progress: steps,
    total: steps,
    updates: steps,
  });
  // One more round trip: anything sent after the result would arrive before its answer.
  await mcp.call('list_progress', {});
  const progress = progressParams(mcp.received as never);
  const callToken = progress[0]?.progressToken;
  const expected = Array.from({ length: steps }, (_, i) => i + 1);
  expect(progress).toEqual(
    expected.map((n) => ({
      progressToken: callToken,
      progress: n,
      total: steps,
      message: `step ${n}`,
    })),
  );
  const resultOf = watchResultOf(mcp.received, token);
  expect(resultOf.at).toBeGreaterThan(-1);
  // SDK 1.x labels a call's progress with its request id: the one the result answers.
  if (transport.tokenIsRequestId) expect(resultOf.id).toBe(callToken);
  const lastProgressAt = mcp.received.findLastIndex(
    (m) => 'method' in m && m.method === 'notifications/progress',
  );
  expect(lastProgressAt).toBeLessThan(resultOf.at);
  mcp.expectSeen(seen, expected, callToken);
}

/** How a raw HTTP client of each revision makes a tools/call to /mcp. */
export interface RawCaller {
  readonly name: string;
  /** The headers of its requests (opening a session first where the revision has them). */
  open(daemon: RunningDaemon): Promise<Record<string, string>>;
  /** Headers that name the tool called, where the revision has them. */
  toolHeaders(tool: string): Record<string, string>;
  readonly meta: Record<string, unknown>;
}

export const RAW_CALLERS: RawCaller[] = [
  {
    name: 'a 2025-06-18 client in a session',
    open: (daemon) =>
      openRawSession(`${httpBase(daemon.info)}/mcp`, {
        authorization: `Bearer ${daemon.info.secret}`,
      }),
    toolHeaders: () => ({}),
    meta: { progressToken: 1 },
  },
  {
    name: 'a 2026-07-28 client, sessionless',
    open: async (daemon) => ({
      authorization: `Bearer ${daemon.info.secret}`,
      'mcp-protocol-version': NEWEST_REVISION,
    }),
    toolHeaders: (tool) => ({ 'mcp-method': 'tools/call', 'mcp-name': tool }),
    meta: {
      progressToken: 1,
      'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  },
];

/** A raw tools/call on /mcp, ended early by `signal` if given; resolves with the body read. */
export function rawToolCall(
  daemon: RunningDaemon,
  caller: RawCaller,
  headers: Record<string, string>,
  call: { id: number; tool: string; args: Record<string, unknown> },
  signal?: AbortSignal,
): Promise<string> {
  return (
    postMcp(
      `${httpBase(daemon.info)}/mcp`,
      {
        jsonrpc: '2.0',
        id: call.id,
        method: 'tools/call',
        params: { name: call.tool, arguments: call.args, _meta: caller.meta },
      },
      { ...headers, ...caller.toolHeaders(call.tool) },
      signal,
    )
      .then((response) => response.text())
      // An aborted call ends with what was read before: nothing the test needs.
      .catch(() => '')
  );
}
