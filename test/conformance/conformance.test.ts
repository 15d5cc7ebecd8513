/**
 * The conformance corpus (worker.json, gateway.json beside this file): exact input
 * bytes and the replies protocol v1 promises, run against a real daemon over its real
 * worker socket and a real WebSocket. Every byte the daemon sends is then read by a
 * strict parser (Python's json, refusing duplicate keys and lone surrogates).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  ackSchema,
  cancelSchema,
  daemonInfoSchema,
  daemonStatusSchema,
  doneParamsSchema,
  envelopeSchema,
  listResultSchema,
  pongSchema,
  progressParamsSchema,
  rejectedSchema,
  rpcErrorSchema,
} from '../../src/protocol/frames.js';
import { PUBLISHED_SCHEMAS, RESULT_SCHEMA_NAMES } from '../../src/protocol/json-schema.js';
import { DONE_METHOD, PROGRESS_METHOD } from '../../src/protocol/notifications.js';
import { type Envelope, FrameDecoder } from '../../src/protocol/wire.js';
import { startHost } from '../backplane/hosts.js';
import { natsServer, type RunningNats, startNats } from '../backplane/nats-server.js';
import {
  cleanupAll,
  collectOutput,
  eventually,
  ROOT,
  type RunningDaemon,
  startDaemon,
} from '../helpers/daemon.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

interface WorkerCase {
  name: string;
  send?: string[];
  sendHex?: string;
  expect: unknown[];
  closes?: boolean;
  /** Why the daemon does not do this yet: the case must fail until it does. */
  pending?: string;
}

type Step =
  | { worker: string }
  | { ws: string }
  | { wsHex: string }
  /** A WebSocket ping with this payload (hex): its pong is recorded as {"$pong": payload}. */
  | { wsPing: string }
  | { workerExpect: unknown }
  | { wait: number }
  /**
   * Kill the daemon with this signal and start it again on the same runtime directory: the
   * case's session and worker connection end, and later steps use new ones.
   */
  | { restart: NodeJS.Signals };

interface GatewayCase {
  name: string;
  steps: Step[];
  expect: unknown[];
  /** The WebSocket close code the case ends with. */
  closes?: number;
  /**
   * "backplane": the worker connects to daemon conformance-a and the session to daemon
   * conformance-b, two daemons on one nats-server.
   */
  across?: 'backplane';
}

const load = <T>(name: string): { cases: T[] } =>
  JSON.parse(readFileSync(join(import.meta.dirname, name), 'utf8'));
const WORKER_CASES = load<WorkerCase>('worker.json').cases;
const GATEWAY_CASES = load<GatewayCase>('gateway.json').cases;

const PING = Buffer.from('{"type":"ping"}\f');
const SENTINEL = 'conformance-sentinel';

let daemon: RunningDaemon;
/** Every frame (form feed removed) and WebSocket message the daemon sent, byte for byte. */
const sent: Buffer[] = [];
/** The same, parsed: worker replies and gateway messages, to check against the published schemas. */
const workerReplies: Envelope[] = [];
/** Each gateway message, with the method of the request it answers (for a result's schema). */
const gatewayMessages: Array<{ message: unknown; method: string | undefined }> = [];

const DAEMON_ARGS = ['--abandon-grace-ms', '600000'];

beforeAll(async () => {
  daemon = await startDaemon(DAEMON_ARGS);
});

afterAll(async () => {
  await daemon.stop();
  cleanupAll();
});

/** `actual` with each value that a placeholder of `expected` accepts replaced by that placeholder. */
function placeheld(expected: unknown, actual: unknown): unknown {
  if (expected === '$ANY')
    return typeof actual === 'string' && actual.length > 0 ? expected : actual;
  if (expected === '$TIME')
    return Number.isSafeInteger(actual) && (actual as number) > 1e12 ? expected : actual;
  if (expected === '$PID') return actual === daemon.info.pid ? expected : actual;
  if (expected === '$VERSION') return actual === daemon.info.version ? expected : actual;
  if (Array.isArray(expected) && Array.isArray(actual))
    return actual.map((item, i) => placeheld(expected[i], item));
  if (isObject(expected) && isObject(actual)) {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(actual)) out[key] = placeheld(expected[key], value);
    return out;
  }
  return actual;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

