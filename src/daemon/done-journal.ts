/**
 * The done journal: an acknowledged `done` must be delivered or recoverable.
 * Delivery waits for the scheduler's tick, so a daemon killed just after its
 * ack would lose the done. Each accepted done is therefore appended to
 * `dones.jsonl` in the runtime dir before it is acked (a write(2) reaches the
 * kernel, which keeps it when the process dies, kill -9 included), and a
 * daemon starting on that dir ends those streams again, for the retention
 * window, so that re-subscribing watchers learn the outcome. The ack also
 * waits for the disk (a power loss): the worker socket holds the replies of
 * a turn of the event loop that journaled a done until `sync` has returned.
 * That is a group commit: one fdatasync, off the event loop, for every done
 * journaled until it starts; the dones journaled while it runs wait for the
 * next one, so the syncs grow with the load instead of their number.
 */
import {
  appendFileSync,
  closeSync,
  fdatasync,
  fdatasyncSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
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
  /** Dones appended since the last sync started. */
  #unsynced = 0;
  /** fdatasyncs in flight, and the descriptors a rewrite retired meanwhile (closed once none is). */
  #syncing = 0;
  #retired: number[] = [];

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
    if (this.#fd === undefined) {
      this.#fd = openSync(this.#path, 'a', 0o600);
      // The file's name must survive a power loss too (rare: at the first done and after a rewrite).
      syncDirectory(dirname(this.#path));
    }
    appendFileSync(this.#fd, `${line}\n`);
    this.#unsynced++;
    this.#recent.push({ at, line });
    if (++this.#appended >= COMPACT_EVERY) this.#rewrite();
  }

  /**
   * Starts one fdatasync (on libuv's thread pool) covering every done
   * recorded so far; `synced` gets how many once it has returned (an error:
   * they are written, not known to be on disk). Acks wait for it.
   */
  sync(synced: (error: Error | null, dones: number) => void): void {
    const dones = this.#unsynced;
    this.#unsynced = 0;
    const fd = this.#fd;
    // Nothing new since the last sync, or a rewrite made it all durable already.
    if (dones === 0 || fd === undefined) {
      synced(null, dones);
      return;
    }
    this.#syncing++;
    fdatasync(fd, (error) => {
      if (--this.#syncing === 0) for (const retired of this.#retired.splice(0)) closeSync(retired);
      synced(error, dones);
    });
  }

  /** The same, on this thread, at once: for a connection that closes, or a daemon that stops. */
  syncNow(): void {
    const dones = this.#unsynced;
    this.#unsynced = 0;
    if (dones > 0 && this.#fd !== undefined) fdatasyncSync(this.#fd);
  }

  close(): void {
    // A sync in flight still uses the descriptor: it is closed when the sync returns.
    if (this.#fd !== undefined) {
      if (this.#syncing > 0) this.#retired.push(this.#fd);
      else closeSync(this.#fd);
    }
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
    const fd = openSync(temporary, 'w', 0o600);
    try {
      writeFileSync(fd, this.#recent.map((entry) => `${entry.line}\n`).join(''));
      // Whole on disk before it replaces the old file, or a power loss could leave neither.
      fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, this.#path);
    syncDirectory(dirname(this.#path));
    // Every recent done is in the new file, on disk.
    this.#unsynced = 0;
  }
}

/**
 * A directory's entries (a created or renamed file) survive a power loss once it is fsynced.
 * Windows refuses to fsync a directory (EPERM): there NTFS journals the entry itself, and the
 * file's own sync (FlushFileBuffers), which the journal still does before each ack, is enough.
 */
function syncDirectory(path: string): void {
  if (process.platform === 'win32') return;
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
