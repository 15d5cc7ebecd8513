/**
 * The live page's stream (GET /events) read as a client in another language would: raw HTTP
 * and the SSE text format, against the real daemon and a raw worker connection.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_SESSION_BUFFER_BYTES } from '../../src/protocol/limits.js';
import { cleanupAll, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { httpAsk, jobsOf, openEvents, pageCookie, type SseEvent } from '../helpers/page.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

let daemon: RunningDaemon;
let base: string;
let cookie: string;
let worker: RawWorker;
let seq = 0;

beforeAll(async () => {
  daemon = await startDaemon(['--retention-ms', '1500']);
  base = daemon.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');
  cookie = await pageCookie(daemon.runtimeDir);
  worker = await rawWorker(daemon.info.socket);
});
afterAll(async () => {
  worker?.destroy();
  await daemon.stop();
  cleanupAll();
});

/** Sends a frame and waits for its ack: the daemon's table has it. */
async function frame(type: 'progress' | 'done', data: Record<string, unknown>): Promise<void> {
  const mine = ++seq;
  worker.send(type, { v: 1, ...data, seq: mine });
  const reply = await worker.reply((r) => (r.data as { seq?: number }).seq === mine);
  expect(reply.type).toBe('ack');
}

const events = (headers: Record<string, string> = {}) =>
  openEvents(base, { host: new URL(base).host, cookie, ...headers });

const hasJob = (token: string, progress?: number) => (event: SseEvent) =>
  jobsOf(event).some(
    (job) =>
      job.progressToken === token && (progress === undefined || job.last?.progress === progress),
  );

