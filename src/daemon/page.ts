/**
 * The live page on the gateway port: `GET /` (one static page from page/ in the package: HTML,
 * CSS and a small script, no build step), `GET /events` (its stream, page-feed.ts) and
 * `POST /cancel` (progress/cancel for one job). All need the page's cookie (page-access.ts);
 * the gateway has checked `Host` already. Headers keep the page to its own origin: a strict
 * Content-Security-Policy (scripts and styles from this origin only, nothing from elsewhere),
 * nosniff, no framing, no referrer.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProgressToken } from '../protocol/frames.js';
import { type Refusal, sendRefusal } from './access.js';
import { type GatewayEndpoint, type HttpHandler, requestTarget } from './gateway.js';
import { ownerRefusal, type PageAccess } from './page-access.js';
import type { PageFeed } from './page-feed.js';
import { PAGE_HEADERS } from './page-headers.js';

export const PAGE_PATHS = {
  page: '/',
  script: '/page.js',
  style: '/page.css',
  events: '/events',
  cancel: '/cancel',
} as const;

/** A cancel's body is one token and a reason: anything longer is not from the page. */
const MAX_CANCEL_BODY_BYTES = 4096;

const ASSETS = {
  [PAGE_PATHS.page]: { file: 'index.html', type: 'text/html; charset=utf-8' },
  [PAGE_PATHS.script]: { file: 'page.js', type: 'text/javascript; charset=utf-8' },
  [PAGE_PATHS.style]: { file: 'page.css', type: 'text/css; charset=utf-8' },
} as const;

export interface PageBackend {
  readonly access: PageAccess;
  readonly feed: PageFeed;
  /** progress/cancel: tells the stream's workers; returns how many were told. */
  cancel(token: ProgressToken, reason: string | undefined): number;
}

export function addPageRoutes(endpoint: GatewayEndpoint, backend: PageBackend): void {
  const { access, feed } = backend;
  const cookie = (request: IncomingMessage) => access.cookieRefusal(request, endpoint.names);
  // Every page route: its own check, then, the ticket or cookie being good, that the other end
  // is the daemon's user; its refusals carry the page's headers too.
  const route = (
    method: string,
    path: string,
    handler: HttpHandler,
    check: (request: IncomingMessage) => Refusal | undefined,
  ) =>
    endpoint.route(
      method,
      path,
      handler,
      (request) => check(request) ?? ownerRefusal(request, endpoint),
      PAGE_HEADERS,
    );
  const assets = new Map<string, Buffer>();
  const asset = (path: keyof typeof ASSETS): Buffer => {
    let body = assets.get(path);
    if (body === undefined) {
      body = readFileSync(new URL(`../../page/${ASSETS[path].file}`, import.meta.url));
      assets.set(path, body);
    }
    return body;
  };
  const serve =
    (path: keyof typeof ASSETS) => (_request: IncomingMessage, response: ServerResponse) => {
      response.writeHead(200, { ...PAGE_HEADERS, 'content-type': ASSETS[path].type });
      response.end(asset(path));
    };
  route(
    'GET',
    PAGE_PATHS.page,
    (request, response) => {
      const setCookie = access.redeem(request);
      if (setCookie === undefined) {
        serve(PAGE_PATHS.page)(request, response);
        return;
      }
      // The ticket leaves the address bar (and the history) with this redirect.
      response.writeHead(303, { ...PAGE_HEADERS, 'set-cookie': setCookie, location: '/' });
      response.end();
    },
    (request) => access.ticketRefusal(request, endpoint.names),
  );
  route('GET', PAGE_PATHS.script, serve(PAGE_PATHS.script), cookie);
  route('GET', PAGE_PATHS.style, serve(PAGE_PATHS.style), cookie);
  route(
    'GET',
    PAGE_PATHS.events,
    (request, response) => {
      const header = request.headers['last-event-id'];
      // A tab that made a new EventSource (after a refusal) passes its last id in the query.
      const lastEventId =
        (Array.isArray(header) ? header[0] : header) ??
        requestTarget(request).query.get('lastEventId') ??
        undefined;
      // A fresh cookie on every stream: a page kept open renews its own (the feed ends the stream
      // at half the cookie's lifetime, and the browser comes back with this one), until the end
      // of its ticket's redemption, where the stream ends too.
      const renewal = access.renewal(request);
      feed.open(
        request,
        response,
        lastEventId,
        { 'set-cookie': renewal.setCookie },
        renewal.streamMs,
      );
    },
    cookie,
  );
  route(
    'POST',
    PAGE_PATHS.cancel,
    (request, response) => cancel(request, response, backend),
    (request) => cancelRefusal(request, endpoint, access),
  );
}

/**
 * A cancel changes state, so more than the cookie: an Origin of the daemon's own (a browser
 * sends it on every POST; a form of another site carries its own) and a JSON body, which no
 * form can send without a CORS preflight that this daemon never answers.
 */
function cancelRefusal(
  request: IncomingMessage,
  endpoint: GatewayEndpoint,
  access: PageAccess,
): Refusal | undefined {
  const origin = request.headers.origin;
  if (origin === undefined) {
    return {
      code: 'origin_required',
      message: `a cancel needs an Origin header of this daemon (${[...endpoint.names.origins].join(', ')}): send it from the page, which a browser does`,
    };
  }
  const refusal = access.cookieRefusal(request, endpoint.names);
  if (refusal !== undefined) return refusal;
  if (!/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) {
    return {
      code: 'unsupported_media_type',
      message: 'send the cancel as `Content-Type: application/json`, {"progressToken": ...}',
    };
  }
  return undefined;
}

function cancel(request: IncomingMessage, response: ServerResponse, backend: PageBackend): void {
  const parts: Buffer[] = [];
  let size = 0;
  request.on('data', (chunk: Buffer) => {
    size += chunk.length;
    // Past the cap, read on (so that the answer is read, not cut off) but keep nothing, as /mcp.
    if (size <= MAX_CANCEL_BODY_BYTES) parts.push(chunk);
  });
  request.on('end', async () => {
    if (size > MAX_CANCEL_BODY_BYTES) {
      sendRefusal(
        response,
        {
          code: 'body_too_large',
          message: `the body is over ${MAX_CANCEL_BODY_BYTES} bytes: send {"progressToken": ..., "reason"?: ...}`,
        },
        PAGE_HEADERS,
      );
      return;
    }
    // Loaded here: zod and the schemas are not part of a daemon's start (module-graph.test.ts).
    const { cancelParamsSchema } = await import('../protocol/frames.js');
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(parts).toString('utf8'));
    } catch {
      sendRefusal(
        response,
        { code: 'invalid_body', message: 'the body is not JSON: send {"progressToken": ...}' },
        PAGE_HEADERS,
      );
      return;
    }
    const parsed = cancelParamsSchema.safeParse(body);
    if (!parsed.success) {
      sendRefusal(
        response,
        {
          code: 'invalid_body',
          message: `expected {"progressToken": string | integer, "reason"?: string}: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
        },
        PAGE_HEADERS,
      );
      return;
    }
    const { progressToken, reason } = parsed.data;
    const workers = backend.cancel(progressToken, reason ?? 'cancelled from the page');
    response.writeHead(200, { ...PAGE_HEADERS, 'content-type': 'application/json' });
    response.end(JSON.stringify({ workers }));
  });
}
