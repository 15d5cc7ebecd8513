/**
 * A minimal WebSocket client for the subscriber side of the benchmark. The
 * `ws` client costs more per message than the servers under test, which made
 * it the bottleneck of every end-to-end run; this one does the HTTP upgrade,
 * then only walks frame headers, so that the server is what gets measured.
 * Server frames arrive unmasked and unfragmented (ws sends small messages
 * whole); anything else is reported.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type { Socket } from 'node:net';

export interface LeanWebSocket {
  send(text: string): void;
  close(): void;
}

export interface LeanHandlers {
  message(payload: Buffer): void;
  closed(reason: string): void;
}

const OP_TEXT = 0x1;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;

export function openLeanWebSocket(
  url: string,
  headers: Record<string, string>,
  handlers: LeanHandlers,
): Promise<LeanWebSocket> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = request({
      host: target.hostname,
      port: target.port,
      path: `${target.pathname}${target.search}`,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.once('error', reject);
    req.once('response', (response) => reject(new Error(`HTTP ${response.statusCode}`)));
    req.once('upgrade', (_response, socket: Socket, head: Buffer) => {
      socket.setNoDelay(true);
      const client = attach(socket, handlers);
      if (head.length > 0) client.feed(head);
      resolve(client);
    });
    req.end();
  });
}

function attach(
  socket: Socket,
  handlers: LeanHandlers,
): LeanWebSocket & { feed(chunk: Buffer): void } {
  let pending: Buffer | undefined;
  let closed = false;
  const close = (reason: string) => {
    if (closed) return;
    closed = true;
    socket.destroy();
    handlers.closed(reason);
  };
  const feed = (chunk: Buffer) => {
    const data = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
    pending = undefined;
    let at = 0;
    while (data.length - at >= 2) {
      const first = data[at] ?? 0;
      const second = data[at + 1] ?? 0;
      let length = second & 0x7f;
      let header = 2;
      if (length === 126) {
        if (data.length - at < 4) break;
        length = data.readUInt16BE(at + 2);
        header = 4;
      } else if (length === 127) {
        if (data.length - at < 10) break;
        length = Number(data.readBigUInt64BE(at + 2));
        header = 10;
      }
      if (data.length - at < header + length) break;
      const payload = data.subarray(at + header, at + header + length);
      at += header + length;
      const opcode = first & 0x0f;
      if ((first & 0x80) === 0 || (second & 0x80) !== 0) {
        close('a fragmented or masked frame from the server');
        return;
      }
      if (opcode === OP_TEXT) handlers.message(payload);
      else if (opcode === OP_CLOSE) {
        close(
          `closed by the server: ${payload.length >= 2 ? payload.readUInt16BE(0) : ''} ${payload.subarray(2).toString()}`,
        );
        return;
      } else if (opcode === OP_PING) socket.write(frame(0xa, payload));
    }
    if (at < data.length) pending = data.subarray(at);
  };
  socket.on('data', feed);
  socket.on('close', () => close('the connection closed'));
  socket.on('error', (error) => close(error.message));
  return {
    feed,
    send: (text) => socket.write(frame(OP_TEXT, Buffer.from(text))),
    close: () => {
      closed = true;
      socket.destroy();
    },
  };
}

/** A client frame: final, masked as the protocol requires. */
function frame(opcode: number, payload: Buffer): Buffer {
  const extra = payload.length < 126 ? 0 : payload.length < 65_536 ? 2 : 8;
  const out = Buffer.allocUnsafe(2 + extra + 4 + payload.length);
  out[0] = 0x80 | opcode;
  if (extra === 0) out[1] = 0x80 | payload.length;
  else if (extra === 2) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(payload.length, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  const mask = randomBytes(4);
  mask.copy(out, 2 + extra);
  const start = 2 + extra + 4;
  for (let i = 0; i < payload.length; i++) {
    out[start + i] = (payload[i] ?? 0) ^ (mask[i & 3] ?? 0);
  }
  return out;
}
