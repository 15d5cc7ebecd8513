/**
 * progress/list and task/list pages and progress/get, from the pure router and task table through
 * the JSON-RPC layer: every stream or task exactly once across the pages, each page within its
 * count and byte budget, and a cursor the daemon never gave is an invalid_params error.
 */
import { describe, expect, it } from 'vitest';
import { cursorPosition } from '../../src/daemon/list-cursor.js';
import { DEFAULT_ROUTER_OPTIONS, Router } from '../../src/daemon/router.js';
import { type GatewayBackend, handleRpcText } from '../../src/daemon/rpc.js';
import { TaskTable } from '../../src/daemon/task-table.js';
import type {
  ListResult,
  ProgressToken,
  StreamSummary,
  TaskListResult,
} from '../../src/protocol/index.js';

function routerWith(count: number, message = ''): Router {
  const router = new Router({ ...DEFAULT_ROUTER_OPTIONS, defaultMinIntervalMs: 0 }, () => {});
  for (let i = 0; i < count; i++)
    router.publish(1, { v: 1, progressToken: `job-${i}`, progress: i, message }, i);
  return router;
}

const EPOCH = 'epochA';

/** A task on each of `count` streams of `router`, in the order of their tokens. */
function tasksOn(router: Router, count: number): TaskTable {
  let ids = 0;
  const tasks = new TaskTable(
    {
      defaultTtlMs: 60_000,
      maxTtlMs: 60_000,
      maxTasks: 10_000,
      pollIntervalMs: 1000,
      expiryCheckMs: 1000,
    },
    () => `task-${String(++ids).padStart(4, '0')}`,
  );
  for (let i = 0; i < count; i++) tasks.create(`job-${i}`, undefined, (t) => router.get(t), 0);
  return tasks;
}

function backendOf(router: Router, maxBytes: number, tasks?: TaskTable): GatewayBackend {
  return {
    subscribe: (session, params) => router.subscribe(session, params, 0),
    unsubscribe: (session, token) => router.unsubscribe(session, token),
    subscribeAll: (session, params) => router.subscribeAll(session, params?.minIntervalMs, 0),
    unsubscribeAll: (session) => router.unsubscribeAll(session),
    list: (after, limit, summaryBytes) => router.page(after, limit, summaryBytes),
    listReplyBytes: () => maxBytes,
    listEpoch: EPOCH,
    positionsIssued: () => router.positionsIssued,
    get: (token) => router.get(token),
    cancel: () => 0,
    status: () => ({}),
    createTask: () => ({ ok: false, code: 'too_many_tasks', message: 'no tasks here' }),
    getTask: () => undefined,
    cancelTask: () => ({ task: undefined, workers: 0 }),
    listTasks: (after, limit, summaryBytes) =>
      tasks === undefined
        ? { tasks: [], next: undefined }
        : tasks.list({ after, limit, maxBytes: summaryBytes }, (t) => router.get(t), 0),
  };
}

/** No method here should fail: one that does fails the test with its message. */
function rethrow(message: string): never {
  throw new Error(message);
}

let nextId = 1;
function call(backend: GatewayBackend, method: string, params?: unknown) {
  const text = handleRpcText(
    1,
    JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    backend,
    rethrow,
  );
  return JSON.parse(text ?? 'null') as {
    result?: unknown;
    error?: { code: number; message: string; data: { code: string } };
  };
}

/**
 * Every page of `method` from the first, as the daemon answers them, each asked with `params` and
 * the last page's cursor; `replies` gets each reply's text.
 */
function everyPage<Page extends { nextCursor?: string | undefined }>(
  method: 'progress/list' | 'task/list',
  backend: GatewayBackend,
  params: { limit?: number },
  replies: string[],
  id: string | number,
): Page[] {
  const pages: Page[] = [];
  let cursor: string | undefined;
  do {
    const text = handleRpcText(
      1,
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method,
        params: cursor === undefined ? params : { ...params, cursor },
      }),
      backend,
      rethrow,
    );
    replies.push(text ?? '');
    const page = (JSON.parse(text ?? 'null') as { result: Page }).result;
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== undefined && pages.length < 10_000);
  return pages;
}

