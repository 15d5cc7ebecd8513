/** What tail draws, from notifications and a clock: bars, counters, rate, ETA, statuses, fitting the screen. */
import { describe, expect, it } from 'vitest';
import {
  bar,
  formatDuration,
  formatLine,
  formatRow,
  formatScreen,
  rateOf,
  TailModel,
} from '../../src/cli/tail-view.js';
import {
  clip,
  codePointWidth,
  displayWidth,
  padEnd,
  printable,
} from '../../src/cli/terminal-text.js';
import type { Notification } from '../../src/protocol/notifications.js';

const progress = (
  token: string | number,
  value: number,
  total?: number,
  message?: string,
): Notification => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: {
    progressToken: token,
    progress: value,
    ...(total === undefined ? {} : { total }),
    ...(message === undefined ? {} : { message }),
  },
});
const done = (
  token: string,
  status: 'ok' | 'error' | 'cancelled' | 'abandoned',
  message?: string,
): Notification => ({
  jsonrpc: '2.0',
  method: 'notifications/progress/done',
  params: { progressToken: token, status, ...(message === undefined ? {} : { message }) },
});

describe('the tail view', () => {
  it('draws a bar with eighths, percent, counts, rate and ETA when the total is known', () => {
    const model = new TailModel();
    model.apply(progress('render', 10, 100), 0);
    const row = model.apply(progress('render', 30, 100, 'frame 30'), 2000);
    expect(rateOf(row, 2000)).toBe(10);
    expect(formatRow(row, 8, 200, 2000)).toBe(
      'render    [██████░░░░░░░░░░░░░░]   30%  30/100  10.0/s  ETA 0:07  frame 30',
    );
    expect(bar(0.5, 4)).toBe('██░░');
    expect(bar(1 / 16, 2)).toBe('▏░');
    expect(bar(2, 3)).toBe('███');
  });

  it('shows a counter and a rate without a total, and no ETA', () => {
    const model = new TailModel();
    model.apply(progress(7, 100), 0);
    const row = model.apply(progress(7, 160), 60_000);
    expect(formatLine(row, 60_000)).toBe('#7  160  1.0/s');
    model.apply(progress('slow', 1), 0);
    expect(formatLine(model.apply(progress('slow', 2), 60_000), 60_000)).toBe('slow  2  1.0/min');
  });

  it('shows a finished stream with its status and the done message, without rate or ETA', () => {
    const model = new TailModel();
    model.apply(progress('job', 1, 4), 0);
    model.apply(progress('job', 2, 4), 1000);
    expect(formatLine(model.apply(done('job', 'error', 'disk full'), 2000), 2000)).toBe(
      'job   50%  2/4  ✗ error  disk full',
    );
    expect(formatLine(model.apply(done('never-started', 'abandoned'), 0), 0)).toBe(
      'never-started  ? abandoned',
    );
    expect(formatLine(model.follow('waiting-one'), 60_000)).toBe('waiting-one  waiting');
  });

  it("smooths the rate with the daemon's estimator: an old burst fades", () => {
    const model = new TailModel();
    model.apply(progress('r', 0), 0);
    model.apply(progress('r', 1000), 1000);
    const row = model.apply(progress('r', 1100), 21_000);
    // 1000/s at the start, 5/s since: the burst is mostly forgotten 20 s on.
    const rate = rateOf(row, 21_000) as number;
    expect(rate).toBeGreaterThan(5);
    expect(rate).toBeLessThan(10);
  });

  it('lets the rate fall once a value is overdue, and shows a stalled stream without rate or ETA', () => {
    const model = new TailModel();
    model.apply(progress('r', 10, 100), 0);
    const row = model.apply(progress('r', 30, 100), 2000);
    expect(formatLine(row, 2000)).toBe('r   30%  30/100  10.0/s  ETA 0:07');
    // Within the stream's usual interval (2 s) nothing changes.
    expect(formatLine(row, 4000)).toBe('r   30%  30/100  10.0/s  ETA 0:07');
    // Overdue: the rate falls and the ETA grows.
    expect(rateOf(row, 11_000) as number).toBeLessThan(3);
    expect(formatLine(row, 11_000)).toMatch(/^r {3}30% {2}30\/100 {2}2\.\d\/s {2}ETA 0:[3-4]\d$/);
    // Ten seconds after the last value the stream is stalled: no rate, no ETA.
    expect(formatLine(row, 12_001)).toBe('r   30%  30/100  stalled');
    expect(rateOf(row, 12_001)).toBeUndefined();
    expect(formatScreen(model.rows, 80, 24, 'connected', 60_000)[1]).toMatch(
      /^r {2}\[.*\] {3}30% {2}30\/100 {2}stalled$/,
    );
    // A new value ends the stall, at the slow rate of the long gap: per minute now.
    const moving = model.apply(progress('r', 40, 100), 20_000);
    expect(moving.lastValueAt).toBe(20_000);
    expect(formatLine(moving, 20_000)).toMatch(
      /^r {3}40% {2}40\/100 {2}[\d.]+\/min {2}ETA \d:\d\d$/,
    );
    // A finished stream shows its status, never stalled.
    model.apply(done('r', 'ok'), 20_000);
    expect(formatLine(moving, 100_000)).toBe('r   40%  40/100  ✓ ok');
    // One value and nothing since: no rate to show, then stalled.
    const once = model.apply(progress('once', 5), 0);
    expect(formatLine(once, 5000)).toBe('once  5');
    expect(formatLine(once, 10_001)).toBe('once  5  stalled');
  });

  it('a new stream under a known token starts a fresh row', () => {
    const model = new TailModel();
    model.follow('t', 1);
    model.apply(done('t', 'ok'), 0);
    expect(model.follow('t', 2).status).toBeUndefined();
  });

  it('fits the screen: rows are cut to the width, and the oldest finished rows go first when there are too many', () => {
    const model = new TailModel();
    model.apply(done('old-1', 'ok'), 0);
    model.apply(done('old-2', 'ok'), 0);
    model.apply(progress('live-1', 1), 0);
    model.apply(progress('live-2', 2, 10, 'x'.repeat(300)), 0);
    const lines = formatScreen(model.rows, 60, 5, 'connected', 0);
    // The row that does not fit is counted, never dropped silently.
    expect(lines[0]).toBe('mcp-progress tail: 2 running, 2 finished, +1 more not shown');
    expect(lines.slice(1).map((line) => line.split(' ')[0])).toEqual(['old-2', 'live-1', 'live-2']);
    for (const line of lines) expect(displayWidth(line)).toBeLessThanOrEqual(59);
    expect(formatScreen(model.rows, 60, 24, 'connected', 0)[0]).toBe(
      'mcp-progress tail: 2 running, 2 finished',
    );
    expect(formatScreen([], 80, 24, 'disconnected', 0)[0]).toBe(
      'mcp-progress tail: lost the daemon, reconnecting…',
    );
    expect(clip('abcdef', 4)).toBe('abc…');
    expect(formatDuration(3725)).toBe('1:02:05');
  });
});

