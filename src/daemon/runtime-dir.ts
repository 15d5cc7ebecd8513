/**
 * The daemon's footing on disk: a private runtime directory, a socket that is
 * never taken from a live daemon, and daemon.json written atomically at 0600.
 */
import {
  chmodSync,
  closeSync,
  constants as fsConstants,
  lstatSync,
  mkdirSync,
  unlinkSync,
} from 'node:fs';
import { link, lstat, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { connect, createServer, type ListenOptions, type Server } from 'node:net';
import { dirname, join } from 'node:path';
import { isPong } from '../protocol/frame-guards.js';
import { GATEWAY_SOCKET_PROBE_TIMEOUT_MS } from '../shared/defaults.js';
import { BridgeError } from '../shared/errors.js';
import {
  type DaemonInfo,
  isRandomPipeName,
  keptPipeName,
  PIPE_NAME_FILE,
  pipeNamePath,
} from '../shared/locate.js';
import { socketRequest } from '../shared/socket-request.js';

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

/** Held while a daemon runs: of daemons started at once on one runtime dir, one holds it. */
export interface RuntimeDirLock {
  release(): void;
  /**
   * Whether the holder has lost its files (its socket and daemon.json were
   * removed under it): such a daemon cannot be reached, so it yields the lock
   * to a daemon that starts in its place. Set by the daemon once it runs.
   */
  orphaned?: () => Promise<boolean>;
}

/**
 * Locks the runtime directory for this daemon, whatever socket each daemon
 * was given. The lock lives inside the runtime dir, which only this user can
 * enter (0700, checked by prepareRuntimeDir), so no other user can take it
 * first or open a connection to it.
 *
 * Unix: a listening socket at <dir>/daemon.lock, published with link(2) so
 * that of daemons started at once exactly one gets it. A lock file left by
 * a daemon killed with -9 refuses connections: it is stale and is replaced.
 * Windows: daemon.lock opened with an exclusive share mode, which Windows
 * ends with the process however it dies (there is no holder to ask).
 */
export async function lockRuntimeDir(dir: string, infoPath: string): Promise<RuntimeDirLock> {
  const path = lockPath(dir);
  if (process.platform === 'win32') {
    const lock = await lockExclusively(path, dir);
    if (lock !== undefined) return lock;
    throw await heldBy(dir, infoPath);
  }
  for (let attempt = 0; attempt < 10; attempt++) {
    const lock = await tryLock(path, dir);
    if (lock !== undefined) return lock;
    const holder = await askHolder(path);
    // A dead holder's file, or a holder whose files were removed under it: try again.
    if (holder === 'stale') await removeStaleLock(path);
    if (holder === 'held') break;
  }
  throw await heldBy(dir, infoPath);
}

export function lockPath(dir: string): string {
  return join(dir, 'daemon.lock');
}

/** Windows: the lock is an open handle no other process may share. */
async function lockExclusively(path: string, dir: string): Promise<RuntimeDirLock | undefined> {
  try {
    const file = await open(path, fsConstants.O_RDWR | fsConstants.O_CREAT | exclusiveLockFlag());
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        // Sync: release runs on the way out, where an awaited close may never finish.
        closeSync(file.fd);
      },
    };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EBUSY' || code === 'EPERM' || code === 'EACCES') return undefined;
    throw new BridgeError(
      'runtime_dir',
      `cannot lock the runtime directory ${dir}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * libuv's UV_FS_O_EXLOCK on Windows (uv/win.h): open the file with no sharing. Node passes open
 * flags through to libuv but does not name this one in fs.constants (checked on 22.23.3), so
 * reading it from there gave 0, and daemons started at once could all hold the "lock".
 */
const UV_FS_O_EXLOCK_WINDOWS = 0x10000000;

function exclusiveLockFlag(): number {
  return process.platform === 'win32' ? UV_FS_O_EXLOCK_WINDOWS : 0;
}

/**
 * Removes a lock file that nobody answers on. It is first renamed aside, which
 * of two daemons that found it stale only one can do; the one that did checks
 * it took the very file found stale, and puts back one it should not have taken.
 */
async function removeStaleLock(path: string): Promise<void> {
  const stale = await fileIdentity(path);
  if (stale === undefined) return;
  const aside = `${path}.${process.pid}.stale`;
  try {
    await rename(path, aside);
  } catch {
    return; // Gone already: another daemon removed it.
  }
  const taken = await fileIdentity(aside);
  if (taken !== undefined && !sameFile(taken, stale)) await link(aside, path).catch(() => {});
  await removeQuietly(aside);
}

async function tryLock(path: string, dir: string): Promise<RuntimeDirLock | undefined> {
  let released = false;
  let bound: FileIdentity | undefined;
  const lock: RuntimeDirLock = {
    release: () => {
      if (released) return;
      released = true;
      // The file goes first, while the lock is still held, and only if it is still ours.
      try {
        const now = lstatSync(path);
        if (bound !== undefined && sameFile(now, bound)) unlinkSync(path);
      } catch {}
      server.close();
    },
  };
  const server = createServer((socket) => {
    socket.on('error', () => {});
    void (lock.orphaned?.() ?? Promise.resolve(false)).then(
      (orphaned) => {
        if (orphaned && !released) lock.release();
        socket.end(orphaned ? 'yielded\n' : 'held\n');
      },
      () => socket.end('held\n'),
    );
  });
  const bindPath = bindPathFor(path);
  try {
    // 0600 like the other sockets: only the daemon's user may ask the holder (PROTOCOL.md 1).
    // A later error (a failed accept) costs nothing: the bound file holds the lock, and an
    // asker that gets no answer takes it as held.
    await listenOwnerOnly(server, { path: bindPath }, () => {});
  } catch (error) {
    throw new BridgeError(
      'runtime_dir',
      `cannot lock the runtime directory ${dir}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  server.unref();
  try {
    bound = await fileIdentity(bindPath);
    if (bindPath !== path) await link(bindPath, path);
  } catch (error) {
    server.close();
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined; // Held, or stale.
    throw new BridgeError(
      'runtime_dir',
      `cannot lock the runtime directory ${dir}: ${(error as Error).message}`,
      { cause: error },
    );
  } finally {
    if (bindPath !== path) await removeQuietly(bindPath);
  }
  return lock;
}

/** Asks the lock's holder whether it still holds it: nobody answering means a stale lock. */
function askHolder(path: string): Promise<'held' | 'yielded' | 'stale'> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    let answer = '';
    let refused = false;
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      answer += text;
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      refused = error.code === 'ECONNREFUSED' || error.code === 'ENOENT';
    });
    socket.on('close', () => {
      if (refused) resolve('stale');
      else resolve(answer.trim() === 'yielded' ? 'yielded' : 'held');
    });
    setTimeout(() => socket.destroy(), 2000).unref();
  });
}

