/**
 * What the live page's routes answer when they refuse: over real HTTP against a real daemon,
 * every refusal has its status, a stable code of HTTP_REFUSALS and a message that says what to
 * do, in the one shape of the daemon's coded errors (a JSON-RPC error, `data.code` the name),
 * with the page's headers.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_HEADERS } from '../../src/daemon/page-headers.js';
import { HTTP_REFUSALS, type HttpRefusalCode } from '../../src/protocol/errors.js';
import { httpRefusalSchema } from '../../src/protocol/frames.js';
import { cleanupAll, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import {
  type HttpAnswer,
  httpAsk,
  openEvents,
  pageCookie,
  pageTicketUrl,
  type SseStream,
} from '../helpers/page.js';

let daemon: RunningDaemon;
let base: string;
let own: { host: string };
let cookie: string;

beforeAll(async () => {
  // One session at most: the page's stream that holds it leaves none for a second.
  daemon = await startDaemon(['--max-sessions', '1']);
  base = daemon.info.url.replace(/^ws/, 'http').replace(/\/ws$/, '');
  own = { host: new URL(base).host };
  cookie = await pageCookie(daemon.runtimeDir);
});
afterAll(async () => {
  await daemon?.stop();
  cleanupAll();
});

/**
 * Checks a refusal: its status is its code's, its body the daemon's error shape with that code,
 * its message names `fix`, and (on the page's paths) it carries the page's headers.
 */
function expectRefusal(
  answer: HttpAnswer,
  code: HttpRefusalCode,
  fix: string | RegExp,
  pageHeaders = true,
): void {
  const what = `${code}: ${answer.status} ${answer.body}`;
  expect(answer.headers['content-type'], what).toBe('application/json; charset=utf-8');
  const body = httpRefusalSchema.parse(JSON.parse(answer.body));
  expect(body.error.data.code, what).toBe(code);
  expect(answer.status, what).toBe(HTTP_REFUSALS[code].status);
  expect(body.error.code).toBe(HTTP_REFUSALS[code].code);
  expect(body.id).toBeNull();
  if (typeof fix === 'string') expect(body.error.message, what).toContain(fix);
  else expect(body.error.message, what).toMatch(fix);
  // A person shown the body (a browser, curl) reads the message on a line of its own.
  expect(answer.body).toContain(`\n    "message": ${JSON.stringify(body.error.message)},\n`);
  if (pageHeaders)
    for (const [name, value] of Object.entries(PAGE_HEADERS))
      expect(answer.headers[name], `${what}: ${name}`).toBe(value);
}

/** A page cookie signed with the daemon's key and issued `ageMs` ago. */
function cookieIssued(ageMs: number): string {
  const name = cookie.split('=')[0];
  const key = readFileSync(join(daemon.runtimeDir, 'page.key'));
  const body = `${randomBytes(16).toString('base64url')}.${Date.now() - ageMs}`;
  const mac = createHmac('sha256', key).update(`cookie:${body}`).digest('base64url');
  return `${name}=${body}.${mac}`;
}

describe("the live page's refusals", () => {
  it('without the cookie, with an expired one, with a used ticket: 401, naming mcp-progress open', async () => {
    for (const path of ['/', '/page.js', '/page.css', '/events']) {
      expectRefusal(
        await httpAsk(`${base}${path}`, { headers: own }),
        'cookie_missing',
        'run `mcp-progress open`',
      );
      expectRefusal(
        await httpAsk(`${base}${path}`, {
          headers: { ...own, cookie: cookieIssued(2 * 86_400_000) },
        }),
        'cookie_expired',
        /has expired .*run `mcp-progress open`/,
      );
    }
    const ticket = await pageTicketUrl(daemon.runtimeDir);
    expect((await httpAsk(ticket)).status).toBe(303);
    expectRefusal(await httpAsk(ticket), 'ticket_refused', /used already.*`mcp-progress open`/);
  });

  it('a foreign Origin or Host: 403 and 421, naming what is accepted', async () => {
    for (const path of ['/', '/page.js', '/events']) {
      expectRefusal(
        await httpAsk(`${base}${path}`, {
          headers: { ...own, cookie, origin: 'http://localhost:1' },
        }),
        'origin_not_allowed',
        `Origin http://localhost:1 is not allowed: the page only answers its own origin (`,
      );
      expectRefusal(
        await httpAsk(`${base}${path}`, { headers: { host: 'evil.example', cookie } }),
        'misdirected',
        `Host \`evil.example\` is not one of this daemon's names (`,
      );
    }
  });

  it('a method a path does not take: 405 with Allow; a path it does not serve: 404', async () => {
    const post = await httpAsk(`${base}/`, { method: 'POST', headers: { ...own, cookie } });
    expectRefusal(post, 'method_not_allowed', '/ is not served to POST: ask it with GET');
    expect(post.headers.allow).toBe('GET');
    const get = await httpAsk(`${base}/cancel`, { headers: { ...own, cookie } });
    expectRefusal(get, 'method_not_allowed', 'ask it with POST');
    expect(get.headers.allow).toBe('POST');
    expectRefusal(
      await httpAsk(`${base}/favicon.ico`, { headers: { ...own, cookie } }),
      'not_found',
      'the live page (`mcp-progress open`) at /',
      false,
    );
  });

  it('a cancel without an Origin, not JSON, or with a body that is not one: 403, 415, 400, 413', async () => {
    const cancel = (headers: Record<string, string>, body: string) =>
      httpAsk(`${base}/cancel`, {
        method: 'POST',
        headers: { ...own, cookie, 'content-type': 'application/json', ...headers },
        body,
      });
    const token = JSON.stringify({ progressToken: 'render-1' });
    expectRefusal(await cancel({}, token), 'origin_required', 'needs an Origin header');
    expectRefusal(
      await cancel({ origin: base, 'content-type': 'text/plain' }, token),
      'unsupported_media_type',
      '`Content-Type: application/json`',
    );
    expectRefusal(await cancel({ origin: base }, '{'), 'invalid_body', 'the body is not JSON');
    expectRefusal(
      await cancel({ origin: base }, JSON.stringify({ token: 1 })),
      'invalid_body',
      'expected {"progressToken": string | integer',
    );
    expectRefusal(
      await cancel({ origin: base }, JSON.stringify({ reason: 'x'.repeat(5000) })),
      'body_too_large',
      'the body is over 4096 bytes',
    );
    // What the page's own cancel gets, for comparison: the answer, not a refusal.
    const sent = await cancel({ origin: base }, token);
    expect({ status: sent.status, body: JSON.parse(sent.body) }).toEqual({
      status: 200,
      body: { workers: 0 },
    });
  });

  it('a second stream at --max-sessions: 503 too_many_sessions, naming the flag', async () => {
    let holder: SseStream | undefined;
    try {
      holder = await openEvents(base, { ...own, cookie });
      expect(holder.status).toBe(200);
      expectRefusal(
        await httpAsk(`${base}/events`, { headers: { ...own, cookie } }),
        'too_many_sessions',
        'sessions of all kinds together (--max-sessions)',
      );
    } finally {
      holder?.close();
    }
  });
});
