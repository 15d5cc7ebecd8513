/**
 * The live page's stream, `GET /events` (Server-Sent Events): one per browser tab, each a
 * session in the hub (under --max-sessions and the unread-bytes cap). A tab gets a snapshot of
 * every job, then the jobs that changed, at most once per PAGE_FEED_INTERVAL_MS each. Every
 * batch has an id `<instance>-<n>`; a tab that reconnects with `Last-Event-ID` gets the jobs
 * that changed after batch n, as they are now: none missed and none sent twice. An id of
 * another daemon instance (a restart), or older than the removals remembered, gets a snapshot.
 * A stream ends after streamMs (half the page cookie's lifetime) and the browser comes back, by
 * its last id, with the fresh cookie the stream set: so an open page keeps its access.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProgressToken, StreamSummary } from '../protocol/frames.js';
import {
  PAGE_COOKIE_TTL_MS,
  PAGE_FEED_HEARTBEAT_MS,
  PAGE_FEED_INTERVAL_MS,
  PAGE_FEED_MAX_REMOVALS,
} from '../shared/defaults.js';
import { sendRefusal } from './access.js';
import { PAGE_HEADERS } from './page-headers.js';
import type { SessionHub } from './sessions.js';

/** What a tab is sent in one event: jobs as the daemon summarises them, and removed tokens. */
export interface FeedBatch {
  readonly jobs: readonly StreamSummary[];
  readonly gone: readonly ProgressToken[];
}

export interface PageFeedOptions {
  readonly intervalMs: number;
  readonly heartbeatMs: number;
  readonly maxRemovals: number;
  /**
   * A tab's stream ends after this long, and the browser reconnects (resuming by its last id):
   * each stream sets a fresh page cookie, so an open page renews its cookie this often, and no
   * stream outlives the cookie it was opened with by more than this.
   */
  readonly streamMs: number;
}

export const DEFAULT_PAGE_FEED_OPTIONS: PageFeedOptions = {
  intervalMs: PAGE_FEED_INTERVAL_MS,
  heartbeatMs: PAGE_FEED_HEARTBEAT_MS,
  maxRemovals: PAGE_FEED_MAX_REMOVALS,
  streamMs: PAGE_COOKIE_TTL_MS / 2,
};

/** How long a browser waits before it reconnects a dropped stream (the SSE `retry` field). */
const RECONNECT_MS = 1000;

/** A snapshot or catch-up is sent in events of about this size, each once the last was read. */
const CHUNK_BYTES = 64 * 1024;

interface Known {
  /** What changes when the page's view of the job changes. */
  readonly print: string;
  /** The batch in which the job last changed. */
  readonly batch: number;
  readonly summary: StreamSummary;
}

interface Tab {
  readonly id: number;
  readonly response: ServerResponse;
  /** True while its snapshot or catch-up is still going out: live batches wait for it. */
  catchingUp: boolean;
}

