/**
 * A second local user for the tests of what another user can and cannot do. It is real: created
 * once with useradd where the tests run as root (CI does); elsewhere its tests skip with a warning.
 */
import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { ROOT } from './daemon.js';
import { PYTHON, PYTHON_ARGS } from './python.js';
import { tool } from './tools.js';

export const OTHER_USER = 'mcpprogress-other';

/** A Python snippet for asOtherUser: connects to the Unix socket argv[1], prints "connected" or the error's class. */
export const TRY_CONNECT = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print(type(e).__name__)
`;

/** Creates the other user once; false where that cannot be done here (not root). */
function ensureOtherUser(): boolean {
  if (process.getuid?.() !== 0) return false;
  if (spawnSync('id', ['-u', OTHER_USER]).status === 0) return true;
  return (
    spawnSync('useradd', [
      '--system',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      OTHER_USER,
    ]).status === 0
  );
}

/** `describe.skipIf(otherUser.skip)` and `beforeAll(() => otherUser.require())`. */
export const otherUser = tool(OTHER_USER, {
  debian: 'passwd',
  root: true,
  check: ensureOtherUser,
  why: 'a second local user: run the tests as root so that useradd can create it',
});

function idOf(flag: '-u' | '-g'): number {
  return Number(spawnSync('id', [flag, OTHER_USER], { encoding: 'utf8' }).stdout.trim());
}

/** Spawn options that run a child as the other user. */
export function asOtherUserOptions(): Pick<SpawnOptions, 'uid' | 'gid' | 'cwd'> {
  return { uid: idOf('-u'), gid: idOf('-g'), cwd: '/' };
}

/** runuser's arguments that run a Python snippet as the other user. */
const runAsOther = (code: string, args: readonly string[]) => [
  '-u',
  OTHER_USER,
  '--',
  PYTHON,
  ...PYTHON_ARGS,
  '-c',
  code,
  ...args,
];

/** How long a snippet of asOtherUser may take: it blocks the test's thread, so no test timeout can end it. */
const OTHER_USER_SNIPPET_TIMEOUT_MS = 30_000;

/** Runs a Python snippet as the other user and returns what it printed. */
export function asOtherUser(code: string, ...args: string[]): string {
  const result = spawnSync('runuser', runAsOther(code, args), {
    encoding: 'utf8',
    cwd: '/',
    timeout: OTHER_USER_SNIPPET_TIMEOUT_MS,
  });
  if (result.status !== 0)
    throw new Error(
      `python as ${OTHER_USER} failed: ${result.error?.message ?? ''} ${result.stderr}`,
    );
  return result.stdout.trim();
}

/** Starts a Python snippet as the other user that keeps running (stdin and stdout are pipes). */
export function spawnAsOtherUser(code: string, ...args: string[]): ChildProcess {
  return spawn('runuser', runAsOther(code, args), { stdio: ['pipe', 'pipe', 'pipe'], cwd: '/' });
}

/**
 * Lets other users reach this checkout, so that a test can run its code as one (nobody, the
 * other user): each directory above it that others cannot pass through gets o+x, traverse only
 * (no read), as a clone in a 0700 temporary directory needs. Only where the tests run as root.
 */
export function letOthersReachCheckout(): void {
  if (process.getuid?.() !== 0) return;
  for (let dir = ROOT; ; dir = dirname(dir)) {
    const { mode } = statSync(dir);
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
    if (dirname(dir) === dir) return;
  }
}
