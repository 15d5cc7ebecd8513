/**
 * The contract between the worker socket (src/daemon/worker-socket.ts) and the
 * pinned node-ipc 14.0.0: every behaviour the adapter relies on that node-ipc's
 * README does not document, each named and checked here against the real
 * package over a real Unix socket. If an upgrade breaks one, this fails first.
 *
 * Documented, and so not pinned here: `config.rawBuffer` selects the raw
 * profile (no framing, no JSON, no validation); `data` events carry the bytes;
 * `ipc.server.emit(socket, value)` writes a raw value.
 */
import { existsSync, readdirSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { IPCModule, type IpcSocketServer } from 'node-ipc';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, tempDir } from '../helpers/daemon.js';

const NODE_IPC = JSON.parse(
  await import('node:fs').then((fs) =>
    fs.readFileSync(new URL('../../node_modules/node-ipc/package.json', import.meta.url), 'utf8'),
  ),
) as { version: string };

interface Rig {
  readonly ipcServer: IpcSocketServer;
  readonly server: Server;
  readonly path: string;
  readonly accepted: Socket[];
  readonly events: Array<{ type: string; args: unknown[] }>;
}

const rigs: Rig[] = [];

/** The adapter's arrangement: our own net.Server, node-ipc's raw server wiring each socket. */
async function rig(configure: (socket: Socket) => void = () => {}): Promise<Rig> {
  const dir = tempDir('node-ipc-contract-');
  const path = join(dir, 's');
  const ipc = new IPCModule();
  ipc.config.silent = true;
  ipc.config.rawBuffer = true;
  ipc.serve(path);
  const ipcServer = ipc.server;
  if (ipcServer === false) throw new Error('no server');
  const events: Rig['events'] = [];
  for (const type of ['data', 'error', 'close', 'socket.disconnected', 'connect', 'start']) {
    ipcServer.on(type, ((...args: unknown[]) => events.push({ type, args })) as (
      ...args: never[]
    ) => void);
  }
  const accepted: Socket[] = [];
  const server = createServer((socket) => {
    ipcServer.addSocket(socket);
    configure(socket);
    accepted.push(socket);
  });
  await new Promise<void>((resolve) => server.listen({ path }, resolve));
  const made = { ipcServer, server, path, accepted, events };
  rigs.push(made);
  return made;
}

function client(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path }, () => resolve(socket));
    socket.on('error', reject);
  });
}

