/**
 * The one-time ticket in the URL that `mcp-progress open` prints: a nonce and an expiry signed
 * with the daemon's secret (read from daemon.json, mode 0600), so the secret itself never
 * appears in a URL, a browser's history or a terminal's scrollback. The daemon accepts each
 * nonce once, before its expiry, and trades it for a page cookie.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { PAGE_TICKET_TTL_MS } from './defaults.js';

/** The query parameter of the page's URL that carries the ticket. */
export const PAGE_TICKET_PARAM = 'ticket';

export function mintPageTicket(secret: string, now = Date.now()): string {
  const body = `${randomBytes(16).toString('base64url')}.${now + PAGE_TICKET_TTL_MS}`;
  return `${body}.${sign(secret, `ticket:${body}`)}`;
}

/** The page's URL for a daemon whose gateway is `gatewayUrl` (the `url` of daemon.json). */
export function pageUrl(gatewayUrl: string, ticket: string): string {
  const url = new URL(gatewayUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  url.pathname = '/';
  url.search = `?${PAGE_TICKET_PARAM}=${encodeURIComponent(ticket)}`;
  return url.href;
}

export type TicketCheck =
  | { readonly ok: true; readonly nonce: string; readonly expiresAt: number }
  | { readonly ok: false; readonly message: string };

/** Checks the signature and the expiry; the caller checks that the nonce is new. */
export function checkPageTicket(secret: string, ticket: string, now = Date.now()): TicketCheck {
  const parts = ticket.split('.');
  const [nonce, expiry, signature] = parts;
  if (parts.length !== 3 || nonce === undefined || expiry === undefined || signature === undefined)
    return { ok: false, message: 'the ticket is not one of `mcp-progress open`' };
  const expected = Buffer.from(sign(secret, `ticket:${nonce}.${expiry}`));
  const presented = Buffer.from(signature);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) {
    return {
      ok: false,
      message: 'the ticket was not made for this daemon (it changes its secret at every start)',
    };
  }
  const expiresAt = Number(expiry);
  if (!(expiresAt > now)) return { ok: false, message: 'the ticket has expired' };
  return { ok: true, nonce, expiresAt };
}

export function sign(key: string | Buffer, text: string): string {
  return createHmac('sha256', key).update(text).digest('base64url');
}
