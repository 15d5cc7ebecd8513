/**
 * Who may see the live page: a browser that redeemed a one-time ticket of `mcp-progress open`
 * (src/shared/page-ticket.ts) and holds the cookie it got for it. The cookie is signed with a
 * key kept in the 0700 runtime directory, so it outlives a daemon restart (the page reconnects
 * and resumes) while the daemon's secret, which changes at every start, never reaches a URL.
 *
 * A browser hands the cookie to every port of localhost, another user's server too, and only on
 * Linux does the page also check the user at the other end. So a cookie carries its issue time
 * under its MAC and the daemon admits it for --page-cookie-ms only: a captured one stops
 * working. An open page renews its own: its stream (`GET /events`) sets a fresh cookie and ends
 * at half the lifetime (page-feed.ts), and the browser comes back with the fresh one. Whoever
 * holds a cookie can renew it so; a renewed cookie keeps the time its ticket was redeemed, also
 * under the MAC, and none admits past --page-session-ms after it: a captured cookie, renewed or
 * not, stops working then, and the page's user runs `mcp-progress open` again.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { checkPageTicket, PAGE_TICKET_PARAM, sign } from '../shared/page-ticket.js';
import type { OwnNames, Refusal } from './access.js';
import { requestTarget } from './gateway.js';

/** The file in the runtime directory that holds the key the page's cookies are signed with. */
export const PAGE_KEY_NAME = 'page.key';

/** Nonces of redeemed tickets kept (until they expire) so that each is used once. */
const MAX_REDEEMED = 10_000;

export class PageAccess {
  readonly #secret: string;
  readonly #keyPath: string;
  /** Read or made at the first use of the page: a daemon nobody opens the page of writes nothing. */
  #loadedKey: Buffer | undefined;
  /** Redeemed nonces and when their tickets expire. */
  readonly #redeemed = new Map<string, number>();
  #cookieName = 'mcp_progress_page';
  /** How long a cookie admits after it was issued (--page-cookie-ms). */
  readonly #lifetimeMs: number;
  /** How long the cookies of one redeemed ticket admit, renewals included (--page-session-ms). */
  readonly #sessionMs: number;

  constructor(secret: string, runtimeDir: string, cookieLifetimeMs: number, sessionMs: number) {
    this.#secret = secret;
    this.#keyPath = join(runtimeDir, PAGE_KEY_NAME);
    this.#lifetimeMs = cookieLifetimeMs;
    this.#sessionMs = sessionMs;
  }

