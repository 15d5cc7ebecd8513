/// <reference lib="dom" />
/**
 * The page cookie's lifetime: a cookie, captured or not, stops working on the daemon's own clock
 * after --page-cookie-ms, and an open page renews its own before then (its stream sets a fresh
 * one and ends in time for the browser to come back with it). Raw HTTP against the real daemon,
 * then the page in Debian's chromium.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  eventually,
  expectDaemonRefuses,
  type RunningDaemon,
  startDaemon,
} from '../helpers/daemon.js';
import { httpAsk, openEvents, pageCookie, pageTicketUrl } from '../helpers/page.js';
import { tool } from '../helpers/tools.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';

const CHROMIUM_PATH = '/usr/bin/chromium';
const chromium = tool('chromium', {
  debian: 'chromium',
  probe: [CHROMIUM_PATH, '--version'],
  why: 'the page renewing its cookie is tested in a real browser',
});

/** The shortest lifetime the daemon takes, so that the tests wait as little as they can. */
const LIFETIME_MS = 5000;
const EXPIRED = /has expired.*mcp-progress open/;

afterAll(() => cleanupAll());

const baseOf = (daemon: RunningDaemon) =>
  daemon.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');

/** GET /page.js with `cookie` (a `name=value`): what the daemon says to it. */
const withCookie = (daemon: RunningDaemon, cookie: string) => {
  const base = baseOf(daemon);
  return httpAsk(`${base}/page.js`, { headers: { host: new URL(base).host, cookie } });
};

/** Settles as `promise` does, or fails after `ms` naming what did not come. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A cookie value signed with the daemon's page key, as only the daemon (or its user) can. */
function signed(daemon: RunningDaemon, text: string): string {
  const key = readFileSync(join(daemon.runtimeDir, 'page.key'));
  return createHmac('sha256', key).update(`cookie:${text}`).digest('base64url');
}

