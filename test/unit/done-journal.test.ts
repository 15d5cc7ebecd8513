/**
 * The done journal on real files: what it reads back (every line checked, line by line), what it
 * refuses, what it keeps of a file it cannot read, and its bound in bytes.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DoneJournal, doneJournalPath, type JournalLine } from '../../src/daemon/done-journal.js';
import type { Logger } from '../../src/shared/log.js';
import { cleanupAll, tempDir } from '../helpers/daemon.js';

afterEach(cleanupAll);

const RETENTION_MS = 60_000;

function setup(options: { maxBytes?: number } = {}) {
  const dir = tempDir('mcp-progress-journal-');
  const path = doneJournalPath(dir);
  const logged: string[] = [];
  const log: Logger = {
    error: (m) => logged.push(`error: ${m}`),
    warn: (m) => logged.push(`warn: ${m}`),
    info: (m) => logged.push(`info: ${m}`),
    debug: () => {},
  };
  let now = 1_800_000_000_000;
  const open = () =>
    new DoneJournal({
      path,
      retentionMs: RETENTION_MS,
      maxBytes: options.maxBytes ?? 64 * 1024 * 1024,
      log,
      clock: () => now,
    });
  return {
    dir,
    path,
    logged,
    open,
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const done = (at: number, fields: Partial<JournalLine> = {}): JournalLine => ({
  v: 1,
  at,
  startedAt: at - 1000,
  progressToken: 'job',
  status: 'ok',
  ...fields,
});

describe('done journal: reading back', () => {
  it('replays the lines within the retention window, with their last value and times', async () => {
    const { path, open, now } = setup();
    const kept = done(now() - 1000, { last: { progress: 2, total: 2, message: 'two' } });
    writeFileSync(
      path,
      [done(now() - RETENTION_MS - 1, { progressToken: 'expired' }), kept]
        .map((line) => `${JSON.stringify(line)}\n`)
        .join(''),
    );
    const journal = open();
    expect(await journal.recover()).toEqual([kept]);
    expect(journal.figures()).toMatchObject({ recovered: 1, refusedLines: 0, dones: 1 });
    // Rewritten to what is still within the window.
    expect(readFileSync(path, 'utf8')).toBe(`${JSON.stringify(kept)}\n`);
    journal.close();
  });

  it('refuses, counts and logs every line that is not a done it wrote; keeps the good ones around them', async () => {
    const { path, open, now, logged } = setup();
    const at = now() - 1000;
    const good = [done(at, { progressToken: 'a' }), done(at, { progressToken: 7 })];
    const lines = [
      JSON.stringify(good[0]),
      JSON.stringify({ ...done(at), progressToken: { object: true } }),
      JSON.stringify({ ...done(at), status: 'bogus' }),
      JSON.stringify({ ...done(at), progressToken: 'x'.repeat(100_000) }),
      JSON.stringify(done(now() + 365 * 24 * 3600_000)),
      'not json {',
      // Longer than any line the journal writes: skipped as it is read, never held whole.
      JSON.stringify({ ...done(at), message: 'y'.repeat(2 * 1024 * 1024) }),
      JSON.stringify({ ...done(at), startedAt: at + 1 }),
      JSON.stringify({ ...done(at), extra: 1 }),
      JSON.stringify(good[1]),
    ];
    writeFileSync(path, `${lines.join('\n')}\n`);
    const journal = open();
    expect(await journal.recover()).toEqual(good);
    expect(journal.figures()).toMatchObject({ recovered: 2, refusedLines: 8 });
    const error = logged.find((line) => line.startsWith('error: done journal: refused 8 line(s)'));
    expect(error).toContain(path);
    expect(error).toContain('line 2: progressToken');
    expect(error).toContain('line 3: status');
    expect(error).toContain('line 4: progressToken');
    expect(error).toContain("line 5: at 1831536000000 is after this daemon's clock");
    expect(error).toContain('line 6: not JSON');
    expect(error).toContain('and 3 more');
    expect(readFileSync(path, 'utf8')).toBe(
      good.map((line) => `${JSON.stringify(line)}\n`).join(''),
    );
    journal.close();
  });

  it('skips a torn last line (a write cut short) with a warning, not as a refusal', async () => {
    const { path, open, now, logged } = setup();
    const good = done(now() - 10);
    writeFileSync(path, `${JSON.stringify(good)}\n{"v":1,"at":`);
    const journal = open();
    expect(await journal.recover()).toEqual([good]);
    expect(journal.figures().refusedLines).toBe(0);
    expect(logged.some((line) => line.startsWith('warn: done journal: the last line'))).toBe(true);
    journal.close();
  });

  it('takes a whole last line that only lacks its newline (written by hand, or cut just before it)', async () => {
    const { path, open, now } = setup();
    const lines = [
      done(now() - 20, { progressToken: 'a' }),
      done(now() - 10, { progressToken: 'b' }),
    ];
    writeFileSync(path, lines.map((line) => JSON.stringify(line)).join('\n'));
    const journal = open();
    expect(await journal.recover()).toEqual(lines);
    // Rewritten whole: the next line does not run on from it.
    expect(readFileSync(path, 'utf8')).toBe(
      lines.map((line) => `${JSON.stringify(line)}\n`).join(''),
    );
    journal.close();
  });

  it('a journal it cannot read is renamed aside, never deleted, and the error names it', async () => {
    const { dir, path, open, logged } = setup();
    // A directory where the file should be: open succeeds, read fails (EISDIR), even for root.
    mkdirSync(path);
    writeFileSync(join(path, 'kept'), 'evidence');
    const journal = open();
    expect(await journal.recover()).toEqual([]);
    const aside = readdirSync(dir).filter((name) => name.startsWith('dones.jsonl.unreadable-'));
    expect(aside).toHaveLength(1);
    expect(readFileSync(join(dir, aside[0] as string, 'kept'), 'utf8')).toBe('evidence');
    const error = logged.find((line) => line.startsWith('error: done journal: cannot read'));
    expect(error).toContain('EISDIR');
    expect(error).toContain(join(dir, aside[0] as string));
    expect(error).toContain('move it back');
    // The journal works on: a new file takes the next done.
    expect(journal.record(done(Date.now()), 1)).toBeUndefined();
    expect(statSync(path).isFile()).toBe(true);
    journal.close();
  });
});

describe('done journal: bounded in bytes', () => {
  const message = '\u0001'.repeat(4096); // 24 KiB once escaped: the attack's long messages

  it('refuses a done past --max-journal-bytes of live dones, and takes dones again once old ones expire', async () => {
    const maxBytes = 1024 * 1024;
    const { path, open, advance, now } = setup({ maxBytes });
    const journal = open();
    await journal.recover();
    let accepted = 0;
    let failure: string | undefined;
    for (let i = 0; i < 100 && failure === undefined; i++) {
      // Dones of eight connections: none passes its own share before the journal is full.
      failure = journal.record(done(now(), { progressToken: `job-${i}`, message }), i % 8);
      if (failure === undefined) accepted++;
    }
    expect(failure).toContain('--max-journal-bytes 1048576');
    expect(failure).toContain('send it again later');
    expect(accepted).toBeGreaterThan(30);
    expect(statSync(path).size).toBeLessThanOrEqual(maxBytes);
    expect(journal.figures()).toMatchObject({ failing: true, writeFailures: 1 });
    // Past the retention window the file is compacted and takes the done.
    advance(RETENTION_MS + 1);
    expect(journal.record(done(now(), { progressToken: 'later', message }), 1)).toBeUndefined();
    expect(journal.figures()).toMatchObject({ failing: false, dones: 1 });
    expect(statSync(path).size).toBeLessThan(30 * 1024);
    journal.close();
  });

  it('full, with expired lines that make room: compacts and takes the done, however few they are', async () => {
    const maxBytes = 1024 * 1024;
    const { path, open, advance, now } = setup({ maxBytes });
    const journal = open();
    await journal.recover();
    // Two dones that will expire, then (half a window later) live ones up to the cap.
    for (let i = 0; i < 2; i++)
      expect(
        journal.record(done(now(), { progressToken: `old-${i}`, message }), i),
      ).toBeUndefined();
    advance(RETENTION_MS / 2);
    let failure: string | undefined;
    for (let i = 0; i < 100 && failure === undefined; i++)
      failure = journal.record(done(now(), { progressToken: `live-${i}`, message }), i % 8);
    expect(failure).toContain('would pass --max-journal-bytes 1048576');
    // The two old ones expire: about 48 KiB of expired lines, far less than a quarter of the cap.
    advance(RETENTION_MS / 2 + 1);
    expect(journal.record(done(now(), { progressToken: 'after', message }), 1)).toBeUndefined();
    expect(journal.figures()).toMatchObject({ failing: false });
    expect(statSync(path).size).toBeLessThanOrEqual(maxBytes);
    expect(readFileSync(path, 'utf8')).not.toContain('old-0');
    journal.close();
  });

  it('one connection holds at most a quarter of it: a flooding worker is refused, the others are not', async () => {
    const maxBytes = 1024 * 1024;
    const { open, advance, now } = setup({ maxBytes });
    const journal = open();
    await journal.recover();
    const flooder = 7;
    let accepted = 0;
    let failure: string | undefined;
    for (let i = 0; i < 100 && failure === undefined; i++) {
      failure = journal.record(done(now(), { progressToken: `flood-${i}`, message }), flooder);
      if (failure === undefined) accepted++;
    }
    expect(failure).toContain(
      'one connection may hold at most 262144 (a quarter of --max-journal-bytes 1048576)',
    );
    expect(failure).toContain('Send it again after earlier dones expire');
    // About a quarter of the journal: 24 KiB lines.
    expect(accepted).toBeGreaterThanOrEqual(9);
    expect(accepted).toBeLessThanOrEqual(11);
    // The journal is not failing: another connection's done is taken, and three quarters are left.
    expect(journal.figures()).toMatchObject({ failing: false, writeFailures: 0 });
    for (let i = 0; i < 2 * accepted; i++)
      expect(
        journal.record(done(now(), { progressToken: `other-${i}`, message }), 8 + (i % 2)),
      ).toBeUndefined();
    // Once the flooder's dones expire, its share is free again.
    advance(RETENTION_MS + 1);
    expect(
      journal.record(done(now(), { progressToken: 'flood-again', message }), flooder),
    ).toBeUndefined();
    journal.close();
  });

  it('compacts by size: expired lines never make up most of a file over 1 MiB', async () => {
    const { path, open, advance, now } = setup();
    const journal = open();
    await journal.recover();
    let largest = 0;
    for (let i = 0; i < 400; i++) {
      expect(
        journal.record(done(now(), { progressToken: `job-${i}`, message }), 1),
      ).toBeUndefined();
      largest = Math.max(largest, statSync(path).size);
      // One done every 3 s: 20 of them within the 60 s window at any time.
      advance(RETENTION_MS / 20);
    }
    // 20 dones live at a time (about 480 KiB): the file never grows past twice that plus a line.
    expect(largest).toBeLessThan(2 * 1024 * 1024);
    journal.close();
  });
});

describe('done journal: a write that fails', () => {
  it('answers why, and a new file takes the next done once the directory is writable again', async () => {
    const { dir, path, open, now } = setup();
    const journal = open();
    await journal.recover();
    // The directory gone: the open of the journal fails (ENOENT), as EROFS or EMFILE would.
    const { rmSync } = await import('node:fs');
    rmSync(dir, { recursive: true });
    const failure = journal.record(done(now()), 1);
    expect(failure).toContain('ENOENT');
    expect(failure).toContain(path);
    expect(journal.figures()).toMatchObject({ failing: true, writeFailures: 1 });
    expect(journal.figures().lastError).toContain('ENOENT');
    mkdirSync(dir, { mode: 0o700 });
    expect(journal.record(done(now()), 1)).toBeUndefined();
    expect(existsSync(path)).toBe(true);
    expect(journal.figures().failing).toBe(false);
    journal.close();
  });
});