/** Names the holder as a sequential start would, once it has said who it is in daemon.json. */
async function heldBy(dir: string, infoPath: string): Promise<BridgeError> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const owner = await readOwnInfo(infoPath);
    const probe = owner === undefined ? undefined : await probeSocket(owner.socket);
    if (owner !== undefined && probe?.state === 'live' && probe.pid === owner.pid)
      return alreadyRunning(
        owner.pid,
        probe.version,
        `with runtime dir ${dir} (socket ${owner.socket})`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return new BridgeError(
    'already_running',
    `another daemon is already running with runtime dir ${dir} (it is starting or stopping): use it, or choose another runtime dir with --runtime-dir`,
  );
}

/** Whether this daemon's socket and daemon.json are both gone or another's: nobody can reach it. */
export async function filesGone(
  socketPath: string,
  bound: FileIdentity | undefined,
  infoPath: string,
): Promise<boolean> {
  const now = await fileIdentity(socketPath);
  const socketGone = now === undefined || bound === undefined || !sameFile(now, bound);
  const info = await readOwnInfo(infoPath);
  return socketGone && (info === undefined || info.pid !== process.pid);
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
    if (reply.type === 'pong' && isPong(reply.data))
      return { state: 'live', pid: reply.data.pid, version: reply.data.version };
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

function alreadyRunning(pid: number, version: string, where: string): BridgeError {
  return new BridgeError(
    'already_running',
    `a daemon (pid ${pid}, version ${version}) is already running ${where}: use it, or stop it first (kill ${pid})`,
  );
}

/**
 * Something other than a daemon of ours holds the path. On Windows a pipe that exists before
 * the daemon made it was made by another process, maybe another user squatting the name: never
 * share it (every worker's frames would reach that process).
 */
function socketInUse(path: string, reason: string, cause?: unknown): BridgeError {
  const fix =
    process.platform === 'win32'
      ? `the named pipe ${path} already exists and is not a daemon's: another process made it first. The daemon never shares its pipe: stop that process, or delete ${PIPE_NAME_FILE} in the runtime dir so that the next start picks a new name, or choose another with --socket`
      : 'remove it or choose another path with --socket';
  return new BridgeError(
    'socket_in_use',
    `${reason}: ${fix}`,
    cause === undefined ? {} : { cause },
  );
}

/** Windows: keeps the daemon's pipe name in the runtime dir, where a restarted daemon takes it again. */
export async function keepPipeName(runtimeDir: string, socketPath: string): Promise<void> {
  if (process.platform !== 'win32' || keptPipeName(runtimeDir) === socketPath) return;
  if (!isRandomPipeName(socketPath)) return;
  const path = pipeNamePath(runtimeDir);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${socketPath}\n`, { mode: 0o600 });
  await rename(temporary, path);
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
      throw alreadyRunning(probe.pid, probe.version, `on ${path}`);
    case 'foreign':
      throw socketInUse(path, probe.reason);
    case 'stale': {
      // Look again just before unlinking: another daemon may have claimed it meanwhile,
      // so only the very file found stale is removed.
      const stale = await fileIdentity(path);
      if ((await probeSocket(path, 500)).state !== 'stale') return;
      await removeIfSameFile(path, stale);
      return;
    }
  }
}

/**
 * Frees <runtime-dir>/gateway.sock for a daemon that holds the runtime dir's lock, so no daemon
 * of this dir owns it: a socket nothing listens on (its daemon was killed) is removed. Anything
 * else there (a file, a socket something answers on) is not ours to remove.
 */
export async function claimGatewaySocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch {
    return;
  }
  const inTheWay = (reason: string) =>
    new BridgeError(
      'socket_in_use',
      `${path}, the gateway's local link, ${reason}: remove it, or choose another runtime dir with --runtime-dir`,
    );
  if (!isSocket) throw inTheWay('exists and is not a socket');
  const stale = await fileIdentity(path);
  if (await listening(path)) throw inTheWay('is a socket that something listens on');
  await removeIfSameFile(path, stale);
}

