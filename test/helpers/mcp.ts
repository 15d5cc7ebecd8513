/** Real MCP SDK clients for the tests, with a tap on the raw messages they receive. */
import { spawn } from 'node:child_process';
import { get, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { BIN, ROOT } from './daemon.js';
import { connectGateway } from './gateway.js';
import { PYTHON, PYTHON_ARGS } from './python.js';

export interface TappedClient {
  readonly client: Client;
  /** Every JSON-RPC message the client received, in order. */
  readonly received: JSONRPCMessage[];
  /** Errors the client reported (an unknown progress token is one). */
  readonly errors: Error[];
  stderr(): string;
  close(): Promise<void>;
}

/**
 * Connects an SDK 1.x client over `transport` and keeps, from then on, every message it receives
 * (each also shown to `observe`, before the client handles it) and every error it reports.
 */
export async function connectWithTap(
  transport: Transport,
  observe?: (message: JSONRPCMessage) => void,
): Promise<{ client: Client; received: JSONRPCMessage[]; errors: Error[] }> {
  const client = new Client({ name: 'mcp-progress-test', version: '0.0.0' });
  const received: JSONRPCMessage[] = [];
  const errors: Error[] = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    received.push(message);
    observe?.(message);
    deliver?.(message, extra);
  };
  return { client, received, errors };
}

async function tapped(transport: Transport, stderr: () => string): Promise<TappedClient> {
  const { client, received, errors } = await connectWithTap(transport);
  return { client, received, errors, stderr, close: () => client.close() };
}

/** Spawns `mcp-progress mcp` over stdio, as a host does. */
export async function connectStdio(
  args: string[],
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<TappedClient & { transport: StdioClientTransport }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...nodeArgs, BIN, 'mcp', ...args],
    env: { ...(process.env as Record<string, string>), MCP_PROGRESS_SOCKET: '', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return { ...(await tapped(transport, () => stderr)), transport };
}

/** The JSON-RPC text of an MCP initialize request, as a client's first POST to /mcp. */
export function initializeText(clientName: string, protocolVersion = '2025-06-18'): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: {
      protocolVersion,
      capabilities: {},
      clientInfo: { name: clientName, version: '1' },
    },
  });
}

/** The daemon's HTTP base (its gateway URL without /ws). */
export function httpBase(info: DaemonInfo): string {
  return info.url.replace(/^ws:/, 'http:').replace(/\/ws$/, '');
}

/** Connects to the daemon's /mcp over Streamable HTTP with its secret. */
export async function connectHttp(info: DaemonInfo): Promise<TappedClient> {
  const transport = new StreamableHTTPClientTransport(new URL(`${httpBase(info)}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${info.secret}` } },
  });
  return tapped(transport, () => '');
}

/** Connects to any Streamable HTTP MCP server. */
export async function connectUrl(url: URL): Promise<TappedClient> {
  return tapped(new StreamableHTTPClientTransport(url), () => '');
}

/** Progress notifications among the received messages, as their params. */
export function progressParams(received: JSONRPCMessage[]): Array<Record<string, unknown>> {
  return received
    .filter((m) => 'method' in m && m.method === 'notifications/progress')
    .map((m) => (m as { params: Record<string, unknown> }).params);
}

/** Index of the response to request `id` among the received messages. */
export function responseIndex(received: JSONRPCMessage[], id: number | string): number {
  return received.findIndex((m) => 'id' in m && m.id === id && ('result' in m || 'error' in m));
}

export interface WorkerRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs test/fixtures/progress_worker.py with the given env (only the env: it knows nothing else). */
export function runWorker(
  env: Record<string, string>,
  args: string[],
  onStdout?: (text: string) => void,
): Promise<WorkerRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      PYTHON,
      [...PYTHON_ARGS, join(ROOT, 'test/fixtures/progress_worker.py'), ...args],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '', ...env },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      onStdout?.(text);
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Waits until the daemon shows `count` subscribers on `token` (so that publishing now is
 * seen live); with `count` 0, until no stream of `token` has any (or there is none).
 */
export async function waitForSubscribers(
  info: DaemonInfo,
  token: string | number,
  count = 1,
  timeoutMs = 10_000,
): Promise<void> {
  const gateway = await connectGateway(info);
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reply = await gateway.request('progress/list');
      const streams = (reply.result as { streams: Array<Record<string, unknown>> }).streams;
      const mine = streams.filter((s) => s.progressToken === token);
      if (
        count === 0
          ? mine.every((s) => s.subscribers === 0)
          : mine.some((s) => s.subscribers === count)
      )
        return;
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${count} subscribers on ${JSON.stringify(token)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await gateway.close();
  }
}