describe('the screen header', () => {
  it('counts a stream that has sent nothing yet as waiting, not running', () => {
    const model = new TailModel();
    model.follow('not-yet');
    model.follow('also-not-yet');
    model.apply(progress('moving', 1, 10), 0);
    model.apply(done('over', 'ok'), 0);
    expect(formatScreen(model.rows, 80, 24, 'connected', 0)[0]).toBe(
      'mcp-progress tail: 1 running, 2 waiting, 1 finished',
    );
  });
});

describe('text on a terminal', () => {
  it('counts columns: wide and fullwidth characters and emoji take two, combining marks none', () => {
    expect(codePointWidth(0x61)).toBe(1); // a
    expect(codePointWidth(0xe9)).toBe(1); // é
    expect(codePointWidth(0x6f22)).toBe(2); // 漢
    expect(codePointWidth(0xac00)).toBe(2); // 가
    expect(codePointWidth(0x3042)).toBe(2); // あ
    expect(codePointWidth(0xff21)).toBe(2); // Ａ (fullwidth)
    expect(codePointWidth(0x3000)).toBe(2); // ideographic space
    expect(codePointWidth(0x1f680)).toBe(2); // 🚀
    expect(codePointWidth(0x231a)).toBe(2); // ⌚ (emoji presentation)
    expect(codePointWidth(0x0301)).toBe(0); // combining acute accent
    expect(codePointWidth(0x200d)).toBe(0); // zero width joiner
    expect(codePointWidth(0x2588)).toBe(1); // █, the bar
    expect(codePointWidth(0x2026)).toBe(1); // …
    expect(codePointWidth(0x1b)).toBe(0);

    expect(displayWidth('frame 7')).toBe(7);
    expect(displayWidth('漢字かな')).toBe(8);
    expect(displayWidth('e\u0301te\u0301')).toBe(3); // été, decomposed
    expect(displayWidth('ok 🚀 done')).toBe(10);
    expect(displayWidth('\u2764\ufe0f')).toBe(2); // ❤️: a text symbol with the emoji selector
    expect(displayWidth('[████░░]')).toBe(8);
  });

  it('clips and pads by columns, without splitting a character', () => {
    expect(clip('abcdef', 4)).toBe('abc…');
    expect(clip('abc', 3)).toBe('abc');
    expect(clip('漢字漢字', 8)).toBe('漢字漢字');
    expect(clip('漢字漢字', 7)).toBe('漢字漢…');
    // A wide character that would straddle the edge is left out, not split.
    expect(clip('漢字漢字', 6)).toBe('漢字…');
    expect(displayWidth(clip('漢字漢字', 6))).toBe(5);
    expect(clip('🚀🚀🚀', 4)).toBe('🚀…');
    expect(clip('e\u0301e\u0301e\u0301', 2)).toBe('e\u0301…');
    for (let columns = 1; columns < 30; columns++) {
      const text = `render 漢字 🚀 ok ${'字'.repeat(columns)}`;
      expect(displayWidth(clip(text, columns))).toBeLessThanOrEqual(columns);
    }
    expect(padEnd('漢', 4)).toBe('漢  ');
    expect(padEnd('abcdef', 4)).toBe('abcdef');
  });

  it('fits rows with wide text to the screen width', () => {
    const model = new TailModel();
    model.apply(progress('漢字-job', 3, 10, '処理中 🚀 '.repeat(20)), 0);
    model.apply(progress('ascii', 1, 10), 0);
    const lines = formatScreen(model.rows, 80, 24, 'connected', 0);
    for (const line of lines) expect(displayWidth(line)).toBeLessThanOrEqual(79);
    // Names are padded to the same width in columns, so the bars line up.
    const bars = lines.slice(1).map((line) => displayWidth(line.slice(0, line.indexOf('['))));
    expect(bars).toEqual([10, 10]); // 漢字-job is 8 columns, then two spaces
  });

  it('shows control characters from tokens and messages as visible symbols', () => {
    expect(printable('plain 漢字')).toBe('plain 漢字');
    expect(printable('a\x1b[2Jb\x07c\x08d\x7fe\x9bf\x00')).toBe('a␛[2Jb␇c␈d␡e\ufffdf␀');
    const model = new TailModel();
    model.apply(progress('evil\ntoken', 1, 2, 'clear\x1b[2J\x1b]0;title\x07 bell\x07\x08'), 0);
    const line = formatLine(model.get('evil\ntoken') ?? model.follow('x'), 0);
    expect(line).toBe('evil␊token   50%  1/2  clear␛[2J␛]0;title␇ bell␇␈');
    // Whitespace in a message still reads as a space; in a token it stays visible.
    model.apply(progress('t', 1, undefined, 'two\nlines\tand tab'), 0);
    expect(formatLine(model.get('t') ?? model.follow('x'), 0)).toBe('t  1  two lines and tab');
    const controls = (text: string) =>
      [...text].filter((char) => {
        const code = char.codePointAt(0) ?? 0;
        return code < 0x20 || (code >= 0x7f && code <= 0x9f);
      });
    for (const text of formatScreen(model.rows, 80, 24, 'connected', 0))
      expect(controls(text)).toEqual([]);
  });
});
