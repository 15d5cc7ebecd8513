/** The live page from Node: a page cookie got the way a browser gets it, and an SSE reader. */
import { type IncomingMessage, request } from 'node:http';
import { runCli } from './daemon.js';

/** A one-time URL of the real `mcp-progress open --print`. */
export async function pageTicketUrl(runtimeDir: string): Promise<string> {
  const opened = await runCli(['open', '--print', '--runtime-dir', runtimeDir]);
  if (opened.code !== 0) throw new Error(`mcp-progress open failed: ${opened.stderr}`);
  return opened.stdout.trim();
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

/** One request with exactly these headers (Host included); the whole answer. */
export function httpAsk(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpAnswer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: options.method ?? 'GET',
        headers: options.headers,
      },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

/** Redeems a one-time URL; returns the `name=value` of the cookie it sets. */
export async function pageCookie(runtimeDir: string): Promise<string> {
  const answer = await httpAsk(await pageTicketUrl(runtimeDir));
  const setCookie = answer.headers['set-cookie']?.[0];
  if (answer.status !== 303 || setCookie === undefined)
    throw new Error(`the ticket was not redeemed: ${answer.status} ${answer.body}`);
  return setCookie.split(';')[0] ?? '';
}

export interface SseEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: string;
  /** When the reader got it, performance.now(). */
  readonly at: number;
}

export interface SseStream {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly events: SseEvent[];
  /** Comments (`: keepalive`) received. */
  readonly comments: string[];
  /** The first event after those taken that matches; fails after the timeout. */
  next(match: (event: SseEvent) => boolean, what: string, timeoutMs?: number): Promise<SseEvent>;
  /** Stops reading: what the daemon sends piles up in the kernel's buffers, then in its own. */
  pause(): void;
  /** Settles when the daemon ended or cut the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Opens `GET /events` and parses what arrives (the SSE format of the HTML standard). */
export function openEvents(baseUrl: string, headers: Record<string, string>): Promise<SseStream> {
  const target = new URL('/events', baseUrl);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      { host: target.hostname, port: target.port, path: target.pathname, headers },
      (response) => {
        const events: SseEvent[] = [];
        const comments: string[] = [];
        const listeners = new Set<() => void>();
        let buffer = '';
        let taken = 0;
        const ended = new Promise<void>((resolveEnded) => {
          response.once('close', () => resolveEnded());
          response.once('error', () => resolveEnded());
        });
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          buffer += chunk;
          let end = buffer.indexOf('\n\n');
          while (end !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = 'message';
            let id: string | undefined;
            const data: string[] = [];
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) comments.push(line);
              else if (line.startsWith('event: ')) event = line.slice(7);
              else if (line.startsWith('id: ')) id = line.slice(4);
              else if (line.startsWith('data: ')) data.push(line.slice(6));
            }
            if (data.length > 0)
              events.push({ event, id, data: data.join('\n'), at: performance.now() });
            end = buffer.indexOf('\n\n');
          }
          for (const listener of listeners) listener();
        });
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          events,
          comments,
          next(match, what, timeoutMs = 10_000) {
            return new Promise((resolveNext, rejectNext) => {
              const look = () => {
                while (taken < events.length) {
                  const event = events[taken++] as SseEvent;
                  if (match(event)) {
                    cleanup();
                    resolveNext(event);
                    return;
                  }
                }
              };
              const timer = setTimeout(() => {
                cleanup();
                rejectNext(
                  new Error(`no ${what} within ${timeoutMs} ms; got ${JSON.stringify(events)}`),
                );
              }, timeoutMs);
              const cleanup = () => {
                clearTimeout(timer);
                listeners.delete(look);
              };
              listeners.add(look);
              look();
            });
          },
          pause: () => response.pause(),
          ended,
          close: () => response.destroy(),
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end();
  });
}

/** The jobs of one event's batch. */
export function jobsOf(
  event: SseEvent,
): Array<{ progressToken: unknown; last?: { progress: number } }> {
  return (
    JSON.parse(event.data) as {
      jobs: Array<{ progressToken: unknown; last?: { progress: number } }>;
    }
  ).jobs;
}