describe('the page cookie over HTTP', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon(['--page-cookie-ms', String(LIFETIME_MS)]);
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it('stops working after --page-cookie-ms on the daemon, with a refusal naming mcp-progress open', async () => {
    const before = Date.now();
    const cookie = await pageCookie(daemon.runtimeDir);
    expect((await withCookie(daemon, cookie)).status).toBe(200);
    const refused = await eventually(
      async () => {
        const answer = await withCookie(daemon, cookie);
        return answer.status === 200 ? undefined : answer;
      },
      LIFETIME_MS + 10_000,
      'the cookie to expire',
    );
    // Not before its time: it was issued after `before`.
    expect(Date.now() - before).toBeGreaterThanOrEqual(LIFETIME_MS);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatch(EXPIRED);
  });

  it('carries its issue time under the MAC: an old one is refused as expired, an edited one as foreign', async () => {
    const name = `mcp_progress_page_${new URL(baseOf(daemon)).port}`;
    const fresh = await pageCookie(daemon.runtimeDir);
    expect((await withCookie(daemon, fresh)).status).toBe(200);
    const id = randomBytes(16).toString('base64url');
    const then = Date.now() - LIFETIME_MS - 1000;
    const old = `${id}.${then}.${then}`;
    const expired = await withCookie(daemon, `${name}=${old}.${signed(daemon, old)}`);
    expect(expired.status).toBe(401);
    expect(expired.body).toMatch(EXPIRED);
    // The issue time of a good cookie moved on: its MAC no longer fits.
    const [freshId, since, , mac] = (fresh.split('=')[1] ?? '').split('.');
    const edited = await withCookie(
      daemon,
      `${name}=${freshId}.${since}.${Date.now() + 60_000}.${mac}`,
    );
    expect(edited.status).toBe(401);
    expect(edited.body).not.toMatch(EXPIRED);
    expect(edited.body).toContain('mcp-progress open');
  });

  it('refuses a cookie without an issue time (ID.MAC, good for ever before)', async () => {
    const name = `mcp_progress_page_${new URL(baseOf(daemon)).port}`;
    // Made the way a daemon made every page cookie before they had a lifetime.
    await pageCookie(daemon.runtimeDir);
    const id = randomBytes(16).toString('base64url');
    const timeless = await withCookie(daemon, `${name}=${id}.${signed(daemon, id)}`);
    expect(timeless.status).toBe(401);
    expect(timeless.body).toContain('mcp-progress open');
  });

  it('admits a cookie of a daemon before renewals kept the redemption time (ID.ISSUED.MAC), counting from its issue', async () => {
    const base = baseOf(daemon);
    const name = `mcp_progress_page_${new URL(base).port}`;
    await pageCookie(daemon.runtimeDir);
    const id = randomBytes(16).toString('base64url');
    const issued = Date.now();
    const before = `${id}.${issued}`;
    const cookie = `${name}=${before}.${signed(daemon, before)}`;
    expect((await withCookie(daemon, cookie)).status).toBe(200);
    // An open page renews it into the new form, redeemed when the old one was issued.
    const tab = await openEvents(base, { host: new URL(base).host, cookie });
    expect(tab.status).toBe(200);
    const renewed = tab.headers['set-cookie']?.[0]?.split(';')[0] ?? '';
    tab.close();
    expect((renewed.split('=')[1] ?? '').split('.')[1]).toBe(String(issued));
    expect((await withCookie(daemon, renewed)).status).toBe(200);
  });

  it('GET /events sets a fresh cookie and ends within half the lifetime, so an open page comes back with it', async () => {
    const base = baseOf(daemon);
    const host = new URL(base).host;
    const first = await pageCookie(daemon.runtimeDir);
    const opened = Date.now();
    const tab = await openEvents(base, { host, cookie: first });
    expect(tab.status).toBe(200);
    const setCookie = tab.headers['set-cookie']?.[0] ?? '';
    expect(setCookie).toMatch(/; Path=\/; HttpOnly; SameSite=Strict$/);
    const renewed = setCookie.split(';')[0] ?? '';
    expect(renewed.split('=')[0]).toBe(first.split('=')[0]);
    expect(renewed).not.toBe(first);
    await tab.next((event) => event.event === 'snapshot', 'the snapshot');
    // The daemon ends the stream (a browser reconnects by itself) while the new cookie is young.
    await within(tab.ended, LIFETIME_MS, 'the end of the stream');
    const lasted = Date.now() - opened;
    expect(lasted).toBeGreaterThanOrEqual(LIFETIME_MS / 2 - 100);
    expect(lasted).toBeLessThan(LIFETIME_MS);
    // Coming back with it, as the browser does, gets the next one, which outlives the first.
    const again = await openEvents(base, { host, cookie: renewed });
    expect(again.status).toBe(200);
    const next = again.headers['set-cookie']?.[0]?.split(';')[0] ?? '';
    expect(next).not.toBe(renewed);
    await eventually(
      async () => ((await withCookie(daemon, first)).status === 401 ? true : undefined),
      LIFETIME_MS + 10_000,
      'the first cookie to expire',
    );
    expect((await withCookie(daemon, next)).status).toBe(200);
    again.close();
  });
});

