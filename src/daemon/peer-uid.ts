/**
 * Which local user holds the other end of a loopback TCP connection. Linux lists every TCP
 * socket in /proc/net/tcp (IPv4) and /proc/net/tcp6 with the uid that owns it: the peer's row is
 * the one whose local address is our remote address and whose remote address is our local one.
 * Elsewhere (no /proc) the uid is unknown.
 */
import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { endianness } from 'node:os';

/**
 * Reading the table costs about 4 us per socket on the machine (any user can add sockets): after a
 * read that took T, the next waits max(this, 4 T), so look-ups take at most a fifth of the time.
 */
const MIN_READ_INTERVAL_MS = 50;

/** Looks peers up in one read of the table per batch of connections, read off the event loop. */
export class PeerUids {
  #readyAt = 0;
  /** Each socket's uid once asked for by uidOf (a socket keeps its peer for its life). */
  readonly #known = new WeakMap<Socket, Promise<number | undefined>>();
  /** Sockets asked for by uidOf since the last read began. */
  #asked: Array<{ socket: Socket; answer: (uid: number | undefined) => void }> = [];
  #reading = false;

  /** When the next read may start (performance.now()). */
  get readyAt(): number {
    return this.#readyAt;
  }

  /**
   * The uid at the other end of one socket (undefined where the table cannot tell). Sockets asked
   * for while a read waits or runs share the next read, which starts no sooner than readyAt.
   */
  uidOf(socket: Socket): Promise<number | undefined> {
    let uid = this.#known.get(socket);
    if (uid === undefined) {
      uid = new Promise((answer) => this.#asked.push({ socket, answer }));
      this.#known.set(socket, uid);
      this.#readSoon();
    }
    return uid;
  }

  #readSoon(): void {
    if (this.#reading || this.#asked.length === 0) return;
    this.#reading = true;
    setTimeout(
      () => {
        const asked = this.#asked;
        this.#asked = [];
        const answer = (uids: ReadonlyMap<Socket, number | undefined>) => {
          for (const { socket, answer } of asked) answer(uids.get(socket));
          this.#reading = false;
          this.#readSoon();
        };
        this.lookup(asked.map((a) => a.socket)).then(answer, () => answer(new Map()));
      },
      Math.max(0, this.#readyAt - performance.now()),
    ).unref();
  }

  /** The uid at the other end of each socket; undefined where the table cannot tell. */
  async lookup(sockets: readonly Socket[]): Promise<Map<Socket, number | undefined>> {
    const started = performance.now();
    const wanted = new Map<string, Socket[]>();
    const tables = new Set<string>();
    const want = (key: string, socket: Socket, table: string) => {
      wanted.set(key, [...(wanted.get(key) ?? []), socket]);
      tables.add(table);
    };
    for (const socket of sockets) {
      const peer = tableAddress(socket.remoteAddress, socket.remotePort);
      const ours = tableAddress(socket.localAddress, socket.localPort);
      if (peer === undefined || ours === undefined) continue;
      want(
        `${peer} ${ours}`,
        socket,
        socket.localFamily === 'IPv4' ? '/proc/net/tcp' : '/proc/net/tcp6',
      );
      // A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d; the client's own row,
      // an IPv4 socket's, is in the IPv4 table.
      const peerV4 = tableAddress(unmapped(socket.remoteAddress), socket.remotePort);
      const oursV4 = tableAddress(unmapped(socket.localAddress), socket.localPort);
      if (peerV4 !== undefined && oursV4 !== undefined)
        want(`${peerV4} ${oursV4}`, socket, '/proc/net/tcp');
    }
    const uids = new Map<Socket, number | undefined>();
    for (const table of tables) {
      let text: string;
      try {
        text = await readFile(table, 'latin1');
      } catch {
        continue;
      }
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
      for (const line of text.split('\n')) {
        const fields = line.trim().split(/\s+/, 8);
        const found = wanted.get(`${fields[1]} ${fields[2]}`);
        const uid = Number(fields[7]);
        if (found === undefined || fields.length < 8 || !Number.isInteger(uid)) continue;
        for (const socket of found) uids.set(socket, uid);
      }
    }
    this.#readyAt =
      performance.now() + Math.max(MIN_READ_INTERVAL_MS, 4 * (performance.now() - started));
    return uids;
  }
}

/** The IPv4 address inside an IPv4-mapped IPv6 one (::ffff:a.b.c.d); undefined for any other. */
function unmapped(address: string | undefined): string | undefined {
  const match = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address ?? '');
  return match?.[1];
}

/**
 * An address and port as /proc/net/tcp{,6} prints them: the address's bytes (network order) as
 * 32-bit words in the host's byte order, each as 8 upper-case hex digits, then `:` and the port
 * as 4 hex digits. IPv4 peers of an IPv6 socket appear as ::ffff:a.b.c.d in tcp6.
 */
export function tableAddress(
  address: string | undefined,
  port: number | undefined,
): string | undefined {
  if (address === undefined || port === undefined) return undefined;
  const bytes = isIPv4(address) ? ipv4Bytes(address) : isIPv6(address) ? ipv6Bytes(address) : [];
  if (bytes === undefined || bytes.length === 0) return undefined;
  const buffer = Buffer.from(bytes);
  let words = '';
  for (let at = 0; at < buffer.length; at += 4) {
    const word = endianness() === 'LE' ? buffer.readUInt32LE(at) : buffer.readUInt32BE(at);
    words += word.toString(16).toUpperCase().padStart(8, '0');
  }
  return `${words}:${port.toString(16).toUpperCase().padStart(4, '0')}`;
}

function ipv4Bytes(address: string): number[] | undefined {
  const bytes = address.split('.').map(Number);
  return bytes.length === 4 && bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)
    ? bytes
    : undefined;
}

/** The 16 bytes of an IPv6 address in any of its text forms (`::` and a dotted IPv4 tail included). */
export function ipv6Bytes(address: string): number[] | undefined {
  let text = address.split('%')[0] ?? '';
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    // A dotted IPv4 tail is the last two groups.
    const v4 = ipv4Bytes(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    const [a = 0, b = 0, c = 0, d = 0] = v4;
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string | undefined) => (part ? part.split(':') : []);
  const head = groupsOf(halves[0]);
  const rest = groupsOf(halves[1]);
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const bytes: number[] = [];
  for (const group of [...head, ...Array<string>(missing).fill('0'), ...rest]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return undefined;
    const value = Number.parseInt(group, 16);
    bytes.push(value >> 8, value & 0xff);
  }
  return bytes;
}
