/** What tail draws, from notifications and a clock: bars, counters, rate, ETA, statuses, fitting the screen. */
import { describe, expect, it } from 'vitest';
import {
  bar,
  clip,
  formatDuration,
  formatLine,
  formatRow,
  formatScreen,
  rateOf,
  TailModel,
} from '../../src/cli/tail-view.js';
import type { Notification } from '../../src/router/notifications.js';

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
    expect(rateOf(row)).toBe(10);
    expect(formatRow(row, 8, 200)).toBe(
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
    expect(formatLine(row)).toBe('#7  160  1.0/s');
    model.apply(progress('slow', 1), 0);
    expect(formatLine(model.apply(progress('slow', 2), 60_000))).toBe('slow  2  1.0/min');
  });

  it('shows a finished stream with its status and the done message, without rate or ETA', () => {
    const model = new TailModel();
    model.apply(progress('job', 1, 4), 0);
    model.apply(progress('job', 2, 4), 1000);
    expect(formatLine(model.apply(done('job', 'error', 'disk full'), 2000))).toBe(
      'job   50%  2/4  ✗ error  disk full',
    );
    expect(formatLine(model.apply(done('never-started', 'abandoned'), 0))).toBe(
      'never-started  ? abandoned',
    );
    expect(formatLine(model.follow('waiting-one'))).toBe('waiting-one  waiting');
  });

  it('measures the rate over the last ten seconds', () => {
    const model = new TailModel();
    model.apply(progress('r', 0), 0);
    model.apply(progress('r', 1000), 1000);
    const row = model.apply(progress('r', 1100), 21_000);
    // The burst at the start is out of the window now.
    expect(rateOf(row)).toBe(5);
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
    const lines = formatScreen(model.rows, 60, 5, 'connected');
    expect(lines[0]).toBe('mcp-progress tail: 2 running, 2 finished');
    expect(lines.slice(1).map((line) => line.split(' ')[0])).toEqual(['old-2', 'live-1', 'live-2']);
    for (const line of lines) expect([...line].length).toBeLessThanOrEqual(59);
    expect(formatScreen([], 80, 24, 'disconnected')[0]).toBe(
      'mcp-progress tail: lost the daemon, reconnecting…',
    );
    expect(clip('abcdef', 4)).toBe('abc…');
    expect(formatDuration(3725)).toBe('1:02:05');
  });
});
