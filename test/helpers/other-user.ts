/**
 * A second local user, real: created for the test when it runs as root (CI does). Tests of what
 * another user on the machine can and cannot do run their attack as this user.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { PYTHON, PYTHON_ARGS } from './python.js';

export const OTHER_USER = 'mcpprogress-other';
export const isRoot = process.getuid?.() === 0;

/** Creates the other user once; returns false where that cannot be done here. */
function ensureOtherUser(): boolean {
  if (!isRoot) return false;
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

export const canSwitchUser = ensureOtherUser();

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

/** Runs a Python snippet as the other user and returns what it printed. */
export function asOtherUser(code: string, ...args: string[]): string {
  const result = spawnSync('runuser', runAsOther(code, args), { encoding: 'utf8', cwd: '/' });
  if (result.status !== 0) throw new Error(`python as ${OTHER_USER} failed: ${result.stderr}`);
  return result.stdout.trim();
}

/** Starts a Python snippet as the other user that keeps running (stdin and stdout are pipes). */
export function spawnAsOtherUser(code: string, ...args: string[]): ChildProcess {
  return spawn('runuser', runAsOther(code, args), { stdio: ['pipe', 'pipe', 'pipe'], cwd: '/' });
}
