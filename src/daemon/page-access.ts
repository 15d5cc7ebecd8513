/**
 * Who may see the live page: a browser that redeemed a one-time ticket of `mcp-progress open`
 * (src/shared/page-ticket.ts) and holds the cookie it got for it. The cookie is signed with a
 * key kept in the 0700 runtime directory, so it outlives a daemon restart (the page reconnects
 * and resumes) while the daemon's secret, which changes at every start, never reaches a URL.
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

  constructor(secret: string, runtimeDir: string) {
    this.#secret = secret;
    this.#keyPath = join(runtimeDir, PAGE_KEY_NAME);
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
        ? 'the ticket was used already (each URL of mcp-progress open works once)'
        : undefined
      : check.message;
    if (problem === undefined) return undefined;
    return { status: 401, message: `${problem}: run "mcp-progress open" for a new URL` };
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
    const id = randomBytes(16).toString('base64url');
    const value = `${id}.${sign(this.#key, `cookie:${id}`)}`;
    // No Max-Age: the cookie ends with the browser session.
    return `${this.#cookieName}=${value}; Path=/; HttpOnly; SameSite=Strict`;
  }

  /** 401 without a valid page cookie; 403 for a foreign Origin. */
  cookieRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
    const foreign = originRefusal(request, names);
    if (foreign !== undefined) return foreign;
    if (this.#validCookie(request)) return undefined;
    return {
      status: 401,
      message:
        'this page needs its cookie: run "mcp-progress open" (or "mcp-progress open --print") for a one-time URL that sets it',
    };
  }

  #validCookie(request: IncomingMessage): boolean {
    const header = request.headers.cookie;
    if (header === undefined) return false;
    for (const pair of header.split(';')) {
      const mark = pair.indexOf('=');
      if (mark === -1 || pair.slice(0, mark).trim() !== this.#cookieName) continue;
      const [id, signature] = pair
        .slice(mark + 1)
        .trim()
        .split('.');
      if (id === undefined || signature === undefined) continue;
      const expected = Buffer.from(sign(this.#key, `cookie:${id}`));
      const presented = Buffer.from(signature);
      if (presented.length === expected.length && timingSafeEqual(presented, expected)) return true;
    }
    return false;
  }
}

/** 403 for an Origin that is not the daemon's own (a page of another site, or another port). */
function originRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
  const origin = request.headers.origin;
  if (origin === undefined || names.origins.has(origin)) return undefined;
  return {
    status: 403,
    message: `Origin ${origin} is not allowed: the page only answers its own origin (${[...names.origins].join(', ')})`,
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
    status: 403,
    message: `this page is its daemon's user's (uid ${own}) and this connection is another user's (uid ${peer}): open it as that user, with "mcp-progress open"`,
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