/** Whether something accepts connections on the Unix socket at `path`. */
function listening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (answer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    // Refused or gone: stale. Anything else (a full backlog, no answer in time) is someone's.
    const timer = setTimeout(() => done(true), GATEWAY_SOCKET_PROBE_TIMEOUT_MS);
    socket.once('connect', () => done(true));
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done(error.code !== 'ECONNREFUSED' && error.code !== 'ENOENT'),
    );
  });
}

/**
 * Listens on a socket file that is 0600 from its birth: bind() creates it synchronously inside
 * listen(), so a umask around that call sets its mode (a Windows pipe has no mode). Errors after
 * the listen go to `later`.
 */
export function listenOwnerOnly(
  server: Server,
  options: ListenOptions,
  later: (error: Error) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const previous = process.platform === 'win32' ? undefined : process.umask(0o177);
    try {
      server.listen(options, () => {
        server.off('error', reject);
        server.on('error', later);
        resolve();
      });
    } finally {
      if (previous !== undefined) process.umask(previous);
    }
  });
}

let bindCount = 0;

/** sun_path holds 108 bytes on Linux and 104 on macOS and the BSDs, its NUL included. */
export const MAX_SOCKET_PATH_BYTES = process.platform === 'linux' ? 107 : 103;

/**
 * Where the worker socket is bound before it is published under its name: a
 * private path beside it. On Windows (a named pipe) the name itself. A path
 * too long for a Unix socket is refused here, naming the limit; one so close
 * to it that no private name beside it fits is bound in place.
 */
export function bindPathFor(path: string): string {
  if (process.platform === 'win32') return path;
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new BridgeError(
      'socket_failed',
      `the socket path ${path} is ${bytes} bytes, and a Unix socket path is at most ${MAX_SOCKET_PATH_BYTES} bytes here: choose a shorter --socket or --runtime-dir`,
    );
  }
  bindCount++;
  const candidates = [
    `${path}.${process.pid}.${bindCount}`,
    join(dirname(path), `.${process.pid.toString(36)}${bindCount.toString(36)}`),
  ];
  return (
    candidates.find((candidate) => Buffer.byteLength(candidate) <= MAX_SOCKET_PATH_BYTES) ?? path
  );
}

/**
 * Publishes a socket bound at `bindPath` under `path` with link(2), which
 * never replaces an existing file: of daemons started at once, exactly one
 * gets the name, and the others learn who has it. Binding at a private path
 * also keeps libuv, which unlinks a pipe's bind path when it closes, away
 * from the published name. Returns the identity of the bound socket.
 */
export async function publishSocket(
  bindPath: string,
  path: string,
): Promise<FileIdentity | undefined> {
  if (bindPath === path) return fileIdentity(path);
  const bound = await fileIdentity(bindPath);
  try {
    await link(bindPath, path);
  } catch (error) {
    throw await bindError(path, error);
  } finally {
    await removeQuietly(bindPath);
  }
  return bound;
}