interface RawConnection {
  socket: Socket;
  replies: Envelope[];
  closed: () => boolean;
}

async function rawConnection(to: RunningDaemon = daemon): Promise<RawConnection> {
  const socket = connect({ path: to.info.socket });
  const decoder = new FrameDecoder(1 << 20);
  const replies: Envelope[] = [];
  let closed = false;
  let tail = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    // Keep the exact bytes of each frame for the strict parser.
    let bytes = Buffer.concat([tail, chunk]);
    for (let end = bytes.indexOf(0x0c); end !== -1; end = bytes.indexOf(0x0c)) {
      sent.push(Buffer.from(bytes.subarray(0, end)));
      bytes = bytes.subarray(end + 1);
    }
    tail = Buffer.from(bytes);
    for (const envelope of decoder.push(chunk)) {
      if (envelope instanceof Error) throw envelope;
      replies.push(envelope);
      workerReplies.push(envelope);
    }
  });
  socket.on('error', () => {});
  socket.once('close', () => {
    closed = true;
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return { socket, replies, closed: () => closed };
}

describe('worker socket conformance', () => {
  for (const c of WORKER_CASES) {
    const test = c.pending === undefined ? it : it.fails;
    test(`${c.name}${c.pending === undefined ? '' : ` (pending: ${c.pending})`}`, async () => {
      const worker = await rawConnection();
      const bytes =
        c.sendHex !== undefined
          ? Buffer.from(c.sendHex, 'hex')
          : Buffer.from((c.send ?? []).join(''));
      // A ping after the case: its pong proves every reply to the case arrived, and a
      // connection that should have closed answers it instead.
      worker.socket.write(Buffer.concat([bytes, PING]));
      await eventually(
        () => (worker.closed() || worker.replies.length > c.expect.length ? true : undefined),
        15_000,
        `the replies to "${c.name}"`,
      );
      // Unless the sentinel was answered: then it did not close, and the comparison says so.
      if (c.closes && worker.replies.length <= c.expect.length)
        await eventually(() => (worker.closed() ? true : undefined), 15_000, 'the close');
      worker.socket.destroy();
      const pong = { type: 'pong', data: { pid: '$PID', version: '$VERSION', protocol: 1 } };
      const expected = c.closes ? c.expect : [...c.expect, pong];
      expect(placeheld(expected, worker.replies)).toEqual(expected);
      expect(worker.closed() || !c.closes).toBe(true);
    });
  }
});

interface Session {
  ws: WebSocket;
  messages: unknown[];
  /** The method of each request sent, by id. */
  methods: Map<unknown, string>;
  closeCode: () => number | undefined;
}

async function session(to: RunningDaemon = daemon): Promise<Session> {
  const ws = new WebSocket(to.info.url, 'mcp-progress.v1', {
    headers: { authorization: `Bearer ${to.info.secret}` },
  });
  const messages: unknown[] = [];
  const methods = new Map<unknown, string>();
  let code: number | undefined;
  ws.on('message', (data: Buffer, isBinary) => {
    expect(isBinary).toBe(false);
    sent.push(Buffer.from(data));
    const message: unknown = JSON.parse(data.toString('utf8'));
    messages.push(message);
    gatewayMessages.push({ message, method: methods.get(idOf(message)) });
  });
  ws.on('pong', (payload: Buffer) => messages.push({ $pong: payload.toString('hex') }));
  ws.on('close', (closeCode) => {
    code = closeCode;
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, messages, methods, closeCode: () => code };
}

const idOf = (message: unknown) => (isObject(message) ? message.id : undefined);

/** Where a gateway case's session and worker connect: one daemon, or two on a backplane. */
interface CaseHosts {
  session: RunningDaemon;
  worker: RunningDaemon;
}

async function runGatewayCase(c: GatewayCase, on: CaseHosts): Promise<void> {
  let hosts = on;
  let gateway = await session(hosts.session);
  let worker: RawConnection | undefined;
  for (const step of c.steps) {
    if ('restart' in step) {
      if (hosts.session !== daemon) throw new Error('a restart step needs the one daemon');
      worker?.socket.destroy();
      worker = undefined;
      gateway.ws.close();
      await daemon.stop(step.restart);
      daemon = await startDaemon(DAEMON_ARGS, daemon.runtimeDir);
      hosts = { session: daemon, worker: daemon };
      gateway = await session(daemon);
    } else if ('worker' in step) {
      worker ??= await rawConnection(hosts.worker);
      const { seq } = JSON.parse(step.worker.slice(0, -1)).data as { seq: number };
      worker.socket.write(step.worker);
      const replies = worker.replies;
      await eventually(
        () => replies.find((r) => isObject(r.data) && r.data.seq === seq),
        15_000,
        `the answer to worker frame seq ${seq}`,
      );
    } else if ('workerExpect' in step) {
      const replies = worker?.replies ?? [];
      await eventually(
        () => replies.find((r) => JSON.stringify(r) === JSON.stringify(step.workerExpect)),
        15_000,
        `worker reply ${JSON.stringify(step.workerExpect)}`,
      );
    } else if ('wait' in step) {
      await eventually(
        () => (gateway.messages.length >= step.wait ? true : undefined),
        15_000,
        `${step.wait} messages`,
      );
    } else if ('wsHex' in step) {
      gateway.ws.send(Buffer.from(step.wsHex, 'hex'), { binary: false });
    } else if ('wsPing' in step) {
      gateway.ws.ping(Buffer.from(step.wsPing, 'hex'));
      await eventually(
        () => gateway.messages.find((m) => isObject(m) && m.$pong === step.wsPing),
        15_000,
        `the pong to ping ${step.wsPing}`,
      );
    } else {
      let id: unknown;
      try {
        const request: unknown = JSON.parse(step.ws);
        id = idOf(request);
        if (isObject(request) && typeof request.method === 'string')
          gateway.methods.set(id, request.method);
      } catch {
        id = undefined;
      }
      gateway.ws.send(step.ws);
      // A request is answered before the next step, so that steps on two sockets keep their order.
      if (typeof id === 'string' || typeof id === 'number')
        await eventually(
          () => gateway.messages.find((m) => idOf(m) === id),
          15_000,
          `the reply to request ${id}`,
        );
    }
  }
  if (c.closes !== undefined) {
    await eventually(() => gateway.closeCode(), 15_000, 'the session to close');
    expect(gateway.closeCode()).toBe(c.closes);
    expect(placeheld(c.expect, gateway.messages)).toEqual(c.expect);
  } else {
    await eventually(
      () => (gateway.messages.length >= c.expect.length ? true : undefined),
      15_000,
      `${c.expect.length} messages`,
    );
    gateway.methods.set(SENTINEL, 'progress/unsubscribe');
    gateway.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: SENTINEL,
        method: 'progress/unsubscribe',
        params: { progressToken: SENTINEL },
      }),
    );
    await eventually(
      () => gateway.messages.find((m) => idOf(m) === SENTINEL),
      15_000,
      'the sentinel reply',
    );
    const expected = [...c.expect, { jsonrpc: '2.0', id: SENTINEL, result: {} }];
    expect(placeheld(expected, gateway.messages)).toEqual(expected);
    gateway.ws.close();
  }
  worker?.socket.destroy();
}

