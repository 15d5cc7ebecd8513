/**
 * One request over the worker socket: connect, send a frame, wait for the
 * reply that answers it. Used by `publish`, `status` and the live-daemon probe.
 */
import { connect } from 'node:net';
import { MAX_FRAME_BYTES } from '../protocol/limits.js';
import { type Envelope, encodeFrame, FrameDecoder } from '../protocol/wire.js';
import { BUSY_CONNECT_BACKOFF, backoffDelayMs } from './defaults.js';
import { BridgeError } from './errors.js';

export interface SocketRequest {
  readonly socketPath: string;
  readonly type: string;
  readonly data: unknown;
  /** True for the envelope that answers the request. */
  readonly isReply: (envelope: Envelope) => boolean;
  readonly timeoutMs: number;
}

/** Explains a failed connect in terms of what the user can do. */
export function connectError(socketPath: string, error: NodeJS.ErrnoException): BridgeError {
  switch (error.code) {
    case 'ENOENT':
      return new BridgeError(
        'daemon_not_running',
        `no daemon socket at ${socketPath}: start the daemon with "mcp-progress daemon", or point MCP_PROGRESS_SOCKET at the right socket`,
        { cause: error },
      );
    case 'ECONNREFUSED':
      return new BridgeError(
        'daemon_not_running',
        `nothing answers on ${socketPath} (a stale socket): start the daemon with "mcp-progress daemon"`,
        { cause: error },
      );
    case 'EACCES':
    case 'EPERM':
      return new BridgeError(
        'permission_denied',
        `permission denied on ${socketPath}: the daemon belongs to another user; run your own with "mcp-progress daemon"`,
        { cause: error },
      );
    case 'EAGAIN':
      return new BridgeError(
        'connect_failed',
        `the daemon on ${socketPath} has more connections waiting than its queue holds (a burst of connects): try again, or connect fewer at once`,
        { cause: error },
      );
    default:
      return new BridgeError(
        'connect_failed',
        `could not connect to ${socketPath}: ${error.message}`,
        { cause: error },
      );
  }
}

/**
 * EAGAIN on connect: the daemon's queue of connections not yet accepted is full
 * (a burst of connects). The daemon is there; the connect is retried.
 */
export function isConnectBusy(error: unknown): boolean {
  const cause = error instanceof BridgeError ? error.cause : error;
  return (cause as NodeJS.ErrnoException | undefined)?.code === 'EAGAIN';
}

/** One request; a connect refused with EAGAIN is retried with a bounded backoff until the timeout. */
export async function socketRequest(request: SocketRequest): Promise<Envelope> {
  const deadline = Date.now() + request.timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await requestOnce({ ...request, timeoutMs: Math.max(1, deadline - Date.now()) });
    } catch (error) {
      const wait = backoffDelayMs(BUSY_CONNECT_BACKOFF, attempt);
      if (!isConnectBusy(error) || Date.now() + wait >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

function requestOnce(request: SocketRequest): Promise<Envelope> {
  return new Promise<Envelope>((resolve, reject) => {
    const socket = connect({ path: request.socketPath });
    socket.setEncoding('utf8');
    const decoder = new FrameDecoder(MAX_FRAME_BYTES);
    let settled = false;
    const finish = (outcome: Envelope | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const timer = setTimeout(
      () =>
        finish(
          new BridgeError(
            'daemon_timeout',
            `no answer from the daemon on ${request.socketPath} within ${request.timeoutMs} ms`,
          ),
        ),
      request.timeoutMs,
    );
    socket.once('connect', () => socket.write(encodeFrame(request.type, request.data)));
    socket.on('error', (error: NodeJS.ErrnoException) =>
      finish(connectError(request.socketPath, error)),
    );
    socket.on('data', (text: string) => {
      for (const envelope of decoder.push(text)) {
        if (envelope instanceof Error) {
          finish(
            new BridgeError(
              'bad_reply',
              `the daemon sent something unreadable: ${envelope.message}`,
            ),
          );
          return;
        }
        if (request.isReply(envelope)) {
          finish(envelope);
          return;
        }
      }
    });
    socket.on('close', () =>
      finish(
        new BridgeError(
          'connection_closed',
          `the daemon closed ${request.socketPath} before answering`,
        ),
      ),
    );
  });
}
