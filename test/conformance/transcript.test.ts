/**
 * The byte transcripts in docs/PROTOCOL.md (a worker connection and a gateway session)
 * are what a real daemon sends and receives: this test replays them over a raw Unix
 * socket and a raw TCP socket (the WebSocket framing written by hand, as a client in
 * another language would) and compares. UPDATE_PROTOCOL_TRANSCRIPTS=1 rewrites them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually, ROOT } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';

const DOC = join(ROOT, 'docs/PROTOCOL.md');
/** RFC 6455's sample key, so that the 101's Sec-WebSocket-Accept is the RFC's too. */
const WS_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

const daemon = daemonForFile();

/** One direction's bytes, as a line of the transcript. */
interface Line {
  from: 'C' | 'S';
  text: string;
}

/** Text with the bytes a reader cannot see written out: form feed, CR LF. */
const visible = (text: string) => text.replaceAll('\f', '\\f').replaceAll('\r\n', '\\r\\n\n');

const hex = (bytes: Uint8Array) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join(' ');

/** A WebSocket frame from the client: FIN, the opcode, masked with the key 00 00 00 00 (payload unchanged). */
function clientFrame(opcode: number, payload: Buffer): { bytes: Buffer; header: Buffer } {
  const length = payload.length;
  const header =
    length < 126
      ? Buffer.from([0x80 | opcode, 0x80 | length, 0, 0, 0, 0])
      : Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff, 0, 0, 0, 0]);
  return { bytes: Buffer.concat([header, payload]), header };
}

/** Splits server bytes into WebSocket frames (servers never mask). */
function serverFrames(bytes: Buffer): Array<{ header: Buffer; payload: Buffer }> {
  const frames: Array<{ header: Buffer; payload: Buffer }> = [];
  let at = 0;
  while (at + 2 <= bytes.length) {
    let length = (bytes[at + 1] as number) & 0x7f;
    let headerLength = 2;
    if (length === 126) {
      length = bytes.readUInt16BE(at + 2);
      headerLength = 4;
    }
    if (at + headerLength + length > bytes.length) break;
    frames.push({
      header: bytes.subarray(at, at + headerLength),
      payload: bytes.subarray(at + headerLength, at + headerLength + length),
    });
    at += headerLength + length;
  }
  return frames;
}

async function open(options: { path: string } | { host: string; port: number }): Promise<Socket> {
  const socket = connect(options as never);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return socket;
}