afterEach(async () => {
  for (const { server, accepted } of rigs.splice(0)) {
    for (const socket of accepted) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  cleanupAll();
});

describe('node-ipc contract (the worker socket relies on these)', () => {
  it('is the pinned version', () => {
    expect(NODE_IPC.version).toBe('14.0.0');
  });

  it('serve() neither binds nor creates a socket root before start(), which the adapter never calls', async () => {
    const dir = tempDir('node-ipc-contract-');
    const ipc = new IPCModule();
    ipc.config.silent = true;
    ipc.config.rawBuffer = true;
    ipc.serve(join(dir, 'sub', 's'));
    expect(ipc.server).not.toBe(false);
    expect(readdirSync(dir)).toEqual([]);
    expect(existsSync(join(dir, 'sub'))).toBe(false);
  });

  it('addSocket (undocumented) wires an accepted socket: each read is published as data (chunk, socket), unchanged, as it is read', async () => {
    const { path, events, accepted } = await rig();
    const worker = await client(path);
    // One connect event, carrying the socket.
    const connected = await eventually(() => events.find((e) => e.type === 'connect'));
    await eventually(() => (accepted.length === 1 ? true : undefined));
    expect(connected.args[0]).toBe(accepted[0]);
    const text = '{"type":"ping","data":{}}\f{"type":"progress","data":{"é":"ü"}}\f\npartial';
    worker.write(text);
    const got = await eventually(() => {
      const chunks = events.filter((e) => e.type === 'data');
      const joined = chunks.map((e) => Buffer.from(e.args[0] as Buffer).toString('utf8')).join('');
      return joined.length === text.length ? chunks : undefined;
    });
    // The second argument is the socket it came from (the README names only the buffer).
    for (const event of got) expect(event.args[1]).toBe(accepted[0]);
    // Raw: no decoding of its own (the adapter hands the bytes to FrameDecoder), no framing, nothing dropped.
    expect(Buffer.isBuffer(got[0]?.args[0])).toBe(true);
    worker.destroy();
  });

  it("publishes data inside the socket's own data event, so pausing the socket in the handler stops further reads (the read budget)", async () => {
    let paused = 0;
    const { path, events, accepted, ipcServer } = await rig();
    ipcServer.on('data', ((_chunk: Buffer, socket: Socket) => {
      if (!socket.isPaused()) {
        socket.pause();
        paused++;
      }
    }) as (...args: never[]) => void);
    const worker = await client(path);
    worker.write('a'.repeat(1024));
    await eventually(() => (paused === 1 ? true : undefined));
    const before = events.filter((e) => e.type === 'data').length;
    // More bytes while paused are held by the socket, not published...
    worker.write('b'.repeat(1024));
    await new Promise<void>((resolve) => worker.write('', () => resolve()));
    await new Promise((resolve) => setImmediate(resolve));
    expect(events.filter((e) => e.type === 'data').length).toBe(before);
    // ...until it is resumed: then they are, in order, nothing lost.
    accepted[0]?.resume();
    const all = await eventually(() => {
      const text = events
        .filter((e) => e.type === 'data')
        .map((e) => e.args[0] as string)
        .join('');
      return text.length === 2048 ? text : undefined;
    });
    expect(all).toBe('a'.repeat(1024) + 'b'.repeat(1024));
    worker.destroy();
  });

  it('raw emit(socket, string) writes its UTF-8 bytes as they are, without a delimiter', async () => {
    const { path, accepted, ipcServer } = await rig();
    const worker = await client(path);
    let received = Buffer.alloc(0);
    worker.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
    });
    await eventually(() => (accepted.length === 1 ? true : undefined));
    const socket = accepted[0];
    if (!socket) throw new Error('no socket');
    ipcServer.emit(socket, '{"type":"pong","data":{"é":1}}\f');
    const text = '{"type":"pong","data":{"é":1}}\f';
    await eventually(() => (received.length === Buffer.byteLength(text) ? true : undefined));
    expect(received.toString('utf8')).toBe(text);
    worker.destroy();
  });

  it('listens for socket errors itself and publishes them as error (error only); a peer reset does not throw', async () => {
    const { path, events, accepted } = await rig();
    const worker = await client(path);
    await eventually(() => (accepted.length === 1 ? true : undefined));
    const socket = accepted[0];
    if (!socket) throw new Error('no socket');
    expect(socket.listenerCount('error')).toBeGreaterThan(0);
    socket.emit('error', new Error('boom'));
    const error = await eventually(() => events.find((e) => e.type === 'error'));
    expect((error.args[0] as Error).message).toBe('boom');
    expect(error.args[1]).toBeUndefined();
    worker.destroy();
  });

  it('publishes close and socket.disconnected once the peer has gone, and forgets the socket', async () => {
    const { path, events, accepted, ipcServer } = await rig();
    const worker = await client(path);
    await eventually(() => (accepted.length === 1 ? true : undefined));
    worker.end();
    const closed = await eventually(() => events.find((e) => e.type === 'close'));
    expect(closed.args[0]).toBe(accepted[0]);
    await eventually(() => events.find((e) => e.type === 'socket.disconnected'));
    // node-ipc keeps a list of its sockets; a closed one leaves it, so memory follows open connections.
    const sockets = (ipcServer as unknown as { sockets: Socket[] }).sockets;
    expect(sockets).toEqual([]);
  });

  it('sets no timer of its own on raw sockets: a half frame is not closed by node-ipc', async () => {
    const { path, accepted } = await rig();
    const worker = await client(path);
    worker.write('{"type":"progress"');
    await eventually(() => (accepted.length === 1 ? true : undefined));
    const socket = accepted[0] as Socket & { ipcMessageTimer?: unknown };
    await new Promise<void>((resolve) => worker.write('', () => resolve()));
    await new Promise((resolve) => setImmediate(resolve));
    expect(socket.ipcMessageTimer).toBeUndefined();
    expect(socket.destroyed).toBe(false);
    worker.destroy();
  });
});