/**
 * Once the daemon shows a subscriber on `token` (so that every value is live, not a
 * late-join snapshot), runs the example worker for `steps` updates on it and checks that
 * it exited cleanly.
 */
export async function publishWhenWatched(info: DaemonInfo, token: string, steps: number) {
  await waitForSubscribers(info, token);
  const worker = await runWorker({ MCP_PROGRESS_SOCKET: info.socket, MCP_PROGRESS_TOKEN: token }, [
    String(steps),
  ]);
  expect(worker).toMatchObject({ code: 0, stderr: '' });
}

/** The text of a tool result's first content item. */
export function textOf(result: object): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content;
  return content?.[0]?.text ?? '';
}

/** The errors an SDK 1.x client reported for progress under a token it did not know. */
export function unknownTokenErrors(client: Pick<TappedClient, 'errors'>): string[] {
  return client.errors
    .map((error) => error.message)
    .filter((message) => message.includes('unknown token'));
}

/**
 * What the SDK client's onprogress saw: every expected value, in order, and no
 * progress reported as an unknown token. The SDK 1.x client dispatches a
 * notification a microtask late but a response at once, so a notification read
 * in the same chunk as the result would find its handler gone
 * (modelcontextprotocol/typescript-sdk#2580); the server keeps RESULT_GAP_MS
 * between its last notification and the result so that this does not happen.
 */
export function expectSeenInOrder(
  client: TappedClient,
  seen: number[],
  expected: number[],
  token: string | number,
): void {
  expect(
    unknownTokenErrors(client),
    `progress under ${JSON.stringify(token)} reported as unknown`,
  ).toEqual([]);
  expect(seen).toEqual(expected);
}

/** The 2025-revision initialize a raw client sends (SDK 1.x sends the same fields). */
export const RAW_INITIALIZE = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'raw', version: '0' },
  },
} as const;

/** What a Streamable HTTP client sends with every POST. */
export const MCP_POST_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
} as const;

/** One JSON-RPC message POSTed to a Streamable HTTP endpoint, as raw fetch. */
export function postMcp(
  url: URL | string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, ...headers },
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
}

/**
 * Sends one /mcp POST of the daemon on a connection of its own, by node:http; resolves with the
 * response, its body unread (a test may pause it: what the daemon sends then piles up).
 */
export function postRaw(
  info: DaemonInfo,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${httpBase(info)}/mcp`);
    const request = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: false,
        headers: { ...MCP_POST_HEADERS, authorization: `Bearer ${info.secret}`, ...headers },
      },
      resolve,
    );
    request.once('error', reject);
    request.end(JSON.stringify(body));
  });
}

/**
 * Opens a 2025-revision session by hand (initialize, then initialized); returns `headers` with
 * the session's id and revision added, for the requests of that session.
 */
export async function openRawSession(
  url: URL | string,
  headers: Record<string, string> = {},
): Promise<Record<string, string>> {
  const init = await postMcp(url, RAW_INITIALIZE, headers);
  const session = init.headers.get('mcp-session-id') ?? '';
  await init.text();
  const inSession = {
    ...headers,
    'mcp-session-id': session,
    'mcp-protocol-version': RAW_INITIALIZE.params.protocolVersion,
  };
  await (
    await postMcp(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, inSession)
  ).text();
  return inSession;
}

/** A tools/call of watch_progress on `token`, every update forwarded, under the caller's token. */
export function watchCall(id: number, token: string, timeoutMs: number): object {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: watchParams(token, timeoutMs) };
}

/** watchCall's params: watch_progress on `token`, every update, under the caller's token. */
export function watchParams(token: string, timeoutMs: number): Record<string, unknown> {
  return {
    name: 'watch_progress',
    arguments: { progressToken: token, minIntervalMs: 0, timeoutMs },
    _meta: { progressToken: 'caller' },
  };
}

/**
 * A GET that resumes an SSE stream after `lastEventId` (a client whose stream dropped); the
 * text replayed, once it includes `until`.
 */
export function resumeSse(
  url: string,
  headers: Record<string, string>,
  lastEventId: string,
  until: string,
): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const target = new URL(url);
    const request = get(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastEventId },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
          if (text.includes(until)) {
            response.destroy();
            resolve(text);
          }
        });
        response.on('end', () => reject(new Error(`the replay ended without ${until}: ${text}`)));
      },
    );
    request.on('error', reject);
  });
}