async function transcripts(): Promise<{ worker: string; gateway: string }> {
  const url = new URL(daemon.info.url);
  const worker = await open({ path: daemon.info.socket });
  let workerIn = '';
  worker.setEncoding('utf8').on('data', (text: string) => {
    workerIn += text;
  });
  const workerLines: Line[] = [];
  let workerSeen = 0;
  /** Sends frames and waits for `replies` more reply frames. */
  const fromWorker = async (frames: string[], replies: number) => {
    for (const frame of frames) {
      workerLines.push({ from: 'C', text: frame });
      worker.write(frame);
    }
    const want = workerSeen + replies;
    const got = await eventually(
      () => {
        const all = workerIn.split('\f').slice(0, -1);
        return all.length >= want ? all : undefined;
      },
      15_000,
      `${want} worker replies`,
    );
    for (const frame of got.slice(workerSeen, want))
      workerLines.push({ from: 'S', text: `${frame}\f` });
    workerSeen = want;
  };

  const gateway = await open({ host: url.hostname, port: Number(url.port) });
  let gatewayIn = Buffer.alloc(0);
  gateway.on('data', (chunk: Buffer) => {
    gatewayIn = Buffer.concat([gatewayIn, chunk]);
  });
  const gatewayLines: Line[] = [];
  let handshake = '';
  let framesSeen = 0;
  const frames = () => serverFrames(gatewayIn.subarray(Buffer.byteLength(handshake)));
  const awaitFrames = async (count: number) => {
    const want = framesSeen + count;
    const got = await eventually(
      () => (frames().length >= want ? frames() : undefined),
      15_000,
      `${want} WebSocket frames`,
    );
    for (const frame of got.slice(framesSeen, want))
      gatewayLines.push({ from: 'S', text: `[${hex(frame.header)}] ${renderPayload(frame)}` });
    framesSeen = want;
  };
  const renderPayload = (frame: { header: Buffer; payload: Buffer }) =>
    ((frame.header[0] as number) & 0x0f) === 0x8
      ? `close ${frame.payload.readUInt16BE(0)}${frame.payload.subarray(2).toString('utf8')}`
      : frame.payload.toString('utf8');
  const fromGateway = async (text: string, replies: number) => {
    const { bytes, header } = clientFrame(0x1, Buffer.from(text));
    gatewayLines.push({ from: 'C', text: `[${hex(header)}] ${text}` });
    gateway.write(bytes);
    await awaitFrames(replies);
  };

  // A worker is already publishing when the gateway connects.
  await fromWorker(
    [
      '{"type":"claim","data":{"v":1,"progressToken":"render-1","seq":1}}\f',
      '{"type":"progress","data":{"v":1,"progressToken":"render-1","progress":1,"total":4,"message":"frame 1","seq":2}}\f',
    ],
    2,
  );
  const request = [
    'GET /ws HTTP/1.1',
    `Host: ${url.host}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${WS_KEY}`,
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Protocol: mcp-progress.v1',
    `Authorization: Bearer ${daemon.info.secret}`,
    '',
    '',
  ].join('\r\n');
  gatewayLines.push({ from: 'C', text: request });
  gateway.write(request);
  handshake = await eventually(
    () => {
      const text = gatewayIn.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      return end === -1 ? undefined : text.slice(0, end + 4);
    },
    15_000,
    'the 101',
  );
  gatewayLines.push({ from: 'S', text: handshake });
  // Late join: the current value first, then the result.
  await fromGateway(
    '{"jsonrpc":"2.0","id":1,"method":"progress/subscribe","params":{"progressToken":"render-1","minIntervalMs":0}}',
    2,
  );
  await fromWorker(
    [
      '{"type":"progress","data":{"v":1,"progressToken":"render-1","seq":3}}\f',
      '{"type":"progress","data":{"v":1,"progressToken":"render-1","total":-4,"seq":4}}\f',
    ],
    2,
  );
  await awaitFrames(1);
  await fromGateway(
    '{"jsonrpc":"2.0","id":2,"method":"progress/cancel","params":{"progressToken":"render-1","reason":"user pressed stop"}}',
    1,
  );
  await fromWorker([], 1);
  await fromWorker(
    ['{"type":"done","data":{"v":1,"progressToken":"render-1","status":"cancelled","seq":5}}\f'],
    1,
  );
  await awaitFrames(1);
  await fromGateway(
    '{"jsonrpc":"2.0","id":3,"method":"progress/subscribe","params":{"progressToken":""}}',
    1,
  );
  const { bytes, header } = clientFrame(0x8, Buffer.from([0x03, 0xe8]));
  gatewayLines.push({ from: 'C', text: `[${hex(header)}] close 1000` });
  gateway.write(bytes);
  await awaitFrames(1);
  worker.destroy();
  gateway.destroy();

  const render = (lines: Line[], names: [string, string]) =>
    lines
      .map(({ from, text }) => `${from === 'C' ? names[0] : names[1]} ${visible(text)}`.trimEnd())
      .join('\n')
      .replaceAll(daemon.info.secret, '<secret>')
      .replaceAll(url.host, '127.0.0.1:7717');
  return {
    worker: render(workerLines, ['W>', 'D>']),
    gateway: render(gatewayLines, ['G>', 'D>']),
  };
}

function block(doc: string, name: string): { start: number; end: number } {
  const open = `<!-- transcript:${name} -->\n\`\`\`\n`;
  const close = '```\n<!-- /transcript -->';
  const start = doc.indexOf(open);
  const end = doc.indexOf(close, start);
  if (start === -1 || end === -1)
    throw new Error(`docs/PROTOCOL.md has no transcript:${name} block`);
  return { start: start + open.length, end };
}

describe('docs/PROTOCOL.md transcripts', () => {
  it('are the bytes a real daemon exchanges', async () => {
    const got = await transcripts();
    let doc = readFileSync(DOC, 'utf8');
    if (process.env.UPDATE_PROTOCOL_TRANSCRIPTS) {
      for (const name of ['worker', 'gateway'] as const) {
        const { start, end } = block(doc, name);
        doc = `${doc.slice(0, start)}${got[name]}\n${doc.slice(end)}`;
      }
      writeFileSync(DOC, doc);
    }
    for (const name of ['worker', 'gateway'] as const) {
      const { start, end } = block(doc, name);
      expect(doc.slice(start, end)).toBe(`${got[name]}\n`);
    }
  });
});