/**
 * Explains a failed bind of the worker socket. EADDRINUSE means another
 * process bound the path between our probe and our bind (two daemons started
 * at once): ask it who it is, so the loser names the winner as a sequential
 * start would.
 */
export async function bindError(path: string, error: unknown): Promise<BridgeError> {
  if (error instanceof BridgeError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  // EEXIST: the name was published by another daemon between our probe and our link.
  if (code === 'EADDRINUSE' || code === 'EEXIST') {
    // The winner may sit between its bind and its listen: give it a moment to answer.
    for (let attempt = 0; attempt < 5; attempt++) {
      const probe = await probeSocket(path);
      if (probe.state === 'live') return alreadyRunning(probe.pid, probe.version, `on ${path}`);
      if (probe.state === 'foreign') return socketInUse(path, probe.reason, error);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return new BridgeError(
      'socket_in_use',
      `${path} was taken by another process while this daemon started, and nothing answers on it: start the daemon again`,
      { cause: error },
    );
  }
  return new BridgeError(
    'socket_failed',
    `cannot listen on ${path}: ${(error as Error | undefined)?.message ?? String(error)}: check the path, or choose another with --socket`,
    { cause: error },
  );
}

/**
 * Refuses to start when daemon.json names a daemon that still answers on its
 * socket: a second daemon with the same runtime dir but another socket would
 * otherwise take daemon.json from the first. A daemon.json that cannot be
 * read, or whose daemon is gone, is stale and will be replaced.
 */
export async function refuseLiveDaemonInfo(runtimeDir: string, infoPath: string): Promise<void> {
  const info = await readOwnInfo(infoPath);
  if (info === undefined) return;
  const probe = await probeSocket(info.socket);
  if (probe.state === 'live' && probe.pid === info.pid) {
    throw alreadyRunning(
      probe.pid,
      probe.version,
      `with runtime dir ${runtimeDir} (socket ${info.socket})`,
    );
  }
}

/** pid and socket from a daemon.json, or undefined when it is missing or not one. */
async function readOwnInfo(path: string): Promise<{ pid: number; socket: string } | undefined> {
  try {
    const info = JSON.parse(await readFile(path, 'utf8')) as { pid?: unknown; socket?: unknown };
    if (typeof info.pid === 'number' && typeof info.socket === 'string')
      return { pid: info.pid, socket: info.socket };
  } catch {}
  return undefined;
}

/** Which file a path is now; compared at stop, so that a daemon removes only its own socket. */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

export async function fileIdentity(path: string): Promise<FileIdentity | undefined> {
  if (process.platform === 'win32') return undefined;
  try {
    const { dev, ino } = await lstat(path);
    return { dev, ino };
  } catch {
    return undefined;
  }
}

/**
 * Removes the file at `path` only if it is still the very file `known` (the socket this daemon
 * bound, or the one found stale): another daemon may have put its own there meanwhile.
 */
export async function removeIfSameFile(
  path: string,
  known: FileIdentity | undefined,
): Promise<void> {
  if (known === undefined) return;
  const now = await fileIdentity(path);
  if (now !== undefined && sameFile(now, known)) await removeQuietly(path);
}

function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/** Removes daemon.json only if it still names this daemon (another may have replaced it). */
export async function removeOwnDaemonInfo(path: string, pid: number): Promise<void> {
  const info = await readOwnInfo(path);
  if (info !== undefined && info.pid === pid) await removeQuietly(path);
}

/** Writes daemon.json with mode 0600 from its first byte, then renames it into place. */
export async function writeDaemonInfo(path: string, info: DaemonInfo): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    // 'wx' creates the file or fails: a planted file or symlink by that name is removed first,
    // never followed (the directory may have been open to others before it was tightened).
    await removeQuietly(temporary);
    const file = await open(temporary, 'wx', 0o600);
    try {
      await file.writeFile(`${JSON.stringify(info, null, 2)}\n`);
    } finally {
      await file.close();
    }
    await rename(temporary, path);
  } catch (error) {
    // The temporary file holds the secret: never leave it behind.
    await removeQuietly(temporary);
    throw new BridgeError(
      'daemon_info_failed',
      `cannot write ${path}: ${(error as Error).message}: remove what is in its way, or choose another runtime dir with --runtime-dir`,
      { cause: error },
    );
  }
}

/** Removes a file this daemon created, if it is still there. */
export async function removeQuietly(path: string): Promise<void> {
  await unlink(path).catch(() => {});
}