describe('GET /events', () => {
  it('starts with a snapshot of every job, then sends the changes with ids', async () => {
    await frame('progress', { progressToken: 'snap-a', progress: 1, total: 4 });
    const tab = await events();
    expect(tab.status).toBe(200);
    const snapshot = await tab.next((event) => event.event === 'snapshot', 'the snapshot');
    expect(snapshot.id).toMatch(/^[\w-]+-\d+$/);
    expect(hasJob('snap-a', 1)(snapshot)).toBe(true);
    await frame('progress', { progressToken: 'snap-a', progress: 2, message: 'two' });
    const change = await tab.next(
      (event) => event.event === 'changes' && hasJob('snap-a', 2)(event),
      'the change',
    );
    expect(change.id).not.toBe(snapshot.id);
    expect(jobsOf(change).find((job) => job.progressToken === 'snap-a')).toMatchObject({
      state: 'active',
      last: { progress: 2, message: 'two' },
    });
    tab.close();
  });

  it('coalesces a fast job to a batch per 500 ms at most, and the last value always arrives', async () => {
    const tab = await events();
    await tab.next((event) => event.event === 'snapshot', 'the snapshot');
    // Every frame is acked before the next is sent: all arrive between start and end.
    const start = performance.now();
    let progress = 0;
    while (performance.now() - start < 1500) {
      await frame('progress', { progressToken: 'fast', progress: ++progress });
    }
    const end = performance.now();
    await tab.next((event) => hasJob('fast', progress)(event), 'the last value');
    const batches = tab.events.filter((event) => hasJob('fast')(event));
    // The stream's batches are made at least 500 ms apart; the last one comes after the end.
    expect(batches.length).toBeLessThanOrEqual(Math.floor((end - start + 500) / 500) + 1);
    expect(progress).toBeGreaterThan(batches.length * 10);
    for (const batch of batches) {
      expect(jobsOf(batch).filter((job) => job.progressToken === 'fast')).toHaveLength(1);
    }
    tab.close();
  });

  it('resumes from Last-Event-ID with what changed since, once each; another instance gets a snapshot', async () => {
    const watcher = await events();
    await watcher.next((event) => event.event === 'snapshot', 'the snapshot');
    await frame('progress', { progressToken: 'resume-a', progress: 1 });
    await frame('progress', { progressToken: 'resume-b', progress: 1 });
    await frame('progress', { progressToken: 'resume-gone', progress: 1 });
    const before = await watcher.next(
      (event) => hasJob('resume-a', 1)(event) && hasJob('resume-b', 1)(event),
      'both jobs',
    );
    // While the tab is away: a changes, c starts, the third ends and is evicted (retention 1.5 s).
    await frame('progress', { progressToken: 'resume-a', progress: 2 });
    await frame('progress', { progressToken: 'resume-c', progress: 1 });
    await frame('done', { progressToken: 'resume-gone' });
    const evicted = await watcher.next(
      (event) => (JSON.parse(event.data).gone as unknown[]).includes('resume-gone'),
      'the eviction',
    );
    const back = await events({ 'last-event-id': before.id ?? '' });
    const caughtUp = await back.next(() => true, 'the catch-up');
    expect(caughtUp.event).toBe('changes');
    expect(caughtUp.id).toBe(evicted.id);
    const tokens = jobsOf(caughtUp).map((job) => job.progressToken);
    expect(tokens.sort()).toEqual(['resume-a', 'resume-c']);
    expect(hasJob('resume-a', 2)(caughtUp)).toBe(true);
    expect(JSON.parse(caughtUp.data).gone).toEqual(['resume-gone']);
    back.close();
    // Resumed from the newest id: nothing at all until something changes.
    const current = await events({ 'last-event-id': evicted.id ?? '' });
    await frame('progress', { progressToken: 'resume-b', progress: 2 });
    const next = await current.next(() => true, 'the next change');
    expect(next.event).toBe('changes');
    expect(jobsOf(next).map((job) => job.progressToken)).toEqual(['resume-b']);
    current.close();
    for (const foreign of ['another-instance-3', 'garbage', `${before.id}0000`]) {
      const fresh = await events({ 'last-event-id': foreign });
      const first = await fresh.next(() => true, 'the snapshot');
      expect(first.event, foreign).toBe('snapshot');
      fresh.close();
    }
    watcher.close();
  });

  it('is a session in the hub: counted, and refused past --max-sessions', async () => {
    const capped = await startDaemon(['--max-sessions', '1']);
    try {
      const cappedBase = capped.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');
      const cappedCookie = await pageCookie(capped.runtimeDir);
      const headers = { host: new URL(cappedBase).host, cookie: cappedCookie };
      const first = await openEvents(cappedBase, headers);
      await first.next((event) => event.event === 'snapshot', 'the snapshot');
      const second = await openEvents(cappedBase, headers);
      expect(second.status).toBe(503);
      const metrics = await httpAsk(`${cappedBase}/metrics`, {
        headers: { host: headers.host, authorization: `Bearer ${capped.info.secret}` },
      });
      expect(metrics.body).toMatch(/^mcp_progress_page_sessions 1$/m);
      expect(metrics.body).toMatch(/^mcp_progress_sessions 1$/m);
      first.close();
    } finally {
      await capped.stop();
    }
  });

  it('closes a tab that does not read once its unread bytes pass the cap', async () => {
    // The smallest cap the daemon takes (it must hold the largest notification and reply).
    const capped = await startDaemon([
      '--max-session-buffer-bytes',
      String(MIN_SESSION_BUFFER_BYTES),
    ]);
    const publisher = await rawWorker(capped.info.socket);
    try {
      const cappedBase = capped.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');
      const headers = {
        host: new URL(cappedBase).host,
        cookie: await pageCookie(capped.runtimeDir),
      };
      const reader = await openEvents(cappedBase, headers);
      await reader.next((event) => event.event === 'snapshot', 'the snapshot');
      reader.pause();
      const message = 'x'.repeat(4000);
      const slowClosed = async () => {
        const metrics = await httpAsk(`${cappedBase}/metrics`, {
          headers: { host: headers.host, authorization: `Bearer ${capped.info.secret}` },
        });
        return /^mcp_progress_slow_sessions_closed_total [1-9]/m.test(metrics.body);
      };
      // Batches of 500 jobs of 4 KB each, until the kernel's buffers are full and the cap passes.
      for (let round = 1; round <= 40 && !(await slowClosed()); round++) {
        for (let i = 0; i < 500; i++) {
          const frame = { v: 1, progressToken: `big-${i}`, progress: round, message };
          // The batch's last frame asks for an ack: the next check comes once the daemon took it all.
          publisher.send('progress', i === 499 ? { ...frame, seq: round } : frame);
        }
        await publisher.reply(
          (reply) => reply.type === 'ack' && (reply.data as { seq?: number }).seq === round,
        );
      }
      expect(await slowClosed()).toBe(true);
      await reader.ended;
      expect(capped.stderr()).toMatch(/page session \d+ closed: \d+ bytes unread/);
    } finally {
      publisher.destroy();
      await capped.stop();
    }
  }, 60_000);
});
