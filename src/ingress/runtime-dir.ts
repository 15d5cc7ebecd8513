/**
 * The daemon's footing on disk: a private runtime directory, a socket that is
 * never taken from a live daemon, and daemon.json written atomically at 0600.
 */
import { chmodSync, lstatSync, mkdirSync } from 'node:fs';
import { lstat, open, rename, unlink } from 'node:fs/promises';
import { socketRequest } from '../client/socket-request.js';
import type { DaemonInfo } from '../locate.js';
import { BridgeError } from '../protocol/errors.js';
import { pongSchema } from '../protocol/frames.js';

/** Creates the runtime directory at 0700, or checks and tightens an existing one. */
export function prepareRuntimeDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new BridgeError(
      'runtime_dir',
      `cannot create the runtime directory ${dir}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  const stat = lstatSync(dir);
  if (!stat.isDirectory() || stat.isSymbolicLink()) {
    throw new BridgeError(
      'runtime_dir',
      `${dir} is not a directory: choose another with --runtime-dir`,
    );
  }
  if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) {
    throw new BridgeError(
      'runtime_dir',
      `${dir} belongs to uid ${stat.uid}, not to you: choose your own with --runtime-dir or $MCP_PROGRESS_RUNTIME_DIR`,
    );
  }
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

export type SocketProbe =
  | { state: 'absent' }
  | { state: 'stale' }
  | { state: 'live'; pid: number; version: string }
  | { state: 'foreign'; reason: string };

/** Connects and asks: is a daemon answering on this path? */
export async function probeSocket(path: string, timeoutMs = 2000): Promise<SocketProbe> {
  if (process.platform !== 'win32') {
    try {
      const stat = await lstat(path);
      if (!stat.isSocket())
        return { state: 'foreign', reason: `${path} exists and is not a socket` };
    } catch {
      return { state: 'absent' };
    }
  }
  try {
    const reply = await socketRequest({
      socketPath: path,
      type: 'ping',
      data: {},
      isReply: (envelope) => envelope.type === 'pong' || envelope.type === 'rejected',
      timeoutMs,
    });
    const pong = pongSchema.safeParse(reply.data);
    if (reply.type === 'pong' && pong.success)
      return { state: 'live', pid: pong.data.pid, version: pong.data.version };
    return { state: 'foreign', reason: `something else answers on ${path}` };
  } catch (error) {
    const code = (error as BridgeError).code;
    if (code === 'daemon_not_running')
      return process.platform === 'win32' ? { state: 'absent' } : { state: 'stale' };
    return {
      state: 'foreign',
      reason: `something on ${path} does not answer as a daemon: ${(error as Error).message}`,
    };
  }
}

/**
 * Makes the socket path free for this daemon: a stale socket file (nothing
 * answering) is removed; a live daemon's socket is never touched.
 */
export async function claimSocketPath(path: string): Promise<void> {
  const probe = await probeSocket(path);
  switch (probe.state) {
    case 'absent':
      return;
    case 'live':
      throw new BridgeError(
        'already_running',
        `a daemon (pid ${probe.pid}, version ${probe.version}) is already running on ${path}: use it, or stop it first (kill ${probe.pid})`,
      );
    case 'foreign':
      throw new BridgeError(
        'socket_in_use',
        `${probe.reason}: remove it or choose another path with --socket`,
      );
    case 'stale':
      // Look again just before unlinking: another daemon may have claimed it meanwhile.
      if ((await probeSocket(path, 500)).state === 'stale') await unlink(path).catch(() => {});
      return;
  }
}

/** Writes daemon.json with mode 0600 from its first byte, then renames it into place. */
export async function writeDaemonInfo(path: string, info: DaemonInfo): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  const file = await open(temporary, 'w', 0o600);
  try {
    await file.writeFile(`${JSON.stringify(info, null, 2)}\n`);
  } finally {
    await file.close();
  }
  await rename(temporary, path);
}

/** Removes a file this daemon created, if it is still there. */
export async function removeQuietly(path: string): Promise<void> {
  await unlink(path).catch(() => {});
}
