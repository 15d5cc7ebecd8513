/**
 * The harness's side of a forked helper (relay, publisher, subscriber,
 * connector): typed messages over the IPC channel, and waiting for one.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface Message {
  type: string;
  [key: string]: unknown;
}

export class Child {
  readonly process: ChildProcess;
  readonly #waiting = new Map<string, Array<(message: Message) => void>>();
  readonly #listeners = new Map<string, (message: Message) => void>();
  #stderr = '';
  #exited: Promise<number | null>;

  constructor(script: string, execArgv: string[] = []) {
    const path = fileURLToPath(new URL(`../${script}`, import.meta.url));
    // execArgv is explicit: a test runner's own flags must not leak into load generators.
    this.process = fork(path, [], { execArgv, stdio: ['ignore', 'inherit', 'pipe', 'ipc'] });
    this.process.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.#stderr = (this.#stderr + text).slice(-8000);
    });
    this.process.on('message', (message: Message) => {
      const waiters = this.#waiting.get(message.type);
      const waiter = waiters?.shift();
      if (waiter !== undefined) waiter(message);
      else this.#listeners.get(message.type)?.(message);
    });
    this.process.on('error', () => {});
    this.#exited = new Promise((resolve) => this.process.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  get stderr(): string {
    return this.#stderr;
  }

  send(message: Message): void {
    // A helper that already left cannot take a late message (a credit, say); that is not an error.
    if (this.process.connected) this.process.send(message, () => {});
  }

  /** Handles every message of `type` that nobody is waiting for. */
  on(type: string, listener: (message: Message) => void): void {
    this.#listeners.set(type, listener);
  }

  /** The next message of `type`; fails if the child exits or `timeoutMs` passes first. */
  next<T extends { type: string } = Message>(type: string, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`${this.describe()}: no "${type}" within ${timeoutMs} ms${this.#tail()}`));
      }, timeoutMs);
      const onExit = (code: number | null) => {
        clearTimeout(timer);
        reject(new Error(`${this.describe()} exited (${code}) before "${type}"${this.#tail()}`));
      };
      this.process.once('exit', onExit);
      const list = this.#waiting.get(type) ?? [];
      list.push((message) => {
        clearTimeout(timer);
        this.process.off('exit', onExit);
        resolve(message as T);
      });
      this.#waiting.set(type, list);
    });
  }

  /**
   * The next message of `type`, unless the child reports `failed` first: then its error, naming
   * the child. `failed` is awaited a second longer, so that a timeout says what it waited for.
   */
  async nextUnlessFailed<T = Message>(type: string, timeoutMs: number): Promise<T> {
    const failed = this.next<{ type: 'failed'; error: string }>('failed', timeoutMs + 1000);
    const wanted = this.next<T & { type: string }>(type, timeoutMs);
    const first = await Promise.race([
      wanted.then((value) => ({ value })),
      failed.then((message) => ({ error: message.error })),
    ]);
    failed.catch(() => {});
    wanted.catch(() => {});
    if ('error' in first) throw new Error(`${this.describe()}: ${first.error}`);
    return first.value;
  }

  /** A load helper's start: its `ready`; a helper that failed (or never got ready) is stopped. */
  async ready(timeoutMs = 120_000): Promise<void> {
    try {
      await this.nextUnlessFailed('ready', timeoutMs);
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Asks the child to leave, then makes sure it has. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.send({ type: 'exit' });
    const timer = setTimeout(() => this.process.kill('SIGKILL'), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  describe(): string {
    return `${this.process.spawnargs.at(-1) ?? 'child'} (pid ${this.pid})`;
  }

  #tail(): string {
    return this.#stderr ? `; stderr: ${this.#stderr.slice(-2000)}` : '';
  }
}

/** The child's side: the parent's messages, and a way to answer. */
export function onParentMessage(handler: (message: Message) => void): void {
  process.on('message', (message: Message) => {
    if (message.type === 'exit') process.exit(0);
    handler(message);
  });
  // An orphaned helper must not outlive the harness; SIGTERM exits cleanly so --cpu-prof is written.
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

export function toParent(message: Message): void {
  process.send?.(message);
}
