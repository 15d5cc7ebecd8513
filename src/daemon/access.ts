/**
 * Who may talk to the gateway port, by name: the `Host` a request names (a page on another
 * site whose DNS name was rebound to 127.0.0.1 names its own host, not ours) and the
 * `Origin` of the daemon's own page. One check, run on every request and upgrade.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { networkInterfaces } from 'node:os';
import { errorReply, HTTP_REFUSALS, type HttpRefusalCode } from '../protocol/errors.js';

/** The names a request may use for this daemon, and the origins of its own page. */
export interface OwnNames {
  /** `host:port` values, lower case, IPv6 in brackets. */
  readonly hosts: ReadonlySet<string>;
  /** `http://host:port` of the same names: the page served at `/` sends these. */
  readonly origins: ReadonlySet<string>;
}

const WILDCARD = new Set(['0.0.0.0', '::']);

/**
 * The daemon's own names on `port`: `localhost` and the address it listens on; on a wildcard
 * address every address of this machine's interfaces, loopback ones included.
 */
export function ownNames(listenHost: string, port: number): OwnNames {
  const addresses = new Set<string>([listenHost]);
  if (WILDCARD.has(listenHost)) {
    for (const entries of Object.values(networkInterfaces())) {
      for (const entry of entries ?? []) addresses.add(entry.address);
    }
  }
  const hosts = new Set<string>([`localhost:${port}`]);
  for (const address of addresses) {
    if (WILDCARD.has(address)) continue;
    hosts.add(`${address.includes(':') ? `[${address}]` : address}:${port}`.toLowerCase());
  }
  return { hosts, origins: new Set([...hosts].map((host) => `http://${host}`)) };
}

/**
 * The names on the local link (the gateway's Unix socket): Node's HTTP client, and ws under it,
 * send `Host: localhost` on a Unix socket, and no Origin. Nothing else is accepted there: no
 * browser reaches a Unix socket, so a page's origin has no business on it.
 */
export const LOCAL_LINK_NAMES: OwnNames = { hosts: new Set(['localhost']), origins: new Set() };

/** Why a request is refused: its code (which gives the HTTP status) and what to do about it. */
export interface Refusal {
  readonly code: HttpRefusalCode;
  readonly message: string;
}

/** The HTTP status of a refusal. */
export function refusalStatus(refusal: Refusal): number {
  return HTTP_REFUSALS[refusal.code].status;
}

/**
 * Answers an HTTP request with its refusal: the code's status, one JSON-RPC error as the
 * body (the shape of every coded error of the daemon), indented so that a browser shown it, or a
 * person reading curl's output, reads the message as it is. `headers` are the route's own (the
 * page's) and any the status asks for (Allow).
 */
export function sendRefusal(
  response: ServerResponse,
  refusal: Refusal,
  headers: Readonly<Record<string, string>> = {},
): void {
  response.writeHead(refusalStatus(refusal), {
    ...headers,
    'content-type': REFUSAL_CONTENT_TYPE,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  response.end(refusalBody(refusal));
}

export const REFUSAL_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The body of a refusal: the JSON-RPC error of its code, on lines of its own. */
export function refusalBody({ code, message }: Refusal): string {
  return `${JSON.stringify(errorReply(HTTP_REFUSALS[code].code, code, message), null, 2)}\n`;
}

/**
 * 421 when the request names another host than this daemon (DNS rebinding: a foreign page's
 * name pointed at 127.0.0.1), or none; undefined when the name is one of ours.
 */
export function hostRefusal(request: IncomingMessage, names: OwnNames): Refusal | undefined {
  const host = request.headers.host;
  if (host !== undefined && names.hosts.has(host.toLowerCase())) return undefined;
  const ours = [...names.hosts].join(', ');
  return {
    code: 'misdirected',
    message:
      host === undefined
        ? `the request has no Host header: send one of this daemon's names (${ours}) as its Host`
        : `Host \`${host}\` is not one of this daemon's names (${ours}): connect to one of those; the check keeps pages of other sites out (DNS rebinding)`,
  };
}
