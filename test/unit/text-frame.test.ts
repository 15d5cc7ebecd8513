/**
 * The gateway's own WebSocket text frames, read by a real ws client over a real socket, between
 * frames that ws itself writes on the same connection (replies and pings).
 */
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { textFrame } from '../../src/daemon/gateway.js';
import { payloadOf } from '../../src/daemon/sessions.js';
import { eventually } from '../helpers/daemon.js';

const server = createServer();
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
/** The server side of the one connection a test opens, with its raw socket. */
let accepted: Promise<{ ws: WebSocket; socket: Socket }>;

beforeAll(async () => {
  server.on('upgrade', (request, socket, head) => {
    accepted = new Promise((resolve) =>
      wss.handleUpgrade(request, socket, head, (ws) => resolve({ ws, socket: socket as Socket })),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  wss.close();
  await new Promise((resolve) => server.close(resolve));
});

/** Opens a client; resolves with it, the server's side, and the text messages it received. */
async function connectPair() {
  const { port } = server.address() as AddressInfo;
  const client = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
  const received: string[] = [];
  client.on('message', (data, isBinary) => {
    received.push(isBinary ? `binary:${String(data)}` : String(data));
  });
  await new Promise((resolve, reject) => {
    client.once('open', resolve);
    client.once('error', reject);
  });
  return { client, server: await accepted, received };
}

describe('textFrame', () => {
  // Each length form of RFC 6455: 7 bits (up to 125), 16 bits (126-65535), 64 bits.
  const lengths = [0, 1, 125, 126, 127, 65_535, 65_536, 300_000];

  it.each(lengths)('a payload of %i bytes reaches a ws client whole, as text', async (length) => {
    const { client, server: side, received } = await connectPair();
    const text = 'ü'.repeat(Math.floor(length / 2)) + 'x'.repeat(length % 2);
    expect(Buffer.byteLength(text)).toBe(length);
    side.socket.write(textFrame(payloadOf(text)));
    await eventually(() => (received.length === 1 ? true : undefined), 10_000, 'the message');
    expect(received).toEqual([text]);
    client.close();
  });

  it('interleaves with frames ws writes itself, in the order written', async () => {
    const { client, server: side, received } = await connectPair();
    let pings = 0;
    client.on('ping', () => pings++);
    const expected: string[] = [];
    for (let i = 0; i < 50; i++) {
      const own = `{"n":${i},"pad":"${'p'.repeat(i * 40)}"}`;
      side.socket.write(textFrame(payloadOf(own)));
      side.ws.send(`reply ${i}`);
      side.ws.ping();
      expected.push(own, `reply ${i}`);
    }
    await eventually(
      () => (received.length === expected.length && pings === 50 ? true : undefined),
      10_000,
      'every message and ping',
    );
    expect(received).toEqual(expected);
    client.close();
  });
});
