/** A worker process driven line by line: JSON commands on stdin, JSON events on stdout. */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, waitForExit } from './daemon.js';
import { PYTHON, PYTHON_ARGS } from './python.js';

export interface WorkerEvent {
  event: string;
  [key: string]: unknown;
}

export interface DrivenWorker {
  readonly child: ChildProcess;
  readonly events: WorkerEvent[];
  send(command: Record<string, unknown>): void;
  /** The first event (after those already taken) that matches; fails after the timeout. */
  next(
    match: (event: WorkerEvent) => boolean,
    what: string,
    timeoutMs?: number,
  ): Promise<WorkerEvent>;
  stderr(): string;
  exit(): Promise<number | null>;
}

const running: ChildProcess[] = [];

export function killWorkers(): void {
  for (const child of running.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

function drive(command: string, args: string[], env: Record<string, string>): DrivenWorker {
  const child = spawn(command, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MCP_PROGRESS_SOCKET: '', MCP_PROGRESS_TOKEN: '', ...env },
  });
  running.push(child);
  const events: WorkerEvent[] = [];
  const listeners = new Set<() => void>();
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    stdout += text;
    let newline = stdout.indexOf('\n');
    while (newline !== -1) {
      const line = stdout.slice(0, newline);
      stdout = stdout.slice(newline + 1);
      if (line.trim() !== '') events.push(JSON.parse(line) as WorkerEvent);
      newline = stdout.indexOf('\n');
    }
    for (const listener of listeners) listener();
  });
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  let taken = 0;
  return {
    child,
    events,
    send(commandObject) {
      child.stdin?.write(`${JSON.stringify(commandObject)}\n`);
    },
    next(match, what, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          while (taken < events.length) {
            const event = events[taken++];
            if (event !== undefined && match(event)) {
              cleanup();
              resolve(event);
              return;
            }
          }
          if (child.exitCode !== null || child.signalCode !== null) {
            cleanup();
            reject(new Error(`worker exited before ${what}; stderr: ${stderr}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(
              `timed out waiting for ${what}; events: ${JSON.stringify(events)}; stderr: ${stderr}`,
            ),
          );
        }, timeoutMs);
        const onExit = () => setImmediate(check);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off('exit', onExit);
        };
        listeners.add(check);
        child.on('exit', onExit);
        check();
      });
    },
    stderr: () => stderr,
    exit: () => waitForExit(child),
  };
}

export function nodeWorker(
  env: Record<string, string>,
  options: Record<string, unknown> = {},
): DrivenWorker {
  return drive(
    process.execPath,
    [join(ROOT, 'test/fixtures/node_worker.mjs'), JSON.stringify(options)],
    env,
  );
}

export function pythonWorker(
  env: Record<string, string>,
  options: Record<string, unknown> = {},
): DrivenWorker {
  return drive(
    PYTHON,
    [...PYTHON_ARGS, join(ROOT, 'test/fixtures/py_worker.py'), JSON.stringify(options)],
    env,
  );
}
