/**
 * A load generator playing workers: one connection per token, each writing
 * frames in batched chunks as fast as the socket accepts them (flood), at
 * most a window ahead of delivery (window), or at a fixed rate with each
 * frame stamped on the host clock (paced). Speaks the bridge's framing on a
 * Unix socket, or NATS's PUB on TCP, with the same frame bytes.
 */
import { connect, type Socket } from 'node:net';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import {
  ChunkMaker,
  encodeFor,
  FIRST_PROGRESS,
  FormFeedSplitter,
  frameJson,
  framesDue,
  nowUs,
  type Wire,
} from '../lib/frames.ts';
import type { PublisherConfig, PublisherDone, WorkerTarget } from '../lib/targets.ts';

interface Connection {
  readonly token: string;
  readonly socket: Socket;
  readonly maker: ChunkMaker;
  /** Frames written so far; the next progress is FIRST_PROGRESS + sent. */
  sent: number;
  waiting: boolean;
}

const errors: string[] = [];
let rejected = 0;
let stopped = false;
let delivered = 0;
let config: PublisherConfig;
let connections: Connection[] = [];

function wireOf(target: WorkerTarget): Wire {
  return target.kind === 'unix' ? 'ipc' : 'nats';
}

function open(target: WorkerTarget, token: string): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket =
      target.kind === 'unix'
        ? connect({ path: target.path })
        : connect({ port: target.port, host: '127.0.0.1' });
    socket.setEncoding('utf8');
    // NATS is reached over TCP: without this, Nagle holds small paced writes back and NATS's
    // latency would be ours to blame. (Unix sockets have no Nagle.)
    if (target.kind !== 'unix') socket.setNoDelay(true);
    socket.once('error', reject);
    const connection: Connection = {
      token,
      socket,
      maker: new ChunkMaker(wireOf(target), token, config.framesPerChunk),
      sent: 0,
      waiting: false,
    };
    const ready = () => {
      socket.off('error', reject);
      socket.on('error', (error) => errors.push(`${token}: ${error.message}`));
      resolve(connection);
    };
    if (target.kind === 'unix') {
      const splitter = new FormFeedSplitter();
      socket.on('data', (text: string) =>
        splitter.push(text, (frame) => {
          if (frame.startsWith('{"type":"rejected"')) {
            rejected++;
            if (errors.length < 5) errors.push(frame.slice(0, 300));
          }
        }),
      );
      socket.once('connect', ready);
    } else {
      // NATS: INFO first; CONNECT, then a PING whose PONG says the server took it.
      let pending = '';
      let connected = false;
      socket.on('data', (text: string) => {
        pending += text;
        let end = pending.indexOf('\r\n');
        while (end !== -1) {
          const line = pending.slice(0, end);
          pending = pending.slice(end + 2);
          if (line.startsWith('INFO') && !connected) {
            connected = true;
            socket.write('CONNECT {"verbose":false,"pedantic":false,"echo":false}\r\nPING\r\n');
          } else if (line === 'PONG' && connected) {
            ready();
          } else if (line === 'PING') {
            socket.write('PONG\r\n');
          } else if (line.startsWith('-ERR')) {
            rejected++;
            if (errors.length < 5) errors.push(line);
          }
          end = pending.indexOf('\r\n');
        }
      });
    }
  });
}

function totalSent(): number {
  let total = 0;
  for (const connection of connections) total += connection.sent;
  return total;
}

/** Writes chunks until the socket pushes back, the window is full, or the run ends. */
function pump(connection: Connection): void {
  connection.waiting = false;
  for (let round = 0; round < 64; round++) {
    if (stopped) return;
    let frames = connection.maker.framesPerChunk;
    if (config.mode === 'window') {
      const room = (config.window ?? 0) - (totalSent() - delivered);
      if (room <= 0) {
        connection.waiting = true;
        return;
      }
      frames = Math.min(frames, room);
    }
    const chunk = connection.maker.chunk(FIRST_PROGRESS + connection.sent, frames);
    connection.sent += frames;
    if (!connection.socket.write(chunk)) {
      connection.socket.once('drain', () => pump(connection));
      return;
    }
  }
  setImmediate(() => pump(connection));
}

/** Fixed offered load: every timer tick, each connection writes what is due, stamped now. */
function pace(startedUs: number): void {
  const rate = config.ratePerSecond ?? 1000;
  const perConnection = rate / connections.length;
  const tick = () => {
    if (stopped) return;
    const elapsedS = (nowUs() - startedUs) / 1e6;
    const wire = wireOf(config.target);
    for (const [index, connection] of connections.entries()) {
      const due =
        framesDue(perConnection, elapsedS, index, connections.length, config.phases) -
        connection.sent;
      if (due <= 0) continue;
      const stamp = nowUs();
      let text = '';
      for (let i = 0; i < due; i++) {
        const progress = FIRST_PROGRESS + connection.sent++;
        text += encodeFor(wire, connection.token, frameJson(connection.token, progress, stamp));
      }
      connection.socket.write(text);
    }
    setTimeout(tick, 1);
  };
  tick();
}

/** Resolves when everything written has left this process. */
function flushed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.destroyed || socket.writableLength === 0) resolve();
    else socket.write('', () => resolve());
  });
}

async function run(): Promise<void> {
  const startedUs = nowUs();
  // The harness says when to stop; the duration is a fallback.
  setTimeout(() => {
    stopped = true;
  }, config.durationMs);
  if (config.mode === 'paced') pace(startedUs);
  else for (const connection of connections) pump(connection);
  while (!stopped) await new Promise((resolve) => setTimeout(resolve, 20));
  await Promise.all(connections.map((connection) => flushed(connection.socket)));
  // Give late `rejected` replies a moment to arrive.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const lastProgress: Record<string, number> = {};
  for (const connection of connections) {
    if (connection.sent > 0) lastProgress[connection.token] = FIRST_PROGRESS + connection.sent - 1;
  }
  const done: PublisherDone = { type: 'done', sent: totalSent(), lastProgress, rejected, errors };
  toParent({ ...done });
}

onParentMessage((message: Message) => {
  switch (message.type) {
    case 'config':
      config = message.config as PublisherConfig;
      Promise.all(config.tokens.map((token) => open(config.target, token))).then(
        (opened) => {
          connections = opened;
          toParent({ type: 'ready' });
        },
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      return;
    case 'go':
      void run();
      return;
    case 'stop':
      stopped = true;
      return;
    case 'credit':
      delivered = message.delivered as number;
      for (const connection of connections) if (connection.waiting) pump(connection);
      return;
  }
});
