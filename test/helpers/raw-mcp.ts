/**
 * Raw JSON-RPC clients of the bridge's MCP server, one face over stdio (a real `mcp-progress mcp`)
 * and over the daemon's /mcp (raw fetch, SSE read by hand), for either revision: 2025-11-25
 * (initialize; over HTTP a session and its GET stream) or 2026-07-28 (server/discover, the
 * `_meta` envelope on every request, over HTTP the standard headers). No SDK on the client side.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { BIN, eventually, type RunningDaemon, waitForExit } from './daemon.js';
import { httpBase, postMcp } from './mcp.js';
import { NEWEST_REVISION } from './mcp-v2.js';
import { publishingWorker, type RawWorker } from './worker.js';

export type Revision = '2025-11-25' | typeof NEWEST_REVISION;

export interface RawMessage {
  jsonrpc?: '2.0';
  id?: number | string;
  method?: string;
  params?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  result?: Record<string, unknown> & { _meta?: Record<string, unknown> };
  error?: { code: number; message: string; data?: unknown };
}

/** One raw client, connected (initialize or server/discover answered). */
export interface RawMcp {
  /** Every message received, in order (over HTTP: from every response stream and the GET stream). */
  readonly received: RawMessage[];
  /** The answer to the opening initialize or server/discover. */
  readonly opening: RawMessage;
  /** Sends a request and waits for its answer. */
  request(method: string, params?: Record<string, unknown>): Promise<RawMessage>;
  /** Sends a request without waiting for its answer (a listen); returns its id. */
  send(method: string, params?: Record<string, unknown>): number;
  /** Ends a request sent with send(): notifications/cancelled on stdio; over HTTP, its stream closes. */
  cancelRequest(id: number): Promise<void>;
  /**
   * Waits for the end of a request sent with send(): its answer, and over HTTP its stream read
   * to the end (so every message the server wrote to it is in `received`). Returns the answer.
   */
  ended(id: number): Promise<RawMessage>;
  close(): Promise<void>;
}

export interface RawTransport {
  readonly name: string;
  connect(daemon: RunningDaemon, revision: Revision): Promise<RawMcp>;
}

export const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** The `_meta` a 2026-07-28 request carries; a request's own `_meta` entries win. */
function envelope(params: Record<string, unknown> | undefined): Record<string, unknown> {
  const own = (params?._meta ?? {}) as Record<string, unknown>;
  return {
    ...params,
    _meta: {
      'io.modelcontextprotocol/protocolVersion': NEWEST_REVISION,
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
      [CLIENT_CAPABILITIES]: {},
      ...own,
    },
  };
}

function answerTo(received: RawMessage[], id: number, timeoutMs = 30_000): Promise<RawMessage> {
  return eventually(
    () => received.find((m) => m.id === id && m.method === undefined),
    timeoutMs,
    `the answer to request ${id}`,
  );
}

/** How long ended() waits for the answer that ends a request (a listen the server should end). */
const END_TIMEOUT_MS = 10_000;

const OPENING = {
  '2025-11-25': {
    method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: 'raw-tasks', version: '0' },
    },
  },
  [NEWEST_REVISION]: { method: 'server/discover', params: {} },
} as const;

/** Sends the opening request of `revision` and returns its answer (an error answer throws). */
async function open(
  received: RawMessage[],
  send: RawMcp['send'],
  revision: Revision,
): Promise<RawMessage> {
  const opening = await answerTo(
    received,
    send(OPENING[revision].method, OPENING[revision].params),
  );
  if (opening.error !== undefined) throw new Error(opening.error.message);
  return opening;
}

/** What every raw client has, from what it received and how it sends. */
function connected(received: RawMessage[], opening: RawMessage, send: RawMcp['send']) {
  return {
    received,
    opening,
    send,
    request: (method: string, params?: Record<string, unknown>) =>
      answerTo(received, send(method, params)),
  };
}

/** Progress notifications under `label` among what `mcp` received. */
export function progressFor(mcp: RawMcp, label: string): RawMessage[] {
  return mcp.received.filter(
    (m) => m.method === 'notifications/progress' && m.params?.progressToken === label,
  );
}

/** Calls get_progress on `t` through `mcp` until the daemon's stream of it `holds`. */
export function untilStream(
  mcp: RawMcp,
  t: string,
  holds: (stream: { state?: string; progress?: number }) => boolean,
): Promise<true> {
  return eventually(async () => {
    const read = await mcp.request('tools/call', {
      name: 'get_progress',
      arguments: { progressToken: t },
    });
    const content = (read.result?.structuredContent ?? {}) as {
      stream?: { state?: string; progress?: number };
    };
    return content.stream !== undefined && holds(content.stream) ? true : undefined;
  });
}

/**
 * `mcp-progress mcp` on the daemon's runtime dir, spoken to as newline-delimited JSON-RPC; with
 * its stdout, which a test may pause as a host that stops reading does.
 */
