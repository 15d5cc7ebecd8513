/**
 * What `tail` shows: one row per stream, built from the notifications it
 * receives. Pure: notifications and a clock in, text out, so that the
 * formatting is tested without a terminal.
 */
import { RateEstimator } from '../daemon/rate-estimator.js';
import type { ProgressToken, StreamEndStatus } from '../protocol/frames.js';
import type { Notification } from '../protocol/notifications.js';
import { TAIL_STALLED_AFTER_MS } from '../shared/defaults.js';
import { clip, displayWidth, padEnd, printable } from './terminal-text.js';

const BAR_WIDTH = 20;
const PARTIAL_BLOCKS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'] as const;

const STATUS_MARK: Record<StreamEndStatus, string> = {
  ok: '✓ ok',
  error: '✗ error',
  cancelled: '⊘ cancelled',
  abandoned: '? abandoned',
};

export interface StreamRow {
  readonly token: ProgressToken;
  progress: number | undefined;
  total: number | undefined;
  message: string | undefined;
  status: StreamEndStatus | undefined;
  /** Its rate and ETA: the daemon's estimator, so that tail and the MCP tools agree. */
  readonly estimator: RateEstimator;
  /** When the last value arrived. */
  lastValueAt: number | undefined;
  /** The daemon's startedAt of the stream this row follows, when known. */
  startedAt: number | undefined;
  /** With a NATS backplane: the host whose worker publishes the stream, when the list said. */
  host?: string | undefined;
}

export class TailModel {
  readonly #rows = new Map<ProgressToken, StreamRow>();

  /** Starts (or restarts, for a new stream under a known token) the row of a token. */
  follow(token: ProgressToken, startedAt?: number): StreamRow {
    const existing = this.#rows.get(token);
    if (existing !== undefined && (startedAt === undefined || existing.startedAt === startedAt))
      return existing;
    return this.#fresh(token, startedAt);
  }

  #fresh(token: ProgressToken, startedAt: number | undefined): StreamRow {
    const row: StreamRow = {
      token,
      progress: undefined,
      total: undefined,
      message: undefined,
      status: undefined,
      estimator: new RateEstimator(),
      lastValueAt: undefined,
      startedAt,
    };
    this.#rows.delete(token);
    this.#rows.set(token, row);
    return row;
  }

  /** Whether anything (a value or the end) has arrived for the token's row. */
  hasNews(token: ProgressToken): boolean {
    const row = this.#rows.get(token);
    return row !== undefined && (row.progress !== undefined || row.status !== undefined);
  }

  /** Records the host a row's stream is on (progress/list's `host`, with a NATS backplane). */
  setHost(token: ProgressToken, host: string): void {
    const row = this.#rows.get(token);
    if (row !== undefined) row.host = host;
  }

  /** Records a new startedAt for the stream a row already follows (after a daemon restart). */
  restamp(token: ProgressToken, startedAt: number): void {
    const row = this.#rows.get(token);
    if (row !== undefined) row.startedAt = startedAt;
  }

  apply(notification: Notification, now: number): StreamRow {
    const token = notification.params.progressToken;
    let row = this.follow(token);
    if (notification.method === 'notifications/progress') {
      // A value after the done: the token started a new stream (tail follows every stream).
      if (row.status !== undefined) row = this.#fresh(token, undefined);
      const { progress, total, message } = notification.params;
      row.progress = progress;
      row.total = total;
      row.message = message;
      row.estimator.observe(now, progress);
      row.lastValueAt = now;
    } else {
      row.status = notification.params.status;
      if (notification.params.message !== undefined) row.message = notification.params.message;
    }
    return row;
  }

  get rows(): StreamRow[] {
    return [...this.#rows.values()];
  }

  get(token: ProgressToken): StreamRow | undefined {
    return this.#rows.get(token);
  }
}

/** Units per second at `now` (the estimator's); undefined when not known, or when stalled. */
export function rateOf(row: StreamRow, now: number): number | undefined {
  if (isStalled(row, now)) return undefined;
  return row.estimator.rate(now) ?? undefined;
}

/** No new value for longer than TAIL_STALLED_AFTER_MS. */
export function isStalled(row: StreamRow, now: number): boolean {
  return (
    row.status === undefined &&
    row.lastValueAt !== undefined &&
    now - row.lastValueAt > TAIL_STALLED_AFTER_MS
  );
}

export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(2).replace(/\.?0+$/, '');
}

export function formatRate(perSecond: number): string {
  if (perSecond >= 100) return `${Math.round(perSecond)}/s`;
  if (perSecond >= 1) return `${perSecond.toFixed(1)}/s`;
  return `${(perSecond * 60).toFixed(1)}/min`;
}

