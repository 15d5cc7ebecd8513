/**
 * The done journal: an acknowledged `done` must be delivered or recoverable.
 * Delivery waits for the scheduler's tick, so a daemon killed just after its
 * ack would lose the done. Each accepted done is therefore appended to
 * `dones.jsonl` in the runtime dir before it is applied and acked (a write(2)
 * reaches the kernel, which keeps it when the process dies, kill -9 included),
 * with the stream's last value and start time, and a daemon starting on that
 * dir ends those streams again as they were, for what is left of their
 * retention window, so that re-subscribing watchers learn the outcome. A done
 * that cannot be written is refused (`journal_failed`) and not applied: the
 * worker keeps it and sends it again.
 *
 * The ack also waits for the disk (a power loss): the worker socket holds the
 * replies of a turn of the event loop that journaled a done until `sync` has
 * returned. That is a group commit: one fdatasync, off the event loop, for
 * every done journaled until it starts; the dones journaled while it runs
 * wait for the next one, so the syncs grow with the load instead of their number.
 *
 * Shared fairly: the dones of one worker connection may hold at most a
 * quarter of `maxBytes` (JOURNAL_SHARE_DIVISOR) within the retention window,
 * so that a worker flooding long dones is refused on its own and the others'
 * dones are still taken.
 *
 * Bounded in bytes: the file holds at most `maxBytes`, and is rewritten with
 * only the dones still within the retention window when its dead lines
 * outweigh its live ones, when it would pass the cap, and when its oldest
 * done expires. It is read back line by line, never as one string; every line
 * is checked against the journal's schema, and a file that cannot be read is
 * renamed aside, never deleted.
 */
