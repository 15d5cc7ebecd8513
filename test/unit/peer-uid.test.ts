/**
 * PeerUids against real loopback connections: the kernel's table names this process's user at
 * the other end, on an IPv4 listener and on a dual-stack one that sees IPv4 clients as ::ffff:.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PeerUids } from '../../src/daemon/peer-uid.js';

const servers: Server[] = [];
const clients: Socket[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.destroy();
  for (const server of servers.splice(0)) server.close();
});

/** Listens on `host`, connects `count` clients to `connectTo`; resolves with the server's sockets. */
async function accepted(host: string, connectTo: string, count: number): Promise<Socket[]> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as { port: number };
  const sockets: Socket[] = [];
  const all = new Promise<void>((resolve) =>
    server.on('connection', (socket) => {
      sockets.push(socket);
      if (sockets.length === count) resolve();
    }),
  );
  for (let i = 0; i < count; i++) clients.push(createConnection(port, connectTo));
  await all;
  return sockets;
}

describe('PeerUids', () => {
  const own = process.getuid?.();

  it('names this user at the other end of a loopback IPv4 connection', async () => {
    const [socket] = await accepted('127.0.0.1', '127.0.0.1', 1);
    if (socket === undefined) throw new Error('no connection');
    expect(socket.remoteAddress).toBe('127.0.0.1');
    expect((await new PeerUids().lookup([socket])).get(socket)).toBe(own);
  });

  it('names it on a dual-stack listener too, where an IPv4 client is ::ffff:127.0.0.1', async () => {
    const [socket] = await accepted('::', '127.0.0.1', 1);
    if (socket === undefined) throw new Error('no connection');
    expect(socket.remoteAddress).toBe('::ffff:127.0.0.1');
    expect((await new PeerUids().lookup([socket])).get(socket)).toBe(own);
  });

  it('uidOf answers sockets asked for together from one read, and each socket once', async () => {
    const sockets = await accepted('127.0.0.1', '127.0.0.1', 3);
    const peers = new PeerUids();
    const reads: number[] = [];
    const lookup = peers.lookup.bind(peers);
    peers.lookup = (asked) => {
      reads.push(asked.length);
      return lookup(asked);
    };
    const first = sockets.map((socket) => peers.uidOf(socket));
    expect(await Promise.all(first)).toEqual([own, own, own]);
    const readyAt = peers.readyAt;
    // Asked again: the same answer, and no new read of the table.
    expect(peers.uidOf(sockets[0] as Socket)).toBe(first[0]);
    expect(await peers.uidOf(sockets[1] as Socket)).toBe(own);
    expect(peers.readyAt).toBe(readyAt);
    expect(reads).toEqual([3]);
  });
});
