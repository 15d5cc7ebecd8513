/**
 * A relay in front of a real daemon's local link (its gateway Unix socket), for tests that must
 * see what a client sends, or cut its connection at one exact message. It has a runtime dir of
 * its own whose daemon.json is the daemon's with `gatewaySocket` naming the relay, so a client
 * (GatewayClient, tail) that finds the daemon there connects through it. Bytes pass unchanged
 * both ways; the relay only reads the WebSocket frames of both sides to name each message.
 */
import { writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { tempDir } from './daemon.js';

/** What to do with a client's message, and all it sends after: pass it on, hold it unsent, or cut the connection. */
export type RelayVerdict = 'pass' | 'hold' | 'cut';

export interface RelayedConnection {
  /** 1 for the first connection through the relay, 2 for the next, ... */
  readonly index: number;
  /** The text of each message the client sent after its upgrade (pongs and closes left out). */
  readonly sent: string[];
  /** The text of each message the daemon sent the client, as it was passed on. */
  readonly received: string[];
  /** Ends both sides at once, as a daemon that died would. */
  cut(): void;
  /** Stops reading what the daemon sends on it, as a client that does not read would. */
  stall(): void;
  /** Reads it again, passing on what the daemon sent meanwhile. */
  resume(): void;
  /** The code of the daemon's close frame, once one was passed on. */
  readonly closeCode: number | undefined;
}

export interface LinkRelay {
  /** The runtime dir to give a client: its daemon.json leads to the relay. */
  readonly runtimeDir: string;
  readonly connections: RelayedConnection[];
  /** Asked for each client message, before it is passed on (default: pass). */
  verdict: (connection: RelayedConnection, text: string) => RelayVerdict;
  /** Every message clients sent through the relay, parsed, on every connection. */
  requests(): Array<{ method?: string }>;
  close(): Promise<void>;
}

export async function startLinkRelay(info: DaemonInfo): Promise<LinkRelay> {
  const target = info.gatewaySocket;
  if (target === undefined) throw new Error('the daemon publishes no local link to relay');
  const runtimeDir = tempDir('mcp-progress-relay-');
  const path = join(runtimeDir, 'relay.sock');
  const sockets = new Set<Socket>();
  const relay: LinkRelay = {
    runtimeDir,
    connections: [],
    verdict: () => 'pass',
    requests: () =>
      relay.connections.flatMap((connection) =>
        connection.sent.map((text) => JSON.parse(text) as { method?: string }),
      ),
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server = createServer((client) => {
    const upstream = connect({ path: target });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    let closeCode: number | undefined;
    const connection: RelayedConnection = {
      index: relay.connections.length + 1,
      sent: [],
      received: [],
      cut() {
        client.destroy();
        upstream.destroy();
      },
      stall: () => upstream.pause(),
      resume: () => upstream.resume(),
      get closeCode() {
        return closeCode;
      },
    };
    relay.connections.push(connection);
    let upstreamHead = true;
    let downstream: Buffer = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
      let frames = chunk;
      if (upstreamHead) {
        // The 101 answer, then frames (in the same chunk if the daemon sends one at once).
        const end = chunk.indexOf('\r\n\r\n');
        if (end === -1) return;
        upstreamHead = false;
        frames = chunk.subarray(end + 4);
      }
      downstream = Buffer.concat([downstream, frames]);
      for (;;) {
        const message = nextFrame(downstream);
        if (message === undefined) break;
        downstream = message.rest;
        if (message.text !== undefined) connection.received.push(message.text);
        if (message.closeCode !== undefined) closeCode = message.closeCode;
      }
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    let head = true;
    let pending: Buffer = Buffer.alloc(0);
    let holding = false;
    client.on('data', (chunk: Buffer) => {
      if (holding) return;
      let verdict: RelayVerdict = 'pass';
      if (head) {
        // The upgrade request: passed on as it is; the client sends frames only after the 101.
        head = !chunk.includes('\r\n\r\n');
      } else {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          const message = nextFrame(pending);
          if (message === undefined) break;
          pending = message.rest;
          if (message.text === undefined) continue;
          connection.sent.push(message.text);
          const said = relay.verdict(connection, message.text);
          if (said !== 'pass') verdict = said;
        }
      }
      if (verdict === 'cut') connection.cut();
      else if (verdict === 'hold') holding = true;
      else upstream.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(path, () => resolve()));
  writeFileSync(
    join(runtimeDir, 'daemon.json'),
    JSON.stringify({ ...info, gatewaySocket: path } satisfies DaemonInfo),
    { mode: 0o600 },
  );
  return relay;
}

/**
 * One whole frame (RFC 6455 5.2: masked from the client, unmasked from the daemon, unfragmented
 * as ws sends them) at the start of
 * `bytes`: its text when it is a text frame, its code when it is a close frame; undefined when
 * the frame is not all there yet.
 */
function nextFrame(
  bytes: Buffer,
): { text: string | undefined; closeCode?: number | undefined; rest: Buffer } | undefined {
  if (bytes.length < 2) return undefined;
  const opcode = (bytes[0] ?? 0) & 0x0f;
  const short = (bytes[1] ?? 0) & 0x7f;
  let offset = 2;
  let length = short;
  if (short === 126) {
    if (bytes.length < 4) return undefined;
    length = bytes.readUInt16BE(2);
    offset = 4;
  } else if (short === 127) {
    if (bytes.length < 10) return undefined;
    length = Number(bytes.readBigUInt64BE(2));
    offset = 10;
  }
  const masked = ((bytes[1] ?? 0) & 0x80) !== 0;
  const mask = masked ? bytes.subarray(offset, offset + 4) : undefined;
  if (masked) offset += 4;
  if (bytes.length < offset + length) return undefined;
  const payload = Buffer.from(bytes.subarray(offset, offset + length));
  if (mask !== undefined)
    for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] ?? 0) ^ (mask[i % 4] ?? 0);
  return {
    text: opcode === 0x1 ? payload.toString('utf8') : undefined,
    closeCode: opcode === 0x8 && payload.length >= 2 ? payload.readUInt16BE(0) : undefined,
    rest: bytes.subarray(offset + length),
  };
}
