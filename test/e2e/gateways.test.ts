/**
 * Real third-party gateways from npm in front of `mcp-progress mcp`:
 * supergateway and mcp-proxy spawn it over stdio and serve it over HTTP,
 * SSE or WebSocket; a real SDK client calls watch_progress through them and
 * must get every progress value, in order, and then the result.
 * docs/COMPATIBILITY.md is the table of what these show.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../bench/lib/proc.ts';
import { BIN, eventually, ROOT } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { publishWhenWatched } from '../helpers/mcp.js';
import { connectUrlV2, NEWEST_REVISION } from '../helpers/mcp-v2.js';

const daemon = daemonForFile();
const running: ChildProcess[] = [];

afterEach(() => {
  // Each gateway runs in its own process group, with the `mcp` it spawned: end them together.
  for (const child of running.splice(0)) {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, 'SIGTERM');
  }
});

/** The command line of `mcp-progress mcp` that a gateway spawns. */
const mcpCommand = () => [process.execPath, BIN, 'mcp', '--runtime-dir', daemon.runtimeDir];

function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts a gateway's npm bin and waits until it accepts connections. */
async function startGateway(bin: string, args: string[], port: number): Promise<() => string> {
  const child = spawn(process.execPath, [join(ROOT, 'node_modules/.bin', bin), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, MCP_PROGRESS_SOCKET: '' },
  });
  running.push(child);
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    output += text;
  });
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    output += text;
  });
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`${bin} exited ${child.exitCode}: ${output}`);
      return (await accepting(port)) ? true : undefined;
    },
    30_000,
    `${bin} to listen on ${port}`,
  );
  return () => output;
}

type WatchCall = { name: 'watch_progress'; arguments: Record<string, unknown> };

/** A connected client of either SDK major, reduced to what the test does with it. */
interface Through {
  call(params: WatchCall, onprogress: (p: { progress: number }) => void): Promise<unknown>;
  close(): Promise<void>;
}

async function sdkV1(transport: Transport): Promise<Through> {
  const client = new Client({ name: 'mcp-progress-gateway-test', version: '0.0.0' });
  await client.connect(transport);
  return {
    call: async (params, onprogress) =>
      (await client.callTool(params, undefined, { onprogress, timeout: 60_000 })).structuredContent,
    close: () => client.close(),
  };
}

async function sdkV2(url: URL): Promise<Through> {
  const { client } = await connectUrlV2(url, 'pin');
  return {
    call: async (params, onprogress) =>
      (await client.callTool(params, { onprogress, timeout: 60_000 })).structuredContent,
    close: () => client.close(),
  };
}

interface Case {
  readonly name: string;
  readonly bin: 'supergateway' | 'mcp-proxy';
  readonly args: (port: number) => string[];
  readonly connect: (port: number) => Promise<Through>;
}

const base = (port: number) => `http://127.0.0.1:${port}`;

/** supergateway serving `mcp-progress mcp` on `port`, with the output transport options. */
const supergateway = (port: number, ...output: string[]) => [
  '--stdio',
  mcpCommand().join(' '),
  ...output,
  '--port',
  `${port}`,
];

/** mcp-proxy serving `mcp-progress mcp` on `port` as `server` (stream or sse). */
const mcpProxy = (port: number, server: 'stream' | 'sse') => [
  '--port',
  `${port}`,
  '--host',
  '127.0.0.1',
  '--server',
  server,
  '--',
  ...mcpCommand(),
];

const STATEFUL_HTTP = ['--outputTransport', 'streamableHttp', '--stateful'];

const CASES: Case[] = [
  {
    name: 'supergateway stdio -> SSE',
    bin: 'supergateway',
    args: (port) => supergateway(port),
    connect: (port) => sdkV1(new SSEClientTransport(new URL(`${base(port)}/sse`))),
  },
  {
    name: 'supergateway stdio -> WebSocket',
    bin: 'supergateway',
    args: (port) => supergateway(port, '--outputTransport', 'ws'),
    connect: (port) =>
      sdkV1(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${port}/message`))),
  },
  {
    name: 'supergateway stdio -> Streamable HTTP (stateful)',
    bin: 'supergateway',
    args: (port) => supergateway(port, ...STATEFUL_HTTP),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    // Stateless: a fresh `mcp` per request, initialized by supergateway itself.
    name: 'supergateway stdio -> Streamable HTTP (stateless)',
    bin: 'supergateway',
    args: (port) => supergateway(port, '--outputTransport', 'streamableHttp'),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    name: `supergateway stdio -> Streamable HTTP (stateful), a 2.x client at ${NEWEST_REVISION}`,
    bin: 'supergateway',
    args: (port) => supergateway(port, ...STATEFUL_HTTP),
    connect: (port) => sdkV2(new URL(`${base(port)}/mcp`)),
  },
  {
    name: 'mcp-proxy stdio -> Streamable HTTP',
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'stream'),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    name: 'mcp-proxy stdio -> SSE',
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'sse'),
    connect: (port) => sdkV1(new SSEClientTransport(new URL(`${base(port)}/sse`))),
  },
  {
    name: `mcp-proxy stdio -> Streamable HTTP, a 2.x client at ${NEWEST_REVISION}`,
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'stream'),
    connect: (port) => sdkV2(new URL(`${base(port)}/mcp`)),
  },
];

describe.each(CASES)('$name', ({ name, bin, args, connect }) => {
  it('forwards every progress value in order, then the result', async () => {
    const port = await freePort();
    const output = await startGateway(bin, args(port), port);
    const through = await connect(port);
    const token = `gw-${name.replace(/[^a-z0-9]+/gi, '-')}`;
    const seen: number[] = [];
    try {
      const call = through.call(
        { name: 'watch_progress', arguments: { progressToken: token, minIntervalMs: 0 } },
        (p) => seen.push(p.progress),
      );
      await publishWhenWatched(daemon.info, token, 4);
      const result = await call;
      expect(result, output()).toMatchObject({
        progressToken: token,
        state: 'done',
        status: 'ok',
        updates: 4,
      });
      // Every value reached the client's handler before its result did.
      expect(seen, output()).toEqual([1, 2, 3, 4]);
    } finally {
      await through.close();
    }
  });
});