import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
// The schema (zod) is loaded only when there is a journal to read: a daemon starts without zod.
import type { JournalLine, journalLineSchema } from '../protocol/frames.js';
import { BridgeError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';

export type { JournalLine };

/** The longest line read back: a line of the largest done and last value, escaped, fits. */
const MAX_LINE_BYTES = 1024 * 1024;
/** Below this size the file is never rewritten for its dead lines alone. */
const COMPACT_MIN_BYTES = 1024 * 1024;
/** The expiry check runs at most this often. */
const EXPIRY_MIN_INTERVAL_MS = 1000;
/** Refused lines named one by one in the log; the rest are counted. */
const LOGGED_REFUSALS = 5;
/** One connection's dones may hold at most maxBytes / this of the journal at a time. */
export const JOURNAL_SHARE_DIVISOR = 4;
/**
 * A full journal is rewritten for a done once its expired lines make room for it and reach
 * maxBytes / this: a file at the cap is not rewritten whole for every line that expires.
 */
const COMPACT_AT_CAP_DIVISOR = 64;

export function doneJournalPath(runtimeDir: string): string {
  return join(runtimeDir, 'dones.jsonl');
}

export interface DoneJournalOptions {
  readonly path: string;
  readonly retentionMs: number;
  /** The most bytes the file may hold (--max-journal-bytes). */
  readonly maxBytes: number;
  readonly log: Logger;
  /** Epoch milliseconds: the daemon's clock, the one its streams' times are read from. */
  readonly clock?: (() => number) | undefined;
}

export interface JournalFigures {
  failing: boolean;
  lastError?: string;
  bytes: number;
  dones: number;
  recovered: number;
  refusedLines: number;
  writeFailures: number;
}

interface Entry {
  readonly at: number;
  readonly text: string;
  /** UTF-8 bytes with the newline. */
  readonly bytes: number;
  /** The connection that sent it (none for a done an earlier daemon journaled). */
  readonly owner: number | undefined;
}

export class DoneJournal {
  readonly #path: string;
  readonly #retentionMs: number;
  readonly #maxBytes: number;
  readonly #log: Logger;
  readonly #clock: () => number;
  /** Dones still within the retention window, oldest first, as written. */
  #recent: Entry[] = [];
  /** Index of the first entry of #recent still live (expired ones are dropped lazily). */
  #first = 0;
  #liveBytes = 0;
  /** Live bytes per connection, for the share of each (JOURNAL_SHARE_DIVISOR). */
  readonly #ownerBytes = new Map<number, number>();
  /** Connections told (once, in the log) that their share is used up. */
  readonly #overShare = new Set<number>();
  /** The size of the file: live lines, expired ones not yet compacted away. */
  #fileBytes = 0;
  #fd: number | undefined;
  /** Dones appended since the last sync started. */
  #unsynced = 0;
  /** fdatasyncs in flight, and the descriptors a rewrite retired meanwhile (closed once none is). */
  #syncing = 0;
  #retired: number[] = [];
  #expiryTimer: NodeJS.Timeout | undefined;
  #lastError: string | undefined;
  #recovered = 0;
  #refusedLines = 0;
  #writeFailures = 0;

  constructor(options: DoneJournalOptions) {
    this.#path = options.path;
    this.#retentionMs = options.retentionMs;
    this.#maxBytes = options.maxBytes;
    this.#log = options.log;
    this.#clock = options.clock ?? Date.now;
  }

  get path(): string {
    return this.#path;
  }

  /**
   * Reads what an earlier daemon on this dir acknowledged and still within the retention
   * window, line by line, and rewrites the journal to just those. A line that fails the
   * schema, is too long or is dated after now is refused, counted and logged; a torn last
   * line (a write cut short: no newline, and not a whole line) is skipped. A file that cannot be read is renamed aside and
   * logged. Throws a BridgeError (`start_failed`) when the journal cannot be rewritten.
   */
  async recover(): Promise<JournalLine[]> {
    const now = this.#clock();
    const oldest = now - this.#retentionMs;
    const recovered: JournalLine[] = [];
    const refusals: string[] = [];
    let fd: number | undefined;
    try {
      fd = openSync(this.#path, 'r');
      const { journalLineSchema: schema } = await import('../protocol/frames.js');
      let number = 0;
      for (const line of readLines(fd, MAX_LINE_BYTES)) {
        number++;
        // A last line without its newline is whole only if it passes: a cut never ends in a whole line.
        const tail = line.kind === 'torn' ? line.text : undefined;
        if (
          line.kind === 'torn' &&
          (tail === undefined || typeof checkLine(schema, tail, now) === 'string')
        ) {
          this.#log.warn(
            `done journal: the last line of ${this.#path} is cut short (a write the daemon did not finish); skipped`,
          );
          continue;
        }
        if (line.kind === 'too_long') {
          refusals.push(`line ${number}: longer than ${MAX_LINE_BYTES} bytes`);
          continue;
        }
        const text = line.kind === 'line' ? line.text : (tail as string);
        const checked = checkLine(schema, text, now);
        if (typeof checked === 'string') {
          refusals.push(`line ${number}: ${checked}`);
          continue;
        }
        if (checked.at < oldest) continue;
        recovered.push(checked);
        this.#keep(checked.at, text, undefined);
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#setAside(error as Error);
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    if (refusals.length > 0) {
      this.#refusedLines = refusals.length;
      const named = refusals.slice(0, LOGGED_REFUSALS).join('; ');
      const more =
        refusals.length > LOGGED_REFUSALS ? `; and ${refusals.length - LOGGED_REFUSALS} more` : '';
      this.#log.error(
        `done journal: refused ${refusals.length} line(s) of ${this.#path} that are not dones this daemon wrote (${named}${more}); they are not replayed`,
      );
    }
    this.#recovered = recovered.length;
    const failure = this.#rewrite();
    if (failure !== undefined) {
      throw new BridgeError(
        'start_failed',
        `the daemon could not rewrite its done journal ${this.#path} at start (${failure}): free space on the file system of the runtime directory, or move the file aside (its ${recovered.length} acked dones are then not replayed)`,
      );
    }
    if (recovered.length > 0)
      this.#log.info(`done journal: replayed ${recovered.length} acked done(s) from ${this.#path}`);
    this.#scheduleExpiry();
    return recovered;
  }

  /**
   * Appends one accepted done of connection `owner`; returns once the kernel has it, or the
   * reason it could not be written (the done must then be refused). Call before the done is
   * applied and acked.
   */
  record(line: JournalLine, owner: number): string | undefined {
    const text = JSON.stringify(line);
    const bytes = Buffer.byteLength(text) + 1;
    this.#expire();
    const share = Math.floor(this.#maxBytes / JOURNAL_SHARE_DIVISOR);
    const held = this.#ownerBytes.get(owner) ?? 0;
    if (held + bytes > share) return this.#overOwnShare(owner, held, bytes, share);
    const over = this.#fileBytes + bytes - this.#maxBytes;
    const expired = this.#fileBytes - this.#liveBytes;
    const enoughExpired = Math.ceil(this.#maxBytes / COMPACT_AT_CAP_DIVISOR);
    if (over > 0 && expired >= over && expired >= enoughExpired) {
      const failure = this.#rewrite();
      if (failure !== undefined) return this.#failed(failure);
    }
    if (this.#fileBytes + bytes > this.#maxBytes) {
      const waiting =
        this.#fileBytes > this.#liveBytes
          ? ` and ${this.#fileBytes - this.#liveBytes} of expired ones (the file is rewritten without them once they make room and reach ${enoughExpired})`
          : '';
      return this.#failed(
        `it is full: ${this.#liveBytes} bytes of dones within the retention window${waiting}, and this one (${bytes} bytes) would pass --max-journal-bytes ${this.#maxBytes}`,
      );
    }
    try {
      this.#append(`${text}\n`);
    } catch (error) {
      return this.#failed(describe(error));
    }
    this.#lastError = undefined;
    this.#unsynced++;
    this.#keep(line.at, text, owner);
    if (
      this.#fileBytes >= COMPACT_MIN_BYTES &&
      this.#fileBytes - this.#liveBytes > this.#liveBytes
    ) {
      const failure = this.#rewrite();
      if (failure !== undefined) this.#log.warn(`done journal: compaction failed: ${failure}`);
    }
    this.#scheduleExpiry();
    return undefined;
  }

  /**
   * Starts one fdatasync (on libuv's thread pool) covering every done
   * recorded so far; `synced` gets how many once it has returned (an error:
   * they are written, not known to be on disk). Acks wait for it.
   *
   * A failed fdatasync (EIO) may have dropped the written pages with the error
   * (Linux clears both), so the dones would be lost without a power loss. They
   * are applied already, so they cannot be refused; the journal has every live
   * line in memory, so it writes them again to a new file, syncs that and
   * renames it into place before the acks go: only when that fails too does
   * `synced` get the error.
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
      if (error === null) {
        synced(null, dones);
        return;
      }
      const failure = this.#rewrite();
      if (failure === undefined) {
        this.#log.warn(
          `done journal: fdatasync of ${this.#path} failed (${describe(error)}); wrote its ${this.#recent.length - this.#first} live done(s) again to a new file, synced it and put it in place before the acks`,
        );
        synced(null, dones);
      } else {
        this.#failed(
          `fdatasync failed (${describe(error)}) and writing the journal again failed too: ${failure}`,
        );
        synced(error, dones);
      }
    });
  }

  /**
   * The same, on this thread, at once: for a connection that closes, or a daemon that stops.
   * A sync in flight covers dones whose acks its caller lets go now, so it counts: they are on
   * disk only once this one has returned too.
   */
  syncNow(): void {
    const dones = this.#unsynced;
    this.#unsynced = 0;
    if ((dones > 0 || this.#syncing > 0) && this.#fd !== undefined) fdatasyncSync(this.#fd);
  }

  figures(): JournalFigures {
    const figures: JournalFigures = {
      failing: this.#lastError !== undefined,
      bytes: this.#fileBytes,
      dones: this.#recent.length - this.#first,
      recovered: this.#recovered,
      refusedLines: this.#refusedLines,
      writeFailures: this.#writeFailures,
    };
    if (this.#lastError !== undefined) figures.lastError = this.#lastError;
    return figures;
  }

  close(): void {
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    this.#closeFile();
  }

  #closeFile(): void {
    // A sync in flight still uses the descriptor: it is closed when the sync returns.
    if (this.#fd !== undefined) {
      if (this.#syncing > 0) this.#retired.push(this.#fd);
      else closeSync(this.#fd);
    }
    this.#fd = undefined;
  }

  #keep(at: number, text: string, owner: number | undefined): void {
    const bytes = Buffer.byteLength(text) + 1;
    this.#recent.push({ at, text, bytes, owner });
    this.#liveBytes += bytes;
    if (owner !== undefined)
      this.#ownerBytes.set(owner, (this.#ownerBytes.get(owner) ?? 0) + bytes);
  }

  /** A done refused for its connection's share alone: the journal is not failing, so not #failed. */
  #overOwnShare(owner: number, held: number, bytes: number, share: number): string {
    if (!this.#overShare.has(owner)) {
      this.#overShare.add(owner);
      this.#log.warn(
        `done journal: worker connection ${owner} holds ${held} bytes of dones within the retention window, its share (a quarter of --max-journal-bytes ${this.#maxBytes}); its further dones are refused with journal_failed until earlier ones expire, and other connections' are still taken`,
      );
    }
    return `the daemon did not journal this done (${bytes} bytes), so it was not applied: this connection's dones within the retention window already hold ${held} bytes, and one connection may hold at most ${share} (a quarter of --max-journal-bytes ${this.#maxBytes}) so that others' dones are still taken. Send it again after earlier dones expire (--retention-ms), or send shorter messages`;
  }

  /** Forgets the dones past their retention (their lines stay in the file until a rewrite). */
  #expire(): void {
    const oldest = this.#clock() - this.#retentionMs;
    while (this.#first < this.#recent.length && (this.#recent[this.#first] as Entry).at < oldest) {
      const { bytes, owner } = this.#recent[this.#first] as Entry;
      this.#liveBytes -= bytes;
      if (owner !== undefined) {
        const left = (this.#ownerBytes.get(owner) ?? 0) - bytes;
        if (left > 0) this.#ownerBytes.set(owner, left);
        else {
          this.#ownerBytes.delete(owner);
          this.#overShare.delete(owner);
        }
      }
      this.#first++;
    }
    if (this.#first > 1024 && this.#first * 2 > this.#recent.length) {
      this.#recent = this.#recent.slice(this.#first);
      this.#first = 0;
    }
  }

  /** Writes whole or not at all: a failed write is cut back off, so no torn line precedes the next. */
  #append(text: string): void {
    if (this.#fd === undefined) {
      const fd = openSync(this.#path, 'a', 0o600);
      try {
        // The file's name must survive a power loss too (rare: at the first done and after a rewrite).
        syncDirectory(dirname(this.#path));
        this.#fileBytes = fstatSync(fd).size;
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      this.#fd = fd;
    }
    try {
      writeWhole(this.#fd, text);
    } catch (error) {
      try {
        ftruncateSync(this.#fd, this.#fileBytes);
      } catch {
        // The tail stays torn: a new file starts at the next done, the torn line is refused at recovery.
        this.#closeFile();
      }
      throw error;
    }
    this.#fileBytes += Buffer.byteLength(text);
  }

  #failed(reason: string): string {
    this.#writeFailures++;
    if (this.#lastError === undefined)
      this.#log.error(
        `done journal: cannot write to ${this.#path}: ${reason}; dones are refused with journal_failed (their workers keep them and retry) until a write succeeds`,
      );
    this.#lastError = reason;
    return `the daemon could not write the done to its journal ${this.#path} (${reason}), so it was not applied: send it again later`;
  }

  /**
   * Keeps only the dones within the retention window, written whole to a new file renamed
   * into place; returns why it failed, leaving the old file as it was.
   */
  #rewrite(): string | undefined {
    this.#expire();
    this.#recent = this.#recent.slice(this.#first);
    this.#first = 0;
    if (this.#recent.length === 0) {
      // Closed first: Windows refuses to remove or replace a file that is open.
      this.#closeFile();
      try {
        unlinkSync(this.#path);
      } catch {}
      this.#fileBytes = 0;
      this.#unsynced = 0;
      return undefined;
    }
    const temporary = `${this.#path}.${process.pid}.tmp`;
    try {
      const fd = openSync(temporary, 'w', 0o600);
      try {
        // In pieces of about 1 MiB: never one string of the whole journal.
        let piece: string[] = [];
        let pieceBytes = 0;
        for (const entry of this.#recent) {
          piece.push(entry.text, '\n');
          pieceBytes += entry.bytes;
          if (pieceBytes >= COMPACT_MIN_BYTES) {
            writeWhole(fd, piece.join(''));
            piece = [];
            pieceBytes = 0;
          }
        }
        if (piece.length > 0) writeWhole(fd, piece.join(''));
        // Whole on disk before it replaces the old file, or a power loss could leave neither.
        // fsync, with the new file's metadata, and not the call that may just have failed (sync).
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      // Windows (EPERM) does not replace a file that is open; the next append opens the new one.
      this.#closeFile();
      renameSync(temporary, this.#path);
    } catch (error) {
      try {
        unlinkSync(temporary);
      } catch {}
      return describe(error);
    }
    this.#fileBytes = this.#liveBytes;
    try {
      syncDirectory(dirname(this.#path));
    } catch {}
    // Every recent done is in the new file, on disk.
    this.#unsynced = 0;
    return undefined;
  }

  /** Compacts when the oldest done expires, so a journal nobody writes to shrinks too. */
  #scheduleExpiry(): void {
    if (this.#expiryTimer !== undefined || this.#first >= this.#recent.length) return;
    const oldest = this.#recent[this.#first] as Entry;
    const delay = Math.max(EXPIRY_MIN_INTERVAL_MS, oldest.at + this.#retentionMs - this.#clock());
    this.#expiryTimer = setTimeout(() => {
      this.#expiryTimer = undefined;
      this.#expire();
      const dead = this.#fileBytes - this.#liveBytes;
      if (this.#liveBytes === 0 || dead > this.#liveBytes) {
        const failure = this.#rewrite();
        if (failure !== undefined) this.#log.warn(`done journal: compaction failed: ${failure}`);
      }
      this.#scheduleExpiry();
    }, delay);
    this.#expiryTimer.unref();
  }

  /** A journal that cannot be read is kept, under a name of its own, and said so. */
  #setAside(error: Error): void {
    const aside = `${this.#path}.unreadable-${new Date(this.#clock()).toISOString().replaceAll(':', '-')}`;
    try {
      renameSync(this.#path, aside);
    } catch (renameError) {
      throw new BridgeError(
        'start_failed',
        `the daemon cannot read its done journal ${this.#path} (${describe(error)}) nor move it aside (${describe(renameError)}): fix its owner and mode (ls -l ${this.#path}), or move it away yourself`,
      );
    }
    this.#log.error(
      `done journal: cannot read ${this.#path} (${describe(error)}): moved it to ${aside}, and the acked dones in it are not replayed; check its owner and mode (ls -l ${aside}), and to replay it, move it back to ${this.#path} and restart the daemon within the retention window`,
    );
  }
}

type ReadLine =
  | { kind: 'line'; text: string }
  | { kind: 'too_long' }
  /** The end of the file without a newline: its text, unless it was too long to hold. */
  | { kind: 'torn'; text: string | undefined };

/** The file's lines, read 64 KiB at a time; a line over `maxBytes` is skipped, not held. */
function* readLines(fd: number, maxBytes: number): Generator<ReadLine> {
  const chunk = Buffer.allocUnsafe(64 * 1024);
  let parts: Buffer[] = [];
  let partBytes = 0;
  let tooLong = false;
  for (;;) {
    const read = readSync(fd, chunk, 0, chunk.length, null);
    if (read === 0) break;
    const data = chunk.subarray(0, read);
    let start = 0;
    while (start < read) {
      const newline = data.indexOf(0x0a, start);
      const end = newline === -1 ? read : newline;
      if (!tooLong) {
        if (partBytes + end - start > maxBytes) {
          tooLong = true;
          parts = [];
          partBytes = 0;
        } else if (end > start) {
          parts.push(Buffer.from(data.subarray(start, end)));
          partBytes += end - start;
        }
      }
      if (newline === -1) break;
      if (tooLong) yield { kind: 'too_long' };
      else if (partBytes > 0) yield { kind: 'line', text: Buffer.concat(parts).toString('utf8') };
      parts = [];
      partBytes = 0;
      tooLong = false;
      start = newline + 1;
    }
  }
  if (tooLong) yield { kind: 'torn', text: undefined };
  else if (partBytes > 0) yield { kind: 'torn', text: Buffer.concat(parts).toString('utf8') };
}

/** A line as this daemon's journal writes it, or why not. */
function checkLine(
  schema: typeof journalLineSchema,
  text: string,
  now: number,
): JournalLine | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not JSON';
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field =
      issue === undefined || issue.path.length === 0 ? 'the line' : issue.path.join('.');
    return `${field}: ${issue?.message ?? 'invalid'}`;
  }
  if (parsed.data.at > now)
    return `at ${parsed.data.at} is after this daemon's clock (${Math.floor(now)})`;
  return parsed.data;
}

function writeWhole(fd: number, text: string): void {
  const buffer = Buffer.from(text);
  for (let written = 0; written < buffer.length; )
    written += writeSync(fd, buffer, written, buffer.length - written);
}

function describe(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  const message = (error as Error).message ?? String(error);
  return code !== undefined && !message.startsWith(code) ? `${code}: ${message}` : message;
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
