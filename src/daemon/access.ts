/**
 * Who may talk to the gateway port, by name: the `Host` a request names (a page on another
 * site whose DNS name was rebound to 127.0.0.1 names its own host, not ours) and the
 * `Origin` of the daemon's own page. One check, run on every request and upgrade.
 */
import type { IncomingMessage } from 'node:http';
import { networkInterfaces } from 'node:os';

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

export interface Refusal {
  readonly status: number;
  readonly message: string;
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
    status: 421,
    message:
      host === undefined
        ? `the request has no Host header: send Host with one of this daemon's names (${ours})`
        : `Host ${JSON.stringify(host)} is not one of this daemon's names (${ours}): connect to one of those; the check keeps pages of other sites out (DNS rebinding)`,
  };
}
