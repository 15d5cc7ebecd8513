/** Runs the standard-library Python worker in test/fixtures as a separate process. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { collectOutput, ROOT } from './daemon.js';

/** The system interpreter when there is one: version-manager shims cost 300 ms a start. */
export const PYTHON =
  process.env.PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
/** Isolated mode: no user site-packages, no PYTHON* variables; the clients need the standard library only. */
export const PYTHON_ARGS = ['-I'];

export interface RawReplies {
  replies: Array<{ type: string; data: Record<string, unknown> }>;
  closed: boolean;
}

/** Sends envelopes (objects) or raw text (strings) and returns what the daemon answered. */
export function pythonRawClient(
  socket: string,
  frames: unknown[],
  expected?: number,
): Promise<RawReplies> {
  const args = [
    ...PYTHON_ARGS,
    join(ROOT, 'test/fixtures/raw_client.py'),
    socket,
    JSON.stringify(frames),
  ];
  if (expected !== undefined) args.push(String(expected));
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = collectOutput(child);
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`python client exited ${code}: ${output.stderr()}`));
      const lines = output.stdout().split('\n').filter(Boolean);
      resolve({
        replies: lines.filter((l) => l !== 'CLOSED').map((l) => JSON.parse(l)),
        closed: lines.includes('CLOSED'),
      });
    });
  });
}
