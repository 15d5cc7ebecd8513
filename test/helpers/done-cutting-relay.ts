/**
 * A relay in front of a real daemon's worker socket that loses a worker's connection at one exact
 * moment: once the daemon has answered the worker's done, before the worker reads that answer. So
 * the done reached the daemon and ended the stream, and the worker, which saw only the loss, sends
 * it again on a new connection. Or, with `cutAtDone: false`, when the test says (`cutAll`), the
 * daemon running on: its streams are still there when the worker comes back. Everything else
 * passes unchanged, both ways, and is recorded (`frames`).
 */
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { tempDir } from './daemon.js';

export interface DoneCuttingRelay {
  /** The socket to give the worker (MCP_PROGRESS_SOCKET). */
  readonly path: string;
  /** The connections workers made to the relay. */
  readonly connections: number;
  /** Whether a connection was cut at its done's answer (only the first is). */
  readonly cut: boolean;
  /** Each frame that passed, in order: its connection (1 for the first), its sender, and it parsed. */
  readonly frames: readonly RelayedFrame[];
  /** Cuts every connection now, both sides, as a daemon that died would; the daemon runs on. */
  cutAll(): void;
  close(): Promise<void>;
}

export interface RelayedFrame {
  readonly connection: number;
  readonly from: 'worker' | 'daemon';
  readonly envelope: Envelope | undefined;
}

interface Envelope {
  type?: unknown;
  data?: { seq?: unknown; [field: string]: unknown };
}

const FORM_FEED = 0x0c;

/** Each call takes the next bytes of a stream of frames and gives the frames they completed. */
function frameSplitter(): (chunk: Buffer) => Buffer[] {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    const frames: Buffer[] = [];
    for (let end = pending.indexOf(FORM_FEED); end !== -1; end = pending.indexOf(FORM_FEED)) {
      frames.push(pending.subarray(0, end));
      pending = pending.subarray(end + 1);
    }
    return frames;
  };
}

function parsed(frame: Buffer): Envelope | undefined {
  try {
    return JSON.parse(frame.toString('utf8')) as Envelope;
  } catch {
    return undefined; // not the relay's to judge: the daemon answers it
  }
}

export async function startDoneCuttingRelay(
  daemonSocket: string,
  { cutAtDone = true }: { cutAtDone?: boolean } = {},
): Promise<DoneCuttingRelay> {
  const path = join(tempDir(), 'relay.sock');
  const sockets = new Set<Socket>();
  const frames: RelayedFrame[] = [];
  let connections = 0;
  let cut = false;
  const server = createServer((worker) => {
    const connection = ++connections;
    // node:net holds what is written before the connect completes: no byte is lost or reordered.
    const daemon = connect({ path: daemonSocket });
    sockets.add(worker).add(daemon);
    const fromWorker = frameSplitter();
    const fromDaemon = frameSplitter();
    let doneSeq: unknown;
    worker.on('data', (chunk: Buffer) => {
      for (const frame of fromWorker(chunk)) {
        const envelope = parsed(frame);
        frames.push({ connection, from: 'worker', envelope });
        if (envelope?.type === 'done') doneSeq = envelope.data?.seq;
      }
      daemon.write(chunk);
    });
    daemon.on('data', (chunk: Buffer) => {
      for (const frame of fromDaemon(chunk)) {
        const envelope = parsed(frame);
        if (cutAtDone && !cut && doneSeq !== undefined && envelope?.data?.seq === doneSeq) {
          cut = true;
          worker.destroy();
          daemon.destroy();
          return;
        }
        frames.push({ connection, from: 'daemon', envelope });
        worker.write(Buffer.concat([frame, Buffer.from([FORM_FEED])]));
      }
    });
    for (const [side, other] of [
      [worker, daemon],
      [daemon, worker],
    ] as const) {
      side.on('error', () => other.destroy());
      side.on('close', () => {
        sockets.delete(side);
        other.end();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    path,
    get connections() {
      return connections;
    },
    get cut() {
      return cut;
    },
    frames,
    cutAll: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
