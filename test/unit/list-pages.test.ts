/**
 * progress/list pages and progress/get, from the pure router through the
 * JSON-RPC layer: every stream exactly once across the pages, each page
 * within its count and byte budget, and a cursor the daemon never gave is
 * an invalid_params error.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { cursorPosition, type GatewayBackend, handleRpcText } from '../../src/daemon/rpc.js';
import type { ListResult, ProgressToken, StreamSummary } from '../../src/protocol/index.js';

function routerWith(count: number, message = ''): Router {
  const router = new Router({ ...DEFAULT_ROUTER_OPTIONS, defaultMinIntervalMs: 0 }, () => {});
  for (let i = 0; i < count; i++)
    router.publish(1, { v: 1, progressToken: `job-${i}`, progress: i, message }, i);
  return router;
}

function backendOf(router: Router, maxBytes: number): GatewayBackend {
  return {
    subscribe: (session, params) => router.subscribe(session, params, 0),
    unsubscribe: (session, token) => router.unsubscribe(session, token),
    list: (after, limit) => router.page(after, limit, maxBytes),
    get: (token) => router.get(token),
    cancel: () => 0,
    status: () => ({}),
  };
}

let nextId = 1;
function call(backend: GatewayBackend, method: string, params?: unknown) {
  const text = handleRpcText(
    1,
    JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    backend,
  );
  return JSON.parse(text ?? 'null') as {
    result?: unknown;
    error?: { code: number; message: string; data: { code: string } };
  };
}

/** Every page from the first, as the daemon answers them. */
function allPages(backend: GatewayBackend, params: { limit?: number } = {}): ListResult[] {
  const pages: ListResult[] = [];
  let cursor: string | undefined;
  do {
    const reply = call(
      backend,
      'progress/list',
      cursor === undefined ? params : { ...params, cursor },
    );
    const page = reply.result as ListResult;
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== undefined && pages.length < 10_000);
  return pages;
}

const tokens = (streams: StreamSummary[]): ProgressToken[] => streams.map((s) => s.progressToken);

describe('progress/list pages', () => {
  it('without params answers every stream when they fit one page, with no nextCursor', () => {
    const backend = backendOf(routerWith(5), 1 << 20);
    const reply = call(backend, 'progress/list');
    expect(tokens((reply.result as ListResult).streams)).toEqual(
      Array.from({ length: 5 }, (_, i) => `job-${i}`),
    );
    expect(reply.result).not.toHaveProperty('nextCursor');
  });

  it('pages by limit: every stream exactly once, in order', () => {
    const backend = backendOf(routerWith(2500), 1 << 30);
    const pages = allPages(backend, { limit: 1000 });
    expect(pages.map((p) => p.streams.length)).toEqual([1000, 1000, 500]);
    expect(pages.flatMap((p) => tokens(p.streams))).toEqual(
      Array.from({ length: 2500 }, (_, i) => `job-${i}`),
    );
  });

  it('the default page holds at most 1000 streams', () => {
    const backend = backendOf(routerWith(1001), 1 << 30);
    const pages = allPages(backend);
    expect(pages.map((p) => p.streams.length)).toEqual([1000, 1]);
  });

  it('cuts a page at the byte budget, never below one stream', () => {
    const maxBytes = 16 * 1024;
    const backend = backendOf(routerWith(200, 'x'.repeat(1000)), maxBytes);
    const pages = allPages(backend);
    expect(pages.length).toBeGreaterThan(10);
    for (const page of pages) {
      expect(page.streams.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(JSON.stringify(page.streams))).toBeLessThanOrEqual(maxBytes);
    }
    expect(pages.flatMap((p) => tokens(p.streams))).toHaveLength(200);
    // One stream larger than the budget still gets a page of its own.
    const tiny = backendOf(routerWith(3, 'x'.repeat(1000)), 10);
    expect(allPages(tiny).map((p) => p.streams.length)).toEqual([1, 1, 1]);
  });

  it('a stream that starts while a client pages comes in a later page', () => {
    const router = routerWith(10);
    const backend = backendOf(router, 1 << 30);
    const first = call(backend, 'progress/list', { limit: 4 }).result as ListResult;
    router.publish(1, { v: 1, progressToken: 'late', progress: 1 }, 20);
    const rest = allPagesFrom(backend, first.nextCursor);
    expect([...tokens(first.streams), ...rest]).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `job-${i}`),
      'late',
    ]);
  });

  it('a cursor it never gave, or a limit out of range, is invalid_params', () => {
    const backend = backendOf(routerWith(3), 1 << 20);
    for (const params of [
      { cursor: 'abc' },
      { cursor: '-1' },
      { cursor: '01' },
      { limit: 0 },
      { limit: 1001 },
    ]) {
      const reply = call(backend, 'progress/list', params);
      expect(reply.error?.data.code, JSON.stringify(params)).toBe('invalid_params');
    }
  });

  it('cursorPosition reads only what the daemon writes', () => {
    expect(cursorPosition(undefined)).toBeUndefined();
    expect(cursorPosition('0')).toBe(0);
    expect(cursorPosition('12345')).toBe(12345);
    expect(cursorPosition('1e3')).toBeNull();
    expect(cursorPosition('99999999999999999')).toBeNull();
  });
});

describe('progress/get', () => {
  it('answers one stream by token, with its type intact, and {} for an unknown one', () => {
    const router = routerWith(3);
    router.publish(1, { v: 1, progressToken: 7, progress: 2 }, 5);
    const backend = backendOf(router, 1 << 20);
    expect(call(backend, 'progress/get', { progressToken: 7 }).result).toMatchObject({
      stream: { progressToken: 7, state: 'active', last: { progress: 2 } },
    });
    expect(call(backend, 'progress/get', { progressToken: '7' }).result).toEqual({});
    expect(call(backend, 'progress/get', {}).error?.data.code).toBe('invalid_params');
  });
});

function allPagesFrom(backend: GatewayBackend, cursor: string | undefined): ProgressToken[] {
  const out: ProgressToken[] = [];
  let next = cursor;
  while (next !== undefined) {
    const page = call(backend, 'progress/list', { cursor: next, limit: 4 }).result as ListResult;
    out.push(...tokens(page.streams));
    next = page.nextCursor;
  }
  return out;
}
