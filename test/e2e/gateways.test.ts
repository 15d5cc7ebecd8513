/**
 * Real third-party gateways from npm in front of `mcp-progress mcp`:
 * supergateway and mcp-proxy spawn it over stdio and serve it over HTTP,
 * SSE or WebSocket; a real SDK client calls watch_progress through them and
 * must get every progress value, in order, and then the result.
 * docs/COMPATIBILITY.md is the table of what these show.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
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
  readonly bin: 'supergateway' | 'mcp-proxy';
  /** What the gateway does, as docs/COMPATIBILITY.md says it. */
  readonly mode: string;
  /** The client library in front of the gateway. */
  readonly client: 'v1' | 'v2';
  readonly args: (port: number) => string[];
  readonly connect: (port: number) => Promise<Through>;
}

const CLIENTS = {
  v1: '`@modelcontextprotocol/sdk` 1.x, 2025-11-25',
  v2: `\`@modelcontextprotocol/client\` 2.x, pinned to ${NEWEST_REVISION}`,
} as const;

const caseName = (c: Case) =>
  `${c.bin} ${c.mode}, ${c.client === 'v1' ? 'SDK 1.x' : `a 2.x client at ${NEWEST_REVISION}`}`;

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
    mode: 'stdio -> SSE',
    client: 'v1',
    bin: 'supergateway',
    args: (port) => supergateway(port),
    connect: (port) => sdkV1(new SSEClientTransport(new URL(`${base(port)}/sse`))),
  },
  {
    mode: 'stdio -> WebSocket',
    client: 'v1',
    bin: 'supergateway',
    args: (port) => supergateway(port, '--outputTransport', 'ws'),
    connect: (port) =>
      sdkV1(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${port}/message`))),
  },
  {
    mode: 'stdio -> Streamable HTTP (stateful)',
    client: 'v1',
    bin: 'supergateway',
    args: (port) => supergateway(port, ...STATEFUL_HTTP),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    // Stateless: a fresh `mcp` per request, initialized by supergateway itself.
    mode: 'stdio -> Streamable HTTP (stateless)',
    client: 'v1',
    bin: 'supergateway',
    args: (port) => supergateway(port, '--outputTransport', 'streamableHttp'),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    mode: 'stdio -> Streamable HTTP (stateful)',
    client: 'v2',
    bin: 'supergateway',
    args: (port) => supergateway(port, ...STATEFUL_HTTP),
    connect: (port) => sdkV2(new URL(`${base(port)}/mcp`)),
  },
  {
    mode: 'stdio -> Streamable HTTP',
    client: 'v1',
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'stream'),
    connect: (port) => sdkV1(new StreamableHTTPClientTransport(new URL(`${base(port)}/mcp`))),
  },
  {
    mode: 'stdio -> SSE',
    client: 'v1',
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'sse'),
    connect: (port) => sdkV1(new SSEClientTransport(new URL(`${base(port)}/sse`))),
  },
  {
    mode: 'stdio -> Streamable HTTP',
    client: 'v2',
    bin: 'mcp-proxy',
    args: (port) => mcpProxy(port, 'stream'),
    connect: (port) => sdkV2(new URL(`${base(port)}/mcp`)),
  },
];

/** The cases that passed, by name: docs/COMPATIBILITY.md's gateway table is made of them. */
const passed = new Set<string>();

describe.each(CASES.map((c) => ({ ...c, name: caseName(c) })))(
  '$name',
  ({ name, bin, args, connect }) => {
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
        passed.add(name);
      } finally {
        await through.close();
      }
    });
  },
);

const BEGIN = '<!-- gateways: made by test/e2e/gateways.test.ts from its own results -->';
const END = '<!-- gateways: end -->';

/** The gateway rows of docs/COMPATIBILITY.md, from the cases above and the installed versions. */
function gatewayTable(): string {
  const version = (bin: string) =>
    (
      JSON.parse(readFileSync(join(ROOT, 'node_modules', bin, 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
  const rows = CASES.map((c) => [
    `${c.bin} ${version(c.bin)}`,
    c.mode,
    CLIENTS[c.client],
    passed.has(caseName(c)) ? 'yes: every value, in order, then the result' : 'no',
  ]);
  const header = ['gateway', 'mode', 'client', 'progress through it'];
  const widths = header.map((h, i) =>
    Math.max(h.length, ...rows.map((r) => (r[i] as string).length)),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

describe('docs/COMPATIBILITY.md', () => {
  it('lists each gateway case with what it showed in this run (UPDATE_COMPATIBILITY=1 rewrites it)', () => {
    expect([...passed].sort(), 'every case above ran and passed').toEqual(
      CASES.map(caseName).sort(),
    );
    const file = join(ROOT, 'docs/COMPATIBILITY.md');
    const text = readFileSync(file, 'utf8');
    const start = text.indexOf(BEGIN);
    const end = text.indexOf(END);
    expect(start, `the ${BEGIN} marker`).toBeGreaterThan(-1);
    expect(end).toBeGreaterThan(start);
    const wanted = `${BEGIN}\n\n${gatewayTable()}\n\n`;
    const current = text.slice(start, end);
    if (process.env.UPDATE_COMPATIBILITY === '1' && current !== wanted)
      writeFileSync(file, text.slice(0, start) + wanted + text.slice(end));
    else expect(current).toBe(wanted);
  });
});
