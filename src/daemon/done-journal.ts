/**
 * The done journal: an acknowledged `done` must be delivered or recoverable.
 * Delivery waits for the scheduler's tick, so a daemon killed just after its
 * ack would lose the done. Each accepted done is therefore appended to
 * `dones.jsonl` in the runtime dir before it is acked (a write(2) reaches the
 * kernel, which keeps it when the process dies, kill -9 included), and a
 * daemon starting on that dir ends those streams again, for the retention
 * window, so that re-subscribing watchers learn the outcome. A power loss
 * before the kernel writes the page out is not covered (no fsync per done).
 */
import {
  appendFileSync,
  closeSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { DoneStatus, ProgressToken } from '../protocol/index.js';

export interface JournaledDone {
  /** Wall-clock ms when the done was accepted. */
  readonly at: number;
  readonly progressToken: ProgressToken;
  readonly status: DoneStatus;
  readonly message?: string | undefined;
}

/** Lines appended between rewrites that drop the dones older than the retention window. */
const COMPACT_EVERY = 10_000;

export function doneJournalPath(runtimeDir: string): string {
  return join(runtimeDir, 'dones.jsonl');
}

export class DoneJournal {
  readonly #path: string;
  readonly #retentionMs: number;
  readonly #wallClock: () => number;
  /** Dones still within the retention window, oldest first, as written. */
  #recent: Array<{ at: number; line: string }> = [];
  #appended = 0;
  #fd: number | undefined;

  constructor(path: string, retentionMs: number, wallClock: () => number = Date.now) {
    this.#path = path;
    this.#retentionMs = retentionMs;
    this.#wallClock = wallClock;
  }

  /**
   * Reads what an earlier daemon on this dir acknowledged and still within
   * the retention window, and rewrites the journal to just those. A line that
   * does not parse (a torn last write) is skipped.
   */
  recover(): JournaledDone[] {
    let text = '';
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch {}
    const oldest = this.#wallClock() - this.#retentionMs;
    const recovered: JournaledDone[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      try {
        const done = JSON.parse(line) as JournaledDone;
        if (typeof done.at === 'number' && done.at >= oldest) {
          recovered.push(done);
          this.#recent.push({ at: done.at, line });
        }
      } catch {}
    }
    this.#rewrite();
    return recovered;
  }

  /** Appends one accepted done; returns once the kernel has it. Call before the ack. */
  record(progressToken: ProgressToken, status: DoneStatus, message: string | undefined): void {
    const at = this.#wallClock();
    const done: JournaledDone =
      message === undefined
        ? { at, progressToken, status }
        : { at, progressToken, status, message };
    const line = JSON.stringify(done);
    this.#fd ??= openSync(this.#path, 'a', 0o600);
    appendFileSync(this.#fd, `${line}\n`);
    this.#recent.push({ at, line });
    if (++this.#appended >= COMPACT_EVERY) this.#rewrite();
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  /** Keeps only the dones within the retention window, written whole to a new file renamed into place. */
  #rewrite(): void {
    const oldest = this.#wallClock() - this.#retentionMs;
    const first = this.#recent.findIndex((entry) => entry.at >= oldest);
    this.#recent = first === -1 ? [] : this.#recent.slice(first);
    // The descriptor names the old file: the next append opens the new one.
    this.close();
    this.#appended = 0;
    if (this.#recent.length === 0) {
      try {
        unlinkSync(this.#path);
      } catch {}
      return;
    }
    const temporary = `${this.#path}.${process.pid}.tmp`;
    writeFileSync(temporary, this.#recent.map((entry) => `${entry.line}\n`).join(''), {
      mode: 0o600,
    });
    renameSync(temporary, this.#path);
  }
}
