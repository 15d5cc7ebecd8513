/**
 * A TCP relay between a daemon and one peer: NATS, which the daemon connects to, or a gateway
 * session, which connects to the daemon. Cutting it is that path lost while others keep theirs;
 * holding it is the peer's messages waiting unread (see stand-still.ts).
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { freePort } from '../../bench/lib/proc.ts';

export interface CuttableLink {
  /** The relay's URL for a daemon to join NATS through (nats://127.0.0.1:port). */
  readonly url: string;
  readonly port: number;
  /** Closes every connection through it and refuses new ones. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  mend(): Promise<void>;
  close(): Promise<void>;
  /**
   * Holds back what the peer sends the daemon (NATS's PONGs, a session's pong), in order, until
   * release(): a peer slow to answer, or a daemon that has not yet read what it was sent.
   */
  hold(): void;
  release(): void;
  /** Chunks the daemon sent and connections it closed so far: whether it did anything since. */
  fromDaemon(): number;
}

export interface CuttableLinkOptions {
  /** Which end the daemon is: the one that connects to the relay (to NATS: the default), or `targetPort`. */
  readonly daemonIs?: 'connecting' | 'target';
  /** Sees each chunk the daemon sends, as the relay read it. */
  readonly seeDaemon?: (chunk: Buffer) => void;
}

export async function cuttableLink(
  targetPort: number,
  { daemonIs = 'connecting', seeDaemon }: CuttableLinkOptions = {},
): Promise<CuttableLink> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  /** Each connection's two sockets, for hold() and release(). */
  const pairs = new Set<{ daemon: Socket; peer: Socket }>();
  let held = false;
  let fromDaemon = 0;
  let server: Server | undefined;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = tcpConnect(targetPort, '127.0.0.1');
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.on('error', () => {});
        }
        const [daemon, peer] = daemonIs === 'connecting' ? [client, upstream] : [upstream, client];
        const pair = { daemon, peer };
        pairs.add(pair);
        daemon.on('data', (chunk: Buffer) => {
          fromDaemon++;
          seeDaemon?.(chunk);
        });
        daemon.pipe(peer);
        if (held) peer.pause();
        else peer.pipe(daemon);
        daemon.on('close', () => {
          fromDaemon++;
          pairs.delete(pair);
          peer.destroy();
        });
        peer.on('close', () => daemon.destroy());
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  const cut = async () => {
    const closing = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => (closing ? closing.close(() => resolve()) : resolve()));
  };
  const hold = () => {
    held = true;
    for (const { daemon, peer } of pairs) {
      peer.unpipe(daemon);
      peer.pause();
    }
  };
  const release = () => {
    if (!held) return;
    held = false;
    for (const { daemon, peer } of pairs) peer.pipe(daemon);
  };
  await listen();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    cut,
    mend: listen,
    close: cut,
    hold,
    release,
    fromDaemon: () => fromDaemon,
  };
}