export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, '0')}:${rest}` : `${minutes}:${rest}`;
}

/** A row's name: its token, and the host it is on when the daemon is on a NATS backplane. */
function nameOf(row: StreamRow): string {
  const token = formatToken(row.token);
  return row.host === undefined ? token : `${token} @${printable(row.host)}`;
}

/** A token as shown: integers as #7, strings with their control characters made visible. */
export function formatToken(token: ProgressToken): string {
  return typeof token === 'number' ? `#${token}` : printable(token);
}

export function bar(fraction: number, width = BAR_WIDTH): string {
  const clamped = Math.min(1, Math.max(0, fraction));
  const eighths = Math.round(clamped * width * 8);
  const full = Math.floor(eighths / 8);
  const partial = PARTIAL_BLOCKS[eighths % 8] ?? '';
  return `${'█'.repeat(full)}${partial}`.padEnd(width, '░');
}

/** The parts of a row after the name: bar (when asked and total known), counts, rate, ETA or status, message. */
function describe(row: StreamRow, withBar: boolean, now: number): string[] {
  const parts: string[] = [];
  const { progress, total } = row;
  if (progress === undefined) {
    parts.push(row.status === undefined ? 'waiting' : '');
  } else if (total !== undefined && total > 0) {
    const fraction = progress / total;
    if (withBar) parts.push(`[${bar(fraction)}]`);
    parts.push(
      `${String(Math.floor(fraction * 100)).padStart(3)}%`,
      `${formatNumber(progress)}/${formatNumber(total)}`,
    );
  } else {
    parts.push(formatNumber(progress));
  }
  if (row.status !== undefined) {
    parts.push(STATUS_MARK[row.status]);
  } else if (isStalled(row, now)) {
    parts.push('stalled');
  } else if (progress !== undefined) {
    const rate = rateOf(row, now);
    if (rate !== undefined && rate > 0) {
      parts.push(formatRate(rate));
      const eta = row.estimator.etaMs(now, progress, total);
      if (eta !== null && eta > 0) parts.push(`ETA ${formatDuration(eta / 1000)}`);
    }
  }
  if (row.message !== undefined && row.message !== '')
    parts.push(printable(row.message.replace(/\s+/g, ' ')));
  return parts.filter((part) => part !== '');
}

/** One line for a terminal that redraws: name padded, a bar, cut to the width (in columns). */
export function formatRow(row: StreamRow, nameWidth: number, columns: number, now: number): string {
  const name = padEnd(nameOf(row), nameWidth);
  return clip(`${name}  ${describe(row, true, now).join('  ')}`, columns);
}

/** One plain line (no bar, no padding), for logs and pipes. */
export function formatLine(row: StreamRow, now: number): string {
  return `${nameOf(row)}  ${describe(row, false, now).join('  ')}`;
}

/** The whole screen: a header and the rows that fit, oldest finished rows dropped first. */
export function formatScreen(
  rows: StreamRow[],
  columns: number,
  height: number,
  state: 'connected' | 'disconnected',
  now: number,
): string[] {
  const width = Math.max(20, columns - 1);
  // A stream that has sent no value yet is waiting, not running.
  const finished = rows.filter((row) => row.status !== undefined).length;
  const waiting = rows.filter(
    (row) => row.status === undefined && row.progress === undefined,
  ).length;
  const running = rows.length - finished - waiting;
  let shown = rows;
  const room = Math.max(1, height - 2);
  if (shown.length > room) {
    let drop = shown.length - room;
    shown = shown.filter((row) => {
      if (drop > 0 && row.status !== undefined) {
        drop--;
        return false;
      }
      return true;
    });
    shown = shown.slice(-room);
  }
  const hidden = rows.length - shown.length;
  const counts = [
    `${running} running`,
    ...(waiting > 0 ? [`${waiting} waiting`] : []),
    `${finished} finished`,
  ].join(', ');
  const header =
    state === 'disconnected'
      ? 'mcp-progress tail: lost the daemon, reconnecting…'
      : rows.length === 0
        ? 'mcp-progress tail: waiting for streams…'
        : `mcp-progress tail: ${counts}${hidden > 0 ? `, +${hidden} more not shown` : ''}`;
  const nameWidth = Math.min(
    32,
    shown.reduce((max, row) => Math.max(max, displayWidth(nameOf(row))), 0),
  );
  return [clip(header, width), ...shown.map((row) => formatRow(row, nameWidth, width, now))];
}