export async function connectRawStdio(
  daemon: RunningDaemon,
  revision: Revision,
): Promise<RawMcp & { readonly stdout: Readable }> {
  const child: ChildProcess = spawn(
    process.execPath,
    [BIN, 'mcp', '--runtime-dir', daemon.runtimeDir],
    { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
  );
  const received: RawMessage[] = [];
  let buffer = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    buffer += text;
    let newline = buffer.indexOf('\n');
    while (newline !== -1) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line !== '') received.push(JSON.parse(line) as RawMessage);
      newline = buffer.indexOf('\n');
    }
  });
  const write = (message: object) => child.stdin?.write(`${JSON.stringify(message)}\n`);
  let nextId = 1;
  const send = (method: string, params?: Record<string, unknown>): number => {
    const id = nextId++;
    const sent = revision === NEWEST_REVISION ? envelope(params) : params;
    write({ jsonrpc: '2.0', id, method, ...(sent === undefined ? {} : { params: sent }) });
    return id;
  };
  const opening = await open(received, send, revision);
  if (revision === '2025-11-25') write({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return {
    ...connected(received, opening, send),
    stdout: child.stdout as Readable,
    ended: (id) => answerTo(received, id, END_TIMEOUT_MS),
    async cancelRequest(id) {
      const params = { requestId: id };
      write({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: revision === NEWEST_REVISION ? envelope(params) : params,
      });
    },
    async close() {
      child.stdin?.end();
      child.kill('SIGTERM');
      await waitForExit(child);
    },
  };
}

export const RAW_STDIO: RawTransport = { name: 'stdio', connect: connectRawStdio };

/** Reads a response body: one JSON message, or SSE events as they come. */
async function readMessages(
  response: Response,
  onMessage: (message: RawMessage) => void,
): Promise<void> {
  if (response.body === null) return;
  if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const text = await response.text();
    if (text.trim() !== '') onMessage(JSON.parse(text) as RawMessage);
    return;
  }
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (data !== '') onMessage(JSON.parse(data) as RawMessage);
      end = buffer.indexOf('\n\n');
    }
  }
}

/** Which body field a 2026-07-28 request's Mcp-Name header mirrors (SEP-2243, SEP-2663). */
const NAME_FIELD: Record<string, string> = {
  'tools/call': 'name',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** The daemon's /mcp, by raw fetch: every POST's answer (JSON or SSE) read into `received`. */
export const RAW_HTTP: RawTransport = {
  name: 'HTTP /mcp',
  async connect(daemon, revision) {
    const url = `${httpBase(daemon.info)}/mcp`;
    const auth = { authorization: `Bearer ${daemon.info.secret}` };
    const received: RawMessage[] = [];
    const streams = new Map<number, AbortController>();
    const reading = new Set<Promise<void>>();
    /** The read of each request's response, by its id. */
    const reads = new Map<number, Promise<void>>();
    const read = (response: Promise<Response>): Promise<void> => {
      const done = response
        .then((answer) => readMessages(answer, (message) => received.push(message)))
        // A stream this client closed ends its read.
        .catch(() => {})
        .finally(() => reading.delete(done));
      reading.add(done);
      return done;
    };
    let headers: Record<string, string> = { ...auth, 'mcp-protocol-version': NEWEST_REVISION };
    const closeAll = new AbortController();
    let initialized: RawMessage | undefined;
    if (revision === '2025-11-25') {
      const init = await postMcp(url, { jsonrpc: '2.0', id: 0, ...OPENING[revision] }, auth);
      await readMessages(init, (message) => {
        initialized = message;
      });
      headers = {
        ...auth,
        'mcp-session-id': init.headers.get('mcp-session-id') ?? '',
        'mcp-protocol-version': revision,
      };
      await (
        await postMcp(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)
      ).text();
      // The session's GET stream: where what belongs to no request (a task's progress) goes.
      const get = await fetch(url, {
        headers: { ...headers, accept: 'text/event-stream' },
        signal: closeAll.signal,
      });
      read(Promise.resolve(get));
    }
    let nextId = 1;
    const send = (method: string, params?: Record<string, unknown>): number => {
      const id = nextId++;
      const stream = new AbortController();
      streams.set(id, stream);
      let requestHeaders = headers;
      let sent = params;
      if (revision === NEWEST_REVISION) {
        sent = envelope(params);
        const field = NAME_FIELD[method];
        const name = field === undefined ? undefined : params?.[field];
        requestHeaders = {
          ...headers,
          'mcp-method': method,
          ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
        };
      }
      const body = { jsonrpc: '2.0', id, method, ...(sent === undefined ? {} : { params: sent }) };
      const signal = AbortSignal.any([stream.signal, closeAll.signal]);
      reads.set(id, read(postMcp(url, body, requestHeaders, signal)));
      return id;
    };
    const opening = initialized ?? (await open(received, send, revision));
    return {
      ...connected(received, opening, send),
      async cancelRequest(id) {
        streams.get(id)?.abort();
      },
      async ended(id) {
        const answer = await answerTo(received, id, END_TIMEOUT_MS);
        // The answer is the stream's last message: the server closes it after.
        await reads.get(id);
        return answer;
      },
      async close() {
        closeAll.abort();
        await Promise.all(reading);
      },
    };
  },
};

export const RAW_TRANSPORTS: RawTransport[] = [RAW_STDIO, RAW_HTTP];

/** A task test's parts: a raw client, a worker publishing on `t`, and a task of watch_progress on it. */
export interface TaskOnJob<Task> {
  readonly mcp: RawMcp;
  readonly t: string;
  readonly worker: RawWorker;
  readonly task: Task;
  /** Ends the worker (if still there) and the client. */
  end(): Promise<void>;
}

/** Starts a worker on `t` (the daemon's `socket`), then a task on it by `start` with `label`. */
export async function taskOnJob<Task>(
  mcp: RawMcp,
  socket: string,
  t: string,
  label: string,
  start: (mcp: RawMcp, t: string, label: string) => Promise<Task>,
): Promise<TaskOnJob<Task>> {
  const worker = await publishingWorker(socket, t);
  const task = await start(mcp, t, label);
  return {
    mcp,
    t,
    worker,
    task,
    async end() {
      worker.destroy();
      await mcp.close();
    },
  };
}