/** Every progress/list page from the first; `replies` gets each reply's text. */
function allPages(
  backend: GatewayBackend,
  params: { limit?: number } = {},
  replies: string[] = [],
  id: string | number = 1,
): ListResult[] {
  return everyPage<ListResult>('progress/list', backend, params, replies, id);
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

  it('cuts a page so that the whole reply is within the budget, never below one stream', () => {
    const maxBytes = 16 * 1024;
    const backend = backendOf(routerWith(200, 'x'.repeat(1000)), maxBytes);
    // A long request id is echoed in the reply: it counts too.
    for (const id of [1, 'i'.repeat(2000)]) {
      const replies: string[] = [];
      const pages = allPages(backend, {}, replies, id);
      expect(pages.length).toBeGreaterThan(10);
      for (const page of pages) expect(page.streams.length).toBeGreaterThan(0);
      for (const text of replies) expect(Buffer.byteLength(text)).toBeLessThanOrEqual(maxBytes);
      // Full pages: the next stream would not have fitted.
      const full = replies.slice(0, -1).map((text) => Buffer.byteLength(text));
      expect(Math.min(...full)).toBeGreaterThan(maxBytes - 1200);
    }
    const pages = allPages(backend);
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

  it('a cursor of another daemon, of this one before a restart, or past what it gave is refused', () => {
    const router = routerWith(30);
    const backend = backendOf(router, 1 << 20);
    const first = call(backend, 'progress/list', { limit: 10 }).result as ListResult;
    expect(first.nextCursor).toMatch(/^epochA\./);
    // The same daemon after a restart: a new epoch, positions from 0 again.
    const restarted = { ...backendOf(routerWith(30), 1 << 20), listEpoch: 'epochB' };
    const foreign = call(restarted, 'progress/list', { cursor: first.nextCursor });
    expect(foreign.error?.data.code).toBe('invalid_params');
    expect(foreign.error?.message).toContain('another daemon, or of this one before it restarted');
    for (const cursor of ['25', '0', '999999999', 'epochA.30', 'epochA.999999999', 'epochA.01']) {
      const reply = call(backend, 'progress/list', { cursor });
      expect(reply.error?.data.code, cursor).toBe('invalid_params');
    }
    // The last position it gave is a cursor (the page after it is empty).
    expect(call(backend, 'progress/list', { cursor: 'epochA.29' }).result).toEqual({ streams: [] });
  });

  it('cursorPosition reads only what the daemon writes', () => {
    const daemon = { listEpoch: 'e1', positionsIssued: () => 100 };
    expect(cursorPosition(undefined, daemon)).toBeUndefined();
    expect(cursorPosition('e1.0', daemon)).toBe(0);
    expect(cursorPosition('e1.99', daemon)).toBe(99);
    expect(typeof cursorPosition('e1.100', daemon)).toBe('string');
    expect(typeof cursorPosition('e1.1e3', daemon)).toBe('string');
    expect(typeof cursorPosition('e2.5', daemon)).toBe('string');
    expect(typeof cursorPosition('e1.99999999999999999', daemon)).toBe('string');
  });
});

/** Every task/list page from the first; `replies` gets each reply's text. */
function allTaskPages(
  backend: GatewayBackend,
  replies: string[] = [],
  id: string | number = 1,
): TaskListResult[] {
  return everyPage<TaskListResult>('task/list', backend, {}, replies, id);
}

describe('task/list pages', () => {
  it('cuts a page so that the whole reply is within the budget, never below one task', () => {
    const maxBytes = 16 * 1024;
    const router = routerWith(200, 'x'.repeat(1000));
    const backend = backendOf(router, maxBytes, tasksOn(router, 200));
    const everyTask = Array.from(
      { length: 200 },
      (_, i) => `task-${String(i + 1).padStart(4, '0')}`,
    );
    // A long request id is echoed in the reply: it counts too.
    for (const id of [1, 'i'.repeat(2000)]) {
      const replies: string[] = [];
      const pages = allTaskPages(backend, replies, id);
      expect(pages.length).toBeGreaterThan(10);
      for (const page of pages) expect(page.tasks.length).toBeGreaterThan(0);
      for (const text of replies) expect(Buffer.byteLength(text)).toBeLessThanOrEqual(maxBytes);
      // Full pages: the next task would not have fitted.
      const full = replies.slice(0, -1).map((text) => Buffer.byteLength(text));
      expect(Math.min(...full)).toBeGreaterThan(maxBytes - 1500);
      // Every task exactly once, in creation order.
      expect(pages.flatMap((page) => page.tasks.map((task) => task.taskId))).toEqual(everyTask);
    }
    // A task larger than the budget still gets a page of its own.
    const small = routerWith(3, 'x'.repeat(1000));
    const tiny = backendOf(small, 10, tasksOn(small, 3));
    expect(allTaskPages(tiny).map((page) => page.tasks.length)).toEqual([1, 1, 1]);
  });

  it('answers an empty table with one page and no nextCursor', () => {
    const router = routerWith(0);
    expect(allTaskPages(backendOf(router, 1 << 20, tasksOn(router, 0)))).toEqual([{ tasks: [] }]);
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