  get #key(): Buffer {
    this.#loadedKey ??= loadPageKey(this.#keyPath);
    return this.#loadedKey;
  }

  /** Called once the port is known: daemons on other ports of this host keep their own cookie. */
  setPort(port: number): void {
    this.#cookieName = `mcp_progress_page_${port}`;
  }

  /** Why a ticket in this request's URL (or its cookie) would not be accepted; undefined when it would. */
  ticketRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
    const ticket = requestTarget(request).query.get(PAGE_TICKET_PARAM);
    if (ticket === null) return this.cookieRefusal(request, names);
    const foreign = originRefusal(request, names);
    if (foreign !== undefined) return foreign;
    const check = checkPageTicket(this.#secret, ticket);
    const problem = check.ok
      ? this.#redeemed.has(check.nonce)
        ? 'the ticket was used already (each URL of `mcp-progress open` works once)'
        : undefined
      : check.message;
    if (problem === undefined) return undefined;
    return {
      code: 'ticket_refused',
      message: `${problem}: run \`mcp-progress open\` for a new URL`,
    };
  }

  /**
   * Redeems the request's ticket (checked by ticketRefusal) and returns the Set-Cookie value
   * for the browser, or undefined when the request carried no ticket.
   */
  redeem(request: IncomingMessage): string | undefined {
    const ticket = requestTarget(request).query.get(PAGE_TICKET_PARAM);
    if (ticket === null) return undefined;
    const check = checkPageTicket(this.#secret, ticket);
    if (!check.ok) return undefined;
    const now = Date.now();
    for (const [nonce, expiresAt] of this.#redeemed) {
      if (expiresAt <= now || this.#redeemed.size >= MAX_REDEEMED) this.#redeemed.delete(nonce);
    }
    this.#redeemed.set(check.nonce, check.expiresAt);
    return this.#cookie(now, now);
  }

  /**
   * For a page stream, which renews the cookie of a page that stays open: the Set-Cookie value
   * of a fresh cookie of the same redemption as the request's (checked by cookieRefusal), and
   * how long the stream may last: half the cookie's lifetime, and never past the redemption's
   * end, when the browser must come back and be refused.
   */
  renewal(request: IncomingMessage, now = Date.now()): { setCookie: string; streamMs: number } {
    const found = this.#cookieState(request, now);
    // cookieRefusal let the request in: a valid cookie is there. Without one, an expired renewal.
    const since = typeof found === 'object' ? found.since : now - this.#sessionMs;
    return {
      setCookie: this.#cookie(since, now),
      streamMs: Math.max(0, Math.min(this.renewAfterMs, since + this.#sessionMs - now)),
    };
  }

  /**
   * The Set-Cookie value of a cookie issued now for the ticket redeemed at `since`. The value is
   * `ID.SINCE.ISSUED.MAC`: 16 random bytes, the redemption and issue times (ms since the epoch)
   * and the HMAC of the three with the page key.
   */
  #cookie(since: number, now: number): string {
    const body = `${randomBytes(16).toString('base64url')}.${since}.${now}`;
    const value = `${body}.${sign(this.#key, `cookie:${body}`)}`;
    // No Max-Age: the cookie ends with the browser session, or before on the daemon's clock, and
    // a browser that still sends an expired one is told so (rather than that it has none).
    return `${this.#cookieName}=${value}; Path=/; HttpOnly; SameSite=Strict`;
  }

  /** How long a page's stream lasts before it ends for a fresh cookie: half the lifetime. */
  get renewAfterMs(): number {
    return Math.floor(this.#lifetimeMs / 2);
  }

  /** 401 without a valid page cookie, or with an expired one; 403 for a foreign Origin. */
  cookieRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
    const foreign = originRefusal(request, names);
    if (foreign !== undefined) return foreign;
    const cookie = this.#cookieState(request);
    if (typeof cookie === 'object') return undefined;
    if (cookie === 'expired') {
      return {
        code: 'cookie_expired',
        message: `this page's cookie has expired (it admits for ${lifetime(this.#lifetimeMs)} after it was issued, and a page kept open renews it): run \`mcp-progress open\` (or \`mcp-progress open --print\`) for a one-time URL that sets a new one`,
      };
    }
    if (cookie === 'session_over') {
      return {
        code: 'cookie_expired',
        message: `this page's cookie has expired: one \`mcp-progress open\` admits for ${lifetime(this.#sessionMs)}, renewals included: run \`mcp-progress open\` (or \`mcp-progress open --print\`) for a one-time URL that sets a new one`,
      };
    }
    return {
      code: 'cookie_missing',
      message:
        'this page needs its cookie: run `mcp-progress open` (or `mcp-progress open --print`) for a one-time URL that sets it',
    };
  }

  /**
   * The best of the request's page cookies: one that admits (with its redemption time), else
   * one that did until its redemption's end, else one that did until its own, else none.
   */
  #cookieState(
    request: IncomingMessage,
    now = Date.now(),
  ): { since: number } | 'session_over' | 'expired' | 'none' {
    const header = request.headers.cookie;
    if (header === undefined) return 'none';
    let state: 'session_over' | 'expired' | 'none' = 'none';
    for (const pair of header.split(';')) {
      const mark = pair.indexOf('=');
      if (mark === -1 || pair.slice(0, mark).trim() !== this.#cookieName) continue;
      const parts = pair
        .slice(mark + 1)
        .trim()
        .split('.');
      // ID.SINCE.ISSUED.MAC; ID.ISSUED.MAC (of a daemon before renewals kept the redemption
      // time) counts from its issue, so an open page goes on and its cookie gets SINCE at its
      // next renewal. A cookie without an issue time (ID.MAC) is not one.
      const signature = parts.at(-1);
      const body = parts.slice(0, -1);
      if (signature === undefined || (body.length !== 2 && body.length !== 3)) continue;
      const expected = Buffer.from(sign(this.#key, `cookie:${body.join('.')}`));
      const presented = Buffer.from(signature);
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) continue;
      const issued = Number(body.at(-1));
      const since = body.length === 3 ? Number(body[1]) : issued;
      // Ages on this daemon's clock; one from the future (the clock was set back) is admitted
      // only within a lifetime of it too, so a clock step stretches a cookie to two at most.
      if (!(Math.abs(now - issued) < this.#lifetimeMs)) {
        if (state === 'none') state = 'expired';
        continue;
      }
      if (!(Math.abs(now - since) < this.#sessionMs)) {
        state = 'session_over';
        continue;
      }
      return { since };
    }
    return state;
  }
}

/** A lifetime in the unit a person reads it in: "1 day", "12 hours", "5 s". */
function lifetime(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
  ];
  for (const [size, unit] of units) {
    if (ms % size === 0) return `${ms / size} ${unit}${ms === size ? '' : 's'}`;
  }
  return `${ms / 1000} s`;
}

/** 403 for an Origin that is not the daemon's own (a page of another site, or another port). */
function originRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
  const origin = request.headers.origin;
  if (origin === undefined || names.origins.has(origin)) return undefined;
  return {
    code: 'origin_not_allowed',
    message: `Origin ${origin} is not allowed: the page only answers its own origin (${[...names.origins].join(', ')}); open it with \`mcp-progress open\``,
  };
}

/**
 * 403 when another local user holds the other end of the connection. A cookie is scoped to the
 * host, not the port, so a browser hands it to any server on localhost, another user's too; with
 * this check such a user, holding the cookie or a ticket, still cannot use it (where the kernel
 * names the peer: the local link, and loopback TCP on Linux).
 */
export async function ownerRefusal(
  request: IncomingMessage,
  peers: { peerUid(socket: Socket): Promise<number | undefined> },
): Promise<Refusal | undefined> {
  const own = process.getuid?.();
  if (own === undefined) return undefined;
  const peer = await peers.peerUid(request.socket);
  if (peer === undefined || peer === own) return undefined;
  return {
    code: 'other_user',
    message: `this page is its daemon's user's (uid ${own}) and this connection is another user's (uid ${peer}): open it as that user, with \`mcp-progress open\``,
  };
}

/** Reads the page key, or makes one (mode 0600) on the first start on this runtime directory. */
function loadPageKey(path: string): Buffer {
  try {
    const key = readFileSync(path);
    if (key.length >= 32) return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(32);
  writeFileSync(path, key, { mode: 0o600 });
  return key;
}
