/**
 * How the backplane names things on NATS (docs/BACKPLANE.md): the subjects of streams,
 * heartbeats and cancels, the JetStream store, and the servers' URLs without their
 * credentials. Pure: no NATS client here.
 */
import type { ProgressToken } from '../protocol/index.js';

/** The subject token of a progressToken: base64url of its JSON, so "7" and 7 differ. */
export function tokenSubject(token: ProgressToken): string {
  return Buffer.from(JSON.stringify(token), 'utf8').toString('base64url');
}

/** The subjects of one backplane (its prefix) as seen by one daemon (its name). */
export class BackplaneSubjects {
  readonly #prefix: string;
  readonly #name: string;
  /** `<prefix>.s.`: every live stream subject starts so. */
  readonly #streams: string;
  /** `<prefix>.k.`: every kept (stored) stream subject starts so; as long as #streams. */
  readonly #kept: string;

  constructor(prefix: string, name: string) {
    this.#prefix = prefix;
    this.#name = name;
    this.#streams = `${prefix}.s.`;
    this.#kept = `${prefix}.k.`;
  }

  /** Every live stream subject of every host. */
  get allStreams(): string {
    return `${this.#streams}>`;
  }

  /** Every kept stream subject of every host: what the store captures. */
  get allKept(): string {
    return `${this.#kept}>`;
  }

  /** The subject this daemon publishes every message of a token's stream on, live. */
  streamOf(token: ProgressToken): string {
    return `${this.#streams}${this.#name}.${tokenSubject(token)}`;
  }

  /** The subject this daemon puts a token's latest message on now and then, for the store. */
  keptOf(token: ProgressToken): string {
    return `${this.#kept}${this.#name}.${tokenSubject(token)}`;
  }

  /**
   * The host and token part of a live or kept stream subject; undefined when it is neither of
   * this backplane's (`<prefix>.s.<host>.<token>`, `<prefix>.k.<host>.<token>`).
   */
  parseStream(subject: string): { host: string; token: string } | undefined {
    if (!subject.startsWith(this.#streams) && !subject.startsWith(this.#kept)) return undefined;
    const rest = subject.slice(this.#streams.length);
    const dot = rest.indexOf('.');
    const token = rest.slice(dot + 1);
    if (dot <= 0 || token.includes('.')) return undefined;
    return { host: rest.slice(0, dot), token };
  }

  get allHeartbeats(): string {
    return `${this.#prefix}.h.*`;
  }

  heartbeatOf(host: string): string {
    return `${this.#prefix}.h.${host}`;
  }

  /** The host a heartbeat subject names ('' when none). */
  heartbeatHost(subject: string): string {
    return subject.slice(`${this.#prefix}.h.`.length);
  }

  /** Where cancels for a host's streams go. */
  cancelOf(host: string): string {
    return `${this.#prefix}.c.${host}`;
  }

  /** Where a daemon about to join as `host` asks whether a live daemon has that name already. */
  nameCheckOf(host: string): string {
    return `${this.#prefix}.n.${host}`;
  }

  /** The JetStream stream that keeps the last message of each kept stream subject. */
  get store(): string {
    return `${this.#prefix.replaceAll('.', '_')}_streams`;
  }
}

/**
 * The `permissions` block of a nats-server user that is the daemon `name` under `prefix`
 * (docs/BACKPLANE.md, "Security"): it may publish values, dones and heartbeats on its own
 * subjects only (live and kept), cancels to any host, and read everything of the prefix. No
 * purge of the store: a purge takes any subject, so a confined host could erase another's
 * stored values.
 */
export function backplanePermissions(prefix: string, name: string): string {
  const subjects = new BackplaneSubjects(prefix, name);
  const store = subjects.store;
  const quoted = (list: readonly string[], indent: string) =>
    list.map((subject) => `${indent}${JSON.stringify(subject)}`).join(',\n');
  const publish = [
    `${prefix}.s.${name}.*`,
    `${prefix}.k.${name}.*`,
    subjects.heartbeatOf(name),
    subjects.nameCheckOf(name),
    subjects.cancelOf('*'),
    '$JS.API.INFO',
    `$JS.API.STREAM.CREATE.${store}`,
    `$JS.API.STREAM.INFO.${store}`,
    `$JS.API.CONSUMER.CREATE.${store}`,
    `$JS.API.CONSUMER.CREATE.${store}.>`,
    `$JS.API.CONSUMER.INFO.${store}.>`,
    `$JS.API.CONSUMER.DELETE.${store}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${store}.>`,
  ];
  const subscribe = [
    subjects.allStreams,
    subjects.allKept,
    subjects.allHeartbeats,
    subjects.cancelOf(name),
    subjects.nameCheckOf(name),
    '_INBOX.>',
  ];
  return `permissions: {
  # made by: mcp-progress nats-permissions --nats-name ${name} --nats-prefix ${prefix}
  publish: {
    allow: [
${quoted(publish, '      ')}
    ]
  }
  subscribe: {
    allow: [
${quoted(subscribe, '      ')}
    ]
  }
  # the answer to another daemon's name check goes to its reply subject
  allow_responses: true
}
`;
}

/** The servers without credentials, and the credentials the URLs carried (NATS clients take them apart). */
export function splitCredentials(urls: readonly string[]): {
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
} {
  const out: { servers: string[]; user?: string; pass?: string; token?: string } = {
    servers: [],
  };
  for (const url of urls) {
    const match = /^([a-z]+:\/\/)?([^@/]*)@(.+)$/.exec(url);
    if (match === null) {
      out.servers.push(url);
      continue;
    }
    out.servers.push(`${match[1] ?? ''}${match[3]}`);
    const userinfo = match[2] ?? '';
    const colon = userinfo.indexOf(':');
    if (out.user !== undefined || out.token !== undefined) continue;
    if (colon < 0) out.token = decodeURIComponent(userinfo);
    else {
      out.user = decodeURIComponent(userinfo.slice(0, colon));
      out.pass = decodeURIComponent(userinfo.slice(colon + 1));
    }
  }
  return out;
}

/** URLs as they may be logged: without a password or token. */
export function redacted(urls: readonly string[]): string {
  return splitCredentials(urls).servers.join(', ');
}
