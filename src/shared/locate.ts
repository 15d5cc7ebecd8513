/**
 * Where the daemon lives: runtime directory, socket and daemon.json. Shared
 * by the daemon and every client, so both ends apply the same rules.
 */
import { randomBytes } from 'node:crypto';
import { lstatSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { homedir, tmpdir, userInfo } from 'node:os';
import { isAbsolute, join, resolve, win32 } from 'node:path';
import { GATEWAY_SOCKET_NAME } from './defaults.js';
import { BridgeError } from './errors.js';

export const ENV_RUNTIME_DIR = 'MCP_PROGRESS_RUNTIME_DIR';
export const ENV_SOCKET = 'MCP_PROGRESS_SOCKET';
export const ENV_TOKEN = 'MCP_PROGRESS_TOKEN';

export const SOCKET_NAME = 'bridge.sock';
export const DAEMON_INFO_NAME = 'daemon.json';
/** Windows: the runtime dir's pipe name, kept so that a restarted daemon is found on the same pipe. */
export const PIPE_NAME_FILE = 'pipe-name';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * --runtime-dir, else $MCP_PROGRESS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/mcp-progress, else
 * <tmpdir>/mcp-progress-<uid>; on Windows %LOCALAPPDATA%\\mcp-progress (the user's own
 * profile, whose inherited ACL keeps other users out: a shared temp dir has no such owner).
 */
export function resolveRuntimeDir(
  explicit?: string,
  env: Env = process.env,
  platform: NodeJS.Platform = process.platform,
): string {
  if (explicit) return explicit;
  const fromEnv = env[ENV_RUNTIME_DIR];
  if (fromEnv) {
    // Relative, the socket and daemon.json would depend on each process's working directory.
    if (!(platform === 'win32' ? win32.isAbsolute : isAbsolute)(fromEnv)) {
      throw new BridgeError(
        'runtime_dir',
        `$${ENV_RUNTIME_DIR} is ${JSON.stringify(fromEnv)}, a relative path: every process would look for the daemon somewhere else, by its working directory. Set it to an absolute path, such as ${JSON.stringify(resolve(fromEnv))}`,
      );
    }
    return fromEnv;
  }
  if (platform === 'win32') {
    const local = env.LOCALAPPDATA || win32.join(homedir(), 'AppData', 'Local');
    return win32.join(local, 'mcp-progress');
  }
  const xdg = env.XDG_RUNTIME_DIR;
  if (xdg) return join(xdg, 'mcp-progress');
  return join(tmpdir(), `mcp-progress-${userKey()}`);
}

/**
 * <runtime-dir>/bridge.sock. On Windows a named pipe: the namespace is global and open to every
 * user, so its name carries 128 random bits that only this user can read (in daemon.json, the
 * worker's environment and the runtime dir's pipe-name file, kept for the next daemon there). With
 * no name kept yet, a fresh random one: nobody listens on it, and nobody can guess it to squat it.
 */
export function defaultSocketPath(
  runtimeDir: string,
  platform: NodeJS.Platform = process.platform,
): string {
  if (platform === 'win32') return keptPipeName(runtimeDir) ?? newPipeName();
  return join(runtimeDir, SOCKET_NAME);
}

const PIPE_NAME = /^\\\\\.\\pipe\\mcp-progress-[0-9a-f]{32}$/;

/** Whether a name is one that newPipeName makes. */
export function isRandomPipeName(name: string): boolean {
  return PIPE_NAME.test(name);
}

export function newPipeName(): string {
  return `\\\\.\\pipe\\mcp-progress-${randomBytes(16).toString('hex')}`;
}

export function pipeNamePath(runtimeDir: string): string {
  return join(runtimeDir, PIPE_NAME_FILE);
}

/** The pipe name kept in the runtime dir, when there is one and it is well formed. */
export function keptPipeName(runtimeDir: string): string | undefined {
  try {
    const name = readFileSync(pipeNamePath(runtimeDir), 'utf8').trim();
    return isRandomPipeName(name) ? name : undefined;
  } catch {
    return undefined;
  }
}

export function daemonInfoPath(runtimeDir: string): string {
  return join(runtimeDir, DAEMON_INFO_NAME);
}

/** <runtime-dir>/gateway.sock: where a daemon serves its gateway to this user's processes. */
export function gatewaySocketPath(runtimeDir: string): string {
  return join(runtimeDir, GATEWAY_SOCKET_NAME);
}

/** What a running daemon publishes about itself in daemon.json (mode 0600). */
export interface DaemonInfo {
  pid: number;
  version: string;
  socket: string;
  /** The WebSocket gateway URL. */
  url: string;
  secret: string;
  /**
   * The same gateway on a Unix socket (the local link), which clients that found the daemon
   * through daemon.json use; absent on Windows, or where the socket could not be made.
   */
  gatewaySocket?: string | undefined;
}

/**
 * A daemon's socket and daemon.json always belong to the user it runs as. Anything else there was
 * planted: in a shared /tmp another user can create <tmpdir>/mcp-progress-<uid> first, and would
 * then read every frame sent to it and send cancels back. Returns an error to report, or undefined.
 */
export function plantedByAnotherUser(path: string): BridgeError | undefined {
  if (typeof process.getuid !== 'function') return undefined;
  let owner: number;
  try {
    owner = lstatSync(path).uid;
  } catch {
    return undefined; // Missing: the caller's own error says so.
  }
  if (owner === process.getuid()) return undefined;
  return new BridgeError(
    'foreign_owner',
    `${path} belongs to uid ${owner}, not to you (uid ${process.getuid()}): another user may have planted it, so it is not used. Remove it, or give your daemon a runtime dir of your own with $MCP_PROGRESS_RUNTIME_DIR`,
  );
}

export async function readDaemonInfo(runtimeDir: string): Promise<DaemonInfo> {
  const path = daemonInfoPath(runtimeDir);
  const planted = plantedByAnotherUser(path);
  if (planted !== undefined) throw planted;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new BridgeError(
      'daemon_not_running',
      `no ${DAEMON_INFO_NAME} in ${runtimeDir}: start the daemon with "mcp-progress daemon" (or pass the runtime dir it uses)`,
      { cause: error },
    );
  }
  let info: Partial<DaemonInfo> | null;
  try {
    info = JSON.parse(text) as Partial<DaemonInfo> | null;
  } catch (error) {
    throw new BridgeError(
      'bad_daemon_info',
      `${path} is not valid JSON (${(error as Error).message}): it is not a daemon.json written by mcp-progress, or it was cut short; delete it if no daemon is running`,
      { cause: error },
    );
  }
  if (
    typeof info !== 'object' ||
    info === null ||
    typeof info.pid !== 'number' ||
    typeof info.socket !== 'string' ||
    typeof info.url !== 'string' ||
    typeof info.secret !== 'string' ||
    typeof info.version !== 'string' ||
    (info.gatewaySocket !== undefined && typeof info.gatewaySocket !== 'string')
  ) {
    throw new BridgeError(
      'bad_daemon_info',
      `${path} is not a daemon.json written by mcp-progress`,
    );
  }
  return info as DaemonInfo;
}

