/**
 * How the MCP tools put a stream into words and fields: the one formatting of a job's state,
 * used by the tools' results and by a task's statusMessage, on every revision.
 */
import * as z from 'zod';
import {
  type DoneParams,
  type ProgressParams,
  type ProgressToken,
  progressTokenSchema,
  type StreamSummary,
  streamEndStatusSchema,
  streamStateSchema,
} from '../protocol/frames.js';
import { MAX_STATUS_MESSAGE_CHARS, shorten } from '../protocol/limits.js';

/** One stream as the tools report it: flat, so a model reads it at a glance. */
export const streamView = z.object({
  progressToken: progressTokenSchema,
  state: streamStateSchema.describe(
    'waiting: nothing published yet; active: running; done: finished (kept for a while after)',
  ),
  progress: z.number().optional().describe('The last progress value'),
  total: z.number().optional().describe('The total, when the job knows it'),
  message: z
    .string()
    .optional()
    .describe('The done message when done, else the last progress message'),
  status: streamEndStatusSchema.optional().describe('How the job ended, when it is done'),
  startedAt: z.number().describe('When the stream started, in milliseconds since the epoch'),
  updatedAt: z.number().describe('When the stream last changed, in milliseconds since the epoch'),
  durationMs: z.number().optional().describe('From start to done, when it is done'),
  rate: z
    .number()
    .optional()
    .describe('While running: progress units per second, smoothed over about 15 s, when known'),
  etaMs: z
    .number()
    .optional()
    .describe('While running: estimated milliseconds until progress reaches total, when known'),
  host: z
    .string()
    .optional()
    .describe('With a NATS backplane: the host whose worker publishes the stream'),
});

export type StreamView = z.infer<typeof streamView>;

/** A type alias, not an interface: the SDK wants an index-signature-compatible object. */
export type WatchResult = {
  progressToken: ProgressToken;
  state: StreamView['state'];
  timedOut: boolean;
  progress?: number;
  total?: number;
  message?: string;
  status?: DoneParams['status'];
  durationMs?: number;
  rate?: number;
  etaMs?: number;
  updates: number;
};

/** What watch_progress answers, from what it received and what the daemon has now. */
export function watchResult(
  token: ProgressToken,
  last: ProgressParams | undefined,
  done: DoneParams | undefined,
  summary: StreamSummary | undefined,
  updates = 0,
): WatchResult {
  const result: WatchResult = {
    progressToken: token,
    state: done !== undefined ? 'done' : (summary?.state ?? 'waiting'),
    timedOut: done === undefined,
    updates,
  };
  const lastValue = last ?? summary?.last;
  if (lastValue !== undefined) {
    result.progress = lastValue.progress;
    if (lastValue.total !== undefined) result.total = lastValue.total;
    if (lastValue.message !== undefined) result.message = lastValue.message;
  }
  if (done !== undefined) {
    result.status = done.status;
    if (done.message !== undefined) result.message = done.message;
    if (summary?.state === 'done') result.durationMs = summary.updatedAt - summary.startedAt;
  } else if (summary?.state === 'active') {
    if (typeof summary.rate === 'number') result.rate = summary.rate;
    if (typeof summary.etaMs === 'number') result.etaMs = summary.etaMs;
  }
  return result;
}

export function view(summary: StreamSummary): StreamView {
  const out: StreamView = {
    progressToken: summary.progressToken,
    state: summary.state,
    startedAt: summary.startedAt,
    updatedAt: summary.updatedAt,
  };
  if (summary.last !== undefined) {
    out.progress = summary.last.progress;
    if (summary.last.total !== undefined) out.total = summary.last.total;
    if (summary.last.message !== undefined) out.message = summary.last.message;
  }
  if (summary.status !== undefined) out.status = summary.status;
  if (summary.message !== undefined) out.message = summary.message;
  if (summary.state === 'done') out.durationMs = summary.updatedAt - summary.startedAt;
  if (typeof summary.rate === 'number') out.rate = summary.rate;
  if (typeof summary.etaMs === 'number') out.etaMs = summary.etaMs;
  if (summary.host !== undefined) out.host = summary.host;
  return out;
}

export function show(token: ProgressToken): string {
  return JSON.stringify(token);
}

function amount(progress: number | undefined, total: number | undefined): string {
  if (progress === undefined) return 'no progress yet';
  if (total === undefined) return `at ${progress}`;
  const percent = total > 0 ? ` (${Math.floor((progress / total) * 100)}%)` : '';
  return `at ${progress}/${total}${percent}`;
}

/** ", 2.5/s, about 1 min 20 s left" for a running job, from what is known of it. */
function pace(rate: number | undefined, etaMs: number | undefined): string {
  const parts: string[] = [];
  if (rate !== undefined) parts.push(`${formatRate(rate)}/s`);
  if (etaMs !== undefined) parts.push(`about ${formatDurationMs(etaMs)} left`);
  return parts.length === 0 ? '' : `, ${parts.join(', ')}`;
}

function formatRate(rate: number): string {
  if (rate >= 100) return String(Math.round(rate));
  return String(Number(rate.toPrecision(2)));
}

/** A duration a person reads at a glance: 45 s, 3 min 20 s, 2 h 5 min. */
function formatDurationMs(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60)
    return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}

export function describeStream(stream: StreamView): string {
  const where = amount(stream.progress, stream.total);
  const message = stream.message === undefined ? '' : `: ${stream.message}`;
  const name = `${show(stream.progressToken)}${stream.host === undefined ? '' : ` on host ${stream.host}`}`;
  if (stream.state === 'done') {
    const took = stream.durationMs === undefined ? '' : ` after ${seconds(stream.durationMs)}`;
    return `${name} done (${stream.status}) ${where}${took}${message}`;
  }
  const running = stream.state === 'active' ? pace(stream.rate, stream.etaMs) : '';
  return `${name} ${stream.state} ${where}${running}${message}`;
}

export function describeWatch(result: WatchResult): string {
  const where = amount(result.progress, result.total);
  const message = result.message === undefined ? '' : `: ${result.message}`;
  if (!result.timedOut) {
    const took = result.durationMs === undefined ? '' : ` after ${seconds(result.durationMs)}`;
    return `Job ${show(result.progressToken)} is done (${result.status}) ${where}${took}${message}.`;
  }
  const state =
    result.state === 'waiting'
      ? 'has not started yet'
      : `is still running ${where}${pace(result.rate, result.etaMs)}`;
  return `Job ${show(result.progressToken)} ${state}${message}. Stopped watching at the timeout; call watch_progress again to keep watching.`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * A task's statusMessage from a line of describeStream: at most MAX_STATUS_MESSAGE_CHARS,
 * cut with an ellipsis, never inside a surrogate pair. The daemon's tasks and relayTask share it.
 */
export function fitStatusMessage(text: string): string {
  if (text.length <= MAX_STATUS_MESSAGE_CHARS) return text;
  return `${shorten(text, MAX_STATUS_MESSAGE_CHARS - 1)}…`;
}
