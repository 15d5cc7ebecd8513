/** A raw worker connection over node:net: writes bytes, collects the daemon's replies. */
import { connect, type Socket } from 'node:net';
import { type Envelope, encodeFrame, FrameDecoder } from '../../src/protocol/wire.js';
import { eventually } from './daemon.js';

/** A protocol v1 progress frame's data whose seq is its value: acked as `{ seq: value }`. */
export const progressFrame = (progressToken: string, value: number) => ({
  v: 1,
  progressToken,
  progress: value,
  seq: value,
});

export interface RawWorker {
  readonly socket: Socket;
  readonly replies: Envelope[];
  readonly closed: Promise<void>;
  /** Settles when the daemon ended its side (a stopping daemon does so first). */
  readonly ended: Promise<void>;
  isClosed(): boolean;
  send(type: string, data: unknown): void;
  write(bytes: string | Buffer): void;
  /** Waits for a reply matching `match`, and returns it. */
  reply(match: (envelope: Envelope) => boolean, timeoutMs?: number): Promise<Envelope>;
  destroy(): void;
}

/**
 * `keepsOpen`: the worker does not close its end when the daemon ends the connection, as a worker
 * busy elsewhere: a stopping daemon then waits its whole shutdown grace for it.
 */
export async function rawWorker(
  socketPath: string,
  { keepsOpen = false }: { keepsOpen?: boolean } = {},
): Promise<RawWorker> {
  const socket = connect({ path: socketPath, allowHalfOpen: keepsOpen });
  const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
  socket.setEncoding('utf8');
  const decoder = new FrameDecoder(1 << 20);
  const replies: Envelope[] = [];
  let closed = false;
  const closedPromise = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closed = true;
      resolve();
    }),
  );
  socket.on('error', () => {});
  socket.on('data', (text: string) => {
    for (const envelope of decoder.push(text))
      if (!(envelope instanceof Error)) replies.push(envelope);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return {
    socket,
    replies,
    closed: closedPromise,
    ended,
    isClosed: () => closed,
    send: (type, data) => {
      if (!socket.destroyed) socket.write(encodeFrame(type, data));
    },
    write: (bytes) => {
      if (!socket.destroyed) socket.write(bytes);
    },
    reply: (match, timeoutMs = 10_000) =>
      eventually(() => replies.find(match), timeoutMs, 'a reply'),
    destroy: () => socket.destroy(),
  };
}

/**
 * The daemon's figures over a worker connection, which opens no session: the answer to this
 * request, not to an earlier one.
 */
export async function workerStatus<Status>(worker: RawWorker): Promise<Status> {
  const before = worker.replies.length;
  worker.send('status', {});
  const reply = await eventually(
    () => worker.replies.slice(before).find((r) => r.type === 'status'),
    10_000,
    'a status reply',
  );
  return reply.data as Status;
}

/** A raw worker that has published a first value (0 of 100, "starting") on `token`. */
export async function publishingWorker(socketPath: string, token: string): Promise<RawWorker> {
  const worker = await rawWorker(socketPath);
  worker.send('progress', {
    v: 1,
    progressToken: token,
    progress: 0,
    total: 100,
    message: 'starting',
  });
  return worker;
}

/**
 * Publishes steady values on `token` (step N: N*10 of 100, "step N"), each once the one before
 * was `seen`: the daemon then knows a rate and an ETA.
 */
export async function publishSteadily(
  worker: RawWorker,
  token: string,
  steps: number,
  seen: (step: number) => Promise<unknown>,
): Promise<void> {
  for (let step = 1; step <= steps; step++) {
    worker.send('progress', {
      v: 1,
      progressToken: token,
      progress: step * 10,
      total: 100,
      message: `step ${step}`,
    });
    await seen(step);
  }
}

/** The structuredContent a watch_progress result has for a steady job of `steps` done ok, "rendered". */
export function steadyJobResult(token: string, steps: number) {
  return {
    progressToken: token,
    state: 'done',
    status: 'ok',
    message: 'rendered',
    timedOut: false,
    progress: steps * 10,
    total: 100,
  };
}