describe("the page cookie's redemption over HTTP", () => {
  /** The cookie's own lifetime, longer than the test: only the redemption's end stops a cookie. */
  const COOKIE_MS = 60_000;
  const SESSION_MS = 5000;
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon([
      '--page-cookie-ms',
      String(COOKIE_MS),
      '--page-session-ms',
      String(SESSION_MS),
    ]);
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it('renewing a cookie again and again ends --page-session-ms after its ticket was redeemed', async () => {
    const base = baseOf(daemon);
    const host = new URL(base).host;
    const before = Date.now();
    const first = await pageCookie(daemon.runtimeDir);
    // An open page's stream ends with the redemption, not at half the cookie's lifetime (30 s).
    const tab = await openEvents(base, { host, cookie: first });
    expect(tab.status).toBe(200);
    // Whoever holds a cookie renews it as an open page does: each stream's fresh cookie, at once.
    let latest = first;
    let renewals = 0;
    const refused = await eventually(
      async () => {
        const renewal = await openEvents(base, { host, cookie: latest });
        renewal.close();
        if (renewal.status !== 200) return renewal;
        latest = renewal.headers['set-cookie']?.[0]?.split(';')[0] ?? '';
        renewals++;
        return undefined;
      },
      SESSION_MS + 10_000,
      'the renewals to stop',
    );
    expect(Date.now() - before).toBeGreaterThanOrEqual(SESSION_MS);
    expect(renewals).toBeGreaterThan(1);
    expect(refused.status).toBe(401);
    expect(refused.headers['set-cookie']).toBeUndefined();
    const newest = await withCookie(daemon, latest);
    expect(newest.status).toBe(401);
    expect(newest.body).toMatch(
      /one `mcp-progress open` admits for 5 s, renewals included: run `mcp-progress open`/,
    );
    await within(tab.ended, 2000, 'the end of the first stream with the redemption');
  });

  it('carries the redemption time under the MAC: a renewed cookie with a later one is not admitted', async () => {
    const base = baseOf(daemon);
    const first = await pageCookie(daemon.runtimeDir);
    const tab = await openEvents(base, { host: new URL(base).host, cookie: first });
    const renewed = tab.headers['set-cookie']?.[0]?.split(';')[0] ?? '';
    tab.close();
    const [name, value] = renewed.split('=');
    const [id, since, issued, mac] = (value ?? '').split('.');
    expect(Number(since)).toBeLessThanOrEqual(Number(issued));
    expect((await withCookie(daemon, renewed)).status).toBe(200);
    const moved = await withCookie(daemon, `${name}=${id}.${Date.now()}.${issued}.${mac}`);
    expect(moved.status).toBe(401);
    expect(moved.body).not.toMatch(EXPIRED);
    expect(moved.body).toContain('mcp-progress open');
  });

  it('refuses a --page-session-ms under 5000 before starting', async () => {
    await expectDaemonRefuses(
      ['--page-session-ms', '4999'],
      'option --page-session-ms: expected an integer >= 5000, got 4999',
    );
  });
});

describe.skipIf(chromium.skip)('the page cookie in chromium', () => {
  let daemon: RunningDaemon;
  let browser: Browser;
  let worker: RawWorker;
  beforeAll(async () => {
    chromium.require();
    daemon = await startDaemon(['--page-cookie-ms', String(LIFETIME_MS)]);
    worker = await rawWorker(daemon.info.socket);
    browser = await puppeteer.launch({
      executablePath: CHROMIUM_PATH,
      headless: true,
      // As root (CI) chromium has no sandbox; the page is ours and loopback only.
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    worker?.destroy();
    await daemon?.stop();
  });

  it('an open page renews its cookie: it stays live for several lifetimes, while the first cookie expires', async () => {
    let seq = 0;
    const publish = async (progress: number) => {
      const mine = ++seq;
      worker.send('progress', { v: 1, progressToken: 'renewal', progress, seq: mine });
      await worker.reply((reply) => (reply.data as { seq?: number }).seq === mine);
    };
    const shows = (progress: number) =>
      page.waitForFunction(
        (text) =>
          document.querySelector(`.row[data-token='"renewal"'] .count`)?.textContent === text,
        { timeout: 10_000 },
        String(progress),
      );
    const page = await browser.newPage();
    const opened = Date.now();
    await page.goto(await pageTicketUrl(daemon.runtimeDir));
    await page.waitForFunction(() => document.getElementById('connection')?.textContent === 'live');
    const cookieNow = async () => {
      const [cookie] = await browser.cookies();
      return `${cookie?.name}=${cookie?.value}`;
    };
    const first = await cookieNow();
    await publish(1);
    await shows(1);
    // Three lifetimes of the first cookie, each update reaching the page; the cookie changes.
    const seen = new Set([first]);
    let progress = 1;
    await eventually(
      async () => {
        seen.add(await cookieNow());
        if (Date.now() - opened < 3 * LIFETIME_MS) return undefined;
        return true;
      },
      3 * LIFETIME_MS + 10_000,
      'three lifetimes',
    );
    await publish(++progress);
    await shows(progress);
    expect(seen.size).toBeGreaterThanOrEqual(3);
    // The page is live on a cookie it got by itself; the one the ticket gave is dead.
    const current = await cookieNow();
    expect(current).not.toBe(first);
    expect((await withCookie(daemon, current)).status).toBe(200);
    const stale = await withCookie(daemon, first);
    expect(stale.status).toBe(401);
    expect(stale.body).toMatch(EXPIRED);
    await page.close();
  }, 60_000);
});
