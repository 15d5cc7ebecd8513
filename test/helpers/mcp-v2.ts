/**
 * Real @modelcontextprotocol/client 2.x clients for the tests, speaking the
 * newest revision they offer (2026-07-28: server/discover, no initialize, no
 * session), with a tap on the raw messages they receive.
 */
import {
  Client,
  type ClientCapabilities,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { BIN } from './daemon.js';
import { httpBase } from './mcp.js';

export const NEWEST_REVISION = '2026-07-28';

/**
 * pin: the newest revision or fail; auto: the newest both sides offer, else initialize;
 * legacy (the 2.4.0 default): initialize with a 2025 revision, as SDK 1.x does.
 */
export type Negotiation = 'pin' | 'auto' | 'legacy';

const MODES = {
  pin: { mode: { pin: NEWEST_REVISION } },
  auto: { mode: 'auto' },
  legacy: { mode: 'legacy' },
} as const;

type Message = Record<string, unknown>;

export interface TappedV2Client {
  readonly client: Client;
  /** Every JSON-RPC message the client received on its session, in order. */
  readonly received: Message[];
  readonly errors: Error[];
  close(): Promise<void>;
}

interface TapTransport {
  onmessage?: ((message: never, extra?: never) => void) | undefined;
}

async function tapped(
  transport: StdioClientTransport | StreamableHTTPClientTransport,
  negotiation: Negotiation,
  capabilities?: ClientCapabilities,
): Promise<TappedV2Client> {
  const client = new Client(
    { name: 'mcp-progress-test-v2', version: '0.0.0' },
    {
      versionNegotiation: MODES[negotiation],
      ...(capabilities === undefined ? {} : { capabilities }),
    },
  );
  const received: Message[] = [];
  const errors: Error[] = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  const tap = transport as unknown as TapTransport;
  const deliver = tap.onmessage;
  tap.onmessage = (message, extra) => {
    received.push(message as Message);
    deliver?.(message, extra);
  };
  return { client, received, errors, close: () => client.close() };
}

/** Spawns `mcp-progress mcp` over stdio, as a host with a 2.x client does. */
export function connectStdioV2(
  args: string[],
  negotiation: Negotiation,
  capabilities?: ClientCapabilities,
): Promise<TappedV2Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    env: { ...(process.env as Record<string, string>), MCP_PROGRESS_SOCKET: '' },
    stderr: 'pipe',
  });
  return tapped(transport, negotiation, capabilities);
}

/**
 * The daemon's /mcp over Streamable HTTP with its secret; `capabilities`: the client's, sent in
 * each request's _meta on 2026-07-28 (the tasks extension, say).
 */
export function connectHttpV2(
  info: DaemonInfo,
  negotiation: Negotiation,
  capabilities?: ClientCapabilities,
): Promise<TappedV2Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${httpBase(info)}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${info.secret}` } },
  });
  return tapped(transport, negotiation, capabilities);
}

/** Any Streamable HTTP MCP server (a gateway in front of the bridge). */
export function connectUrlV2(url: URL, negotiation: Negotiation): Promise<TappedV2Client> {
  return tapped(new StreamableHTTPClientTransport(url), negotiation);
}