export class PageFeed {
  readonly #options: PageFeedOptions;
  readonly #streams: () => StreamSummary[];
  readonly #hub: SessionHub;
  /** Changes with every daemon start: an id of another instance cannot be resumed here. */
  readonly #instance = randomBytes(6).toString('base64url');
  readonly #known = new Map<ProgressToken, Known>();
  /** Tokens that left the table, with the batch they left in, oldest first. */
  readonly #removed = new Map<ProgressToken, number>();
  /** Removals before this batch were forgotten: a tab behind it needs a snapshot. */
  #forgottenBefore = 0;
  #batch = 0;
  readonly #tabs = new Map<number, Tab>();
  #timer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(options: PageFeedOptions, streams: () => StreamSummary[], hub: SessionHub) {
    this.#options = options;
    this.#streams = streams;
    this.#hub = hub;
  }

  get tabs(): number {
    return this.#tabs.size;
  }

  /**
   * Serves one tab's stream, with `headers` (the fresh cookie) on its 200, and ends it after
   * streamMs; refuses it (503) at --max-sessions and while the daemon stops.
   */
  open(
    request: IncomingMessage,
    response: ServerResponse,
    lastEventId: string | undefined,
    headers: Readonly<Record<string, string>> = {},
    /** How long this stream lasts, when less than the feed's streamMs (its access ends sooner). */
    streamMs = this.#options.streamMs,
  ): void {
    let tab: Tab | undefined;
    const { id, refused } = this.#hub.open('page', {
      unreadBytes: () => response.writableLength + (response.socket?.writableLength ?? 0),
      closeSlow: () => {
        if (tab !== undefined) this.#tabs.delete(tab.id);
        this.#idleIfNone();
        response.destroy();
      },
    });
    if (refused !== undefined) {
      // The page shows why and tries again either way (page.js).
      sendRefusal(response, refused, PAGE_HEADERS);
      return;
    }
    // The first tab finds the table as it is now; later ones share the batches already made.
    if (this.#tabs.size === 0) this.#scan();
    response.writeHead(200, {
      ...headers,
      ...PAGE_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'x-accel-buffering': 'no',
    });
    response.write(`retry: ${RECONNECT_MS}\n\n`);
    const opened: Tab = { id, response, catchingUp: true };
    tab = opened;
    this.#tabs.set(id, opened);
    request.socket.setNoDelay(true);
    // Ended, not cut: the browser reconnects after `retry` with its last id and the fresh cookie.
    // Out of the table first, so that nothing is written after the end.
    const renewal = setTimeout(
      () => {
        this.#tabs.delete(id);
        response.end();
      },
      Math.min(streamMs, this.#options.streamMs),
    );
    renewal.unref();
    response.on('close', () => {
      clearTimeout(renewal);
      this.#tabs.delete(id);
      this.#hub.close(id);
      this.#idleIfNone();
    });
    this.#start();
    const after = this.#resumePoint(lastEventId);
    if (after === undefined) {
      const jobs = [...this.#known.values()].map((known) => known.summary);
      void this.#catchUp(opened, 'snapshot', { jobs, gone: [] });
    } else {
      void this.#catchUp(opened, 'changes', this.#since(after));
    }
  }

  /** Ends every tab's stream (the daemon is stopping). */
  stop(): void {
    for (const tab of this.#tabs.values()) tab.response.end();
    this.#tabs.clear();
    this.#idleIfNone();
  }

  /** The batch after which a tab that last saw `lastEventId` resumes, or undefined for a snapshot. */
  #resumePoint(lastEventId: string | undefined): number | undefined {
    const match = /^([\w-]+)-(0|[1-9]\d{0,15})$/.exec(lastEventId ?? '');
    if (match === null || match[1] !== this.#instance) return undefined;
    const batch = Number(match[2]);
    if (batch > this.#batch || batch < this.#forgottenBefore) return undefined;
    return batch;
  }

  #since(after: number): FeedBatch {
    const jobs: StreamSummary[] = [];
    for (const known of this.#known.values()) if (known.batch > after) jobs.push(known.summary);
    const gone: ProgressToken[] = [];
    for (const [token, batch] of this.#removed) if (batch > after) gone.push(token);
    return { jobs, gone };
  }

  /**
   * Sends a snapshot or a catch-up in chunks, each once the tab has read the one before, so a
   * table of any size fits under the unread-bytes cap; the last chunk carries the batch id.
   * Batches made meanwhile follow as one more catch-up.
   */
  async #catchUp(tab: Tab, event: 'snapshot' | 'changes', batch: FeedBatch): Promise<void> {
    let upTo = this.#batch;
    let first = true;
    let pending: FeedBatch | undefined = batch;
    while (pending !== undefined) {
      // A tab that resumes from the newest batch has nothing to catch up on.
      const empty = event === 'changes' && pending.jobs.length === 0 && pending.gone.length === 0;
      for (const chunk of empty ? [] : chunks(pending)) {
        if (!this.#tabs.has(tab.id)) return;
        const last = chunk.last;
        const data = JSON.stringify({ ...chunk.batch, first, last });
        first = false;
        const written = tab.response.write(
          `${last ? `id: ${this.#instance}-${upTo}\n` : ''}event: ${event}\ndata: ${data}\n\n`,
        );
        if (!written) await drained(tab.response);
      }
      // Batches made while this went out: sent now as changes, then the tab is live.
      if (upTo === this.#batch) {
        pending = undefined;
      } else {
        const since = upTo;
        upTo = this.#batch;
        pending = this.#since(since);
        event = 'changes';
        first = true;
      }
    }
    tab.catchingUp = false;
  }

  #start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#scan(), this.#options.intervalMs);
    this.#timer.unref();
    this.#heartbeat = setInterval(() => {
      for (const tab of this.#tabs.values()) tab.response.write(': keepalive\n\n');
    }, this.#options.heartbeatMs);
    this.#heartbeat.unref();
  }

  #idleIfNone(): void {
    if (this.#tabs.size > 0) return;
    clearInterval(this.#timer);
    clearInterval(this.#heartbeat);
    this.#timer = undefined;
    this.#heartbeat = undefined;
  }

  /** Compares the table with what tabs were sent; the jobs that changed make the next batch. */
  #scan(): void {
    const batch = this.#batch + 1;
    const jobs: StreamSummary[] = [];
    const seen = new Set<ProgressToken>();
    for (const summary of this.#streams()) {
      const token = summary.progressToken;
      seen.add(token);
      const print = `${summary.state}|${summary.updatedAt}|${summary.last?.progress}|${summary.status}|${summary.host}`;
      if (this.#known.get(token)?.print === print) continue;
      this.#known.set(token, { print, batch, summary });
      this.#removed.delete(token);
      jobs.push(summary);
    }
    const gone: ProgressToken[] = [];
    for (const token of this.#known.keys()) {
      if (seen.has(token)) continue;
      this.#known.delete(token);
      this.#removed.set(token, batch);
      gone.push(token);
    }
    for (const [token, removedIn] of this.#removed) {
      if (this.#removed.size <= this.#options.maxRemovals) break;
      this.#removed.delete(token);
      this.#forgottenBefore = removedIn;
    }
    if (jobs.length === 0 && gone.length === 0) return;
    this.#batch = batch;
    const text = `id: ${this.#instance}-${batch}\nevent: changes\ndata: ${JSON.stringify({ jobs, gone, first: true, last: true })}\n\n`;
    for (const tab of [...this.#tabs.values()]) {
      if (tab.catchingUp) continue;
      tab.response.write(text);
      this.#hub.closeIfSlow(tab.id, Buffer.byteLength(text));
    }
  }
}

function* chunks(batch: FeedBatch): Generator<{ batch: FeedBatch; last: boolean }> {
  let jobs: StreamSummary[] = [];
  let bytes = 0;
  for (const job of batch.jobs) {
    const size = JSON.stringify(job).length;
    if (jobs.length > 0 && bytes + size > CHUNK_BYTES) {
      yield { batch: { jobs, gone: [] }, last: false };
      jobs = [];
      bytes = 0;
    }
    jobs.push(job);
    bytes += size;
  }
  yield { batch: { jobs, gone: batch.gone }, last: true };
}

function drained(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}