/** The socket a worker or CLI should use: explicit, else $MCP_PROGRESS_SOCKET, else the default. */
export function resolveSocketPath(
  options: { socket?: string | undefined; runtimeDir?: string | undefined },
  env: Env = process.env,
): string {
  if (options.socket) return options.socket;
  const fromEnv = env[ENV_SOCKET];
  if (fromEnv && !options.runtimeDir) return fromEnv;
  return defaultSocketPath(resolveRuntimeDir(options.runtimeDir, env));
}

/**
 * The socket `publish` and `status` use: --socket, else $MCP_PROGRESS_SOCKET
 * (unless a runtime dir is named), else the socket that the runtime dir's
 * daemon.json names (a daemon started with --socket elsewhere), else the
 * runtime dir's default socket.
 */
export async function locateSocketPath(
  options: { socket?: string | undefined; runtimeDir?: string | undefined },
  env: Env = process.env,
): Promise<string> {
  if (options.socket) return options.socket;
  const fromEnv = env[ENV_SOCKET];
  if (fromEnv && !options.runtimeDir) return fromEnv;
  const runtimeDir = resolveRuntimeDir(options.runtimeDir, env);
  // A missing or unreadable daemon.json is no error here: the default socket is the answer.
  const info = await readDaemonInfo(runtimeDir).catch(() => undefined);
  return info?.socket || defaultSocketPath(runtimeDir);
}

function userKey(): string {
  return typeof process.getuid === 'function' ? String(process.getuid()) : safeUserName();
}

function safeUserName(): string {
  try {
    return userInfo().username.replace(/[^a-zA-Z0-9_.-]/g, '_');
  } catch {
    return 'user';
  }
}