describe('gateway conformance', () => {
  for (const c of GATEWAY_CASES.filter((c) => c.across === undefined))
    it(c.name, () => runGatewayCase(c, { session: daemon, worker: daemon }));
});

describe.skipIf(natsServer.skip)('gateway conformance across a NATS backplane', () => {
  beforeAll(() => natsServer.require());
  let nats: RunningNats;
  let hosts: CaseHosts;

  beforeAll(async () => {
    nats = await startNats();
    const [session, worker] = await Promise.all([
      startHost(nats.url, 'conformance-b'),
      startHost(nats.url, 'conformance-a'),
    ]);
    hosts = { session, worker };
  });

  afterAll(async () => {
    await Promise.all([hosts?.session.stop(), hosts?.worker.stop()]);
    await nats?.stop();
  });

  for (const c of GATEWAY_CASES.filter((c) => c.across === 'backplane'))
    it(c.name, () => runGatewayCase(c, hosts));
});

describe('the published schemas', () => {
  const RESULT_SCHEMAS = Object.fromEntries(
    Object.entries(RESULT_SCHEMA_NAMES).map(([method, name]) => [method, PUBLISHED_SCHEMAS[name]]),
  );
  const REPLY_SCHEMAS = {
    ack: ackSchema,
    rejected: rejectedSchema,
    cancel: cancelSchema,
    pong: pongSchema,
    status: daemonStatusSchema,
  } as const;

  it('accept every worker reply and gateway message of the corpus', () => {
    expect(workerReplies.length).toBeGreaterThan(WORKER_CASES.length);
    for (const reply of workerReplies) {
      expect(envelopeSchema.safeParse(reply).success).toBe(true);
      const schema = REPLY_SCHEMAS[reply.type as keyof typeof REPLY_SCHEMAS];
      expect(schema, reply.type).toBeDefined();
      expect(schema.safeParse(reply.data).error).toBeUndefined();
    }
    expect(gatewayMessages.length).toBeGreaterThan(GATEWAY_CASES.length);
    const resultsChecked = new Set<string>();
    for (const { message, method } of gatewayMessages) {
      if (!isObject(message)) throw new Error(`not an object: ${JSON.stringify(message)}`);
      if ('error' in message) expect(rpcErrorSchema.safeParse(message).error).toBeUndefined();
      else if (message.method === PROGRESS_METHOD)
        expect(progressParamsSchema.safeParse(message.params).error).toBeUndefined();
      else if (message.method === DONE_METHOD)
        expect(doneParamsSchema.safeParse(message.params).error).toBeUndefined();
      else {
        // Every result is checked against the published schema of its method.
        expect(message).toHaveProperty('result');
        const schema = RESULT_SCHEMAS[method as keyof typeof RESULT_SCHEMAS];
        if (schema === undefined) throw new Error(`no published result schema for ${method}`);
        expect(schema.safeParse(message.result).error, method).toBeUndefined();
        resultsChecked.add(method as string);
      }
    }
    // The corpus answers these at least once; list and status results are checked below.
    expect([...resultsChecked].sort()).toEqual([
      'progress/cancel',
      'progress/get',
      'progress/subscribe',
      'progress/unsubscribe',
    ]);
  });

  it('accept daemon.json, the status reply, and the progress/list and progress/status results', async () => {
    const info = JSON.parse(readFileSync(join(daemon.runtimeDir, 'daemon.json'), 'utf8'));
    expect(daemonInfoSchema.safeParse(info).error).toBeUndefined();
    const worker = await rawConnection();
    worker.socket.write('{"type":"status"}\f');
    const status = await eventually(() => worker.replies.find((r) => r.type === 'status'));
    expect(daemonStatusSchema.safeParse(status.data).error).toBeUndefined();
    worker.socket.destroy();
    const gateway = await session();
    gateway.ws.send('{"jsonrpc":"2.0","id":1,"method":"progress/list"}');
    gateway.ws.send('{"jsonrpc":"2.0","id":2,"method":"progress/status"}');
    const reply = (id: number) =>
      eventually(() => gateway.messages.find((m) => idOf(m) === id) as { result: unknown });
    const list = (await reply(1)).result as {
      streams: Array<{ startedAt: number; state: string }>;
    };
    // The gateway cases left active and done streams behind: timestamps are integer milliseconds.
    expect(new Set(list.streams.map((stream) => stream.state))).toEqual(
      new Set(['active', 'done']),
    );
    expect(listResultSchema.safeParse(list).error).toBeUndefined();
    expect(RESULT_SCHEMAS['progress/list']?.safeParse(list).error).toBeUndefined();
    expect(list.streams.every((stream) => Number.isInteger(stream.startedAt))).toBe(true);
    expect(daemonStatusSchema.safeParse((await reply(2)).result).error).toBeUndefined();
    gateway.ws.close();
  });
});

describe('a strict parser', () => {
  it('accepts every frame and message the daemon sent in the corpus', async () => {
    // Well over one per case: every case got at least one reply.
    expect(sent.length).toBeGreaterThan(WORKER_CASES.length + GATEWAY_CASES.length);
    const child = spawn(PYTHON, [...PYTHON_ARGS, join(ROOT, 'test/fixtures/strict_json.py')], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const output = collectOutput(child);
    child.stdin.end(`${sent.map((bytes) => bytes.toString('hex')).join('\n')}\n`);
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(output.stdout()).toBe(`ok ${sent.length}\n`);
    expect(code).toBe(0);
  });
});
