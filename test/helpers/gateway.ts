/** A real `ws` gateway client: JSON-RPC requests and collected notifications. */
import { afterAll, beforeAll, expect } from 'vitest';
import WebSocket from 'ws';
import type { DaemonInfo } from '../../src/shared/locate.js';
import { eventually, type RunningDaemon, startDaemon } from './daemon.js';

export interface Received {
  method: string;
  params: Record<string, unknown>;
}

export interface GatewayClient {
  readonly ws: WebSocket;
  readonly notifications: Received[];
  request(
    method: string,
    params?: unknown,
  ): Promise<{
    result?: unknown;
    error?: { code: number; message: string; data?: { code: string } };
  }>;
  /** Waits until at least `count` notifications arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function connectGateway(
  info: DaemonInfo,
  headers: Record<string, string> = {},
): Promise<GatewayClient> {
  const ws = new WebSocket(info.url, 'mcp-progress.v1', {
    headers: { authorization: `Bearer ${info.secret}`, ...headers },
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
  });
  const notifications: Received[] = [];
  const pending = new Map<number, (reply: never) => void>();
  let nextId = 1;
  ws.on('message', (data) => {
    const message = JSON.parse(String(data));
    if (message.id !== undefined && pending.has(message.id)) {
      pending.get(message.id)?.(message as never);
      pending.delete(message.id);
    } else if (message.method) {
      notifications.push({ method: message.method, params: message.params });
    }
  });
  return {
    ws,
    notifications,
    request(method, params) {
      const id = nextId++;
      return new Promise((resolve) => {
        pending.set(id, resolve as (reply: never) => void);
        ws.send(
          JSON.stringify(
            params === undefined
              ? { jsonrpc: '2.0', id, method }
              : { jsonrpc: '2.0', id, method, params },
          ),
        );
      });
    },
    async waitFor(count, timeoutMs = 10_000) {
      await eventually(
        () => (notifications.length >= count ? true : undefined),
        timeoutMs,
        `${count} notifications`,
      );
      return notifications;
    },
    close() {
      if (ws.readyState === ws.CLOSED) return Promise.resolve();
      return new Promise((resolve) => {
        ws.once('close', () => resolve());
        ws.close();
      });
    },
  };
}

/** A daemon and a gateway connected to it, shared by the tests of one file or describe block. */
export interface WatchedBridge {
  readonly daemon: RunningDaemon;
  readonly gateway: GatewayClient;
  /** A fresh token (`prefix-pid-n`) that the gateway already watches with coalescing off. */
  watched(prefix: string): Promise<string>;
  /** Every notification the gateway received for the token, in order. */
  of(token: string | number): Received[];
  /** The params of the progress notifications received for the token. */
  progressOf(token: string | number): Array<Received['params']>;
  /** Waits (up to a minute) for the token's done notice; resolves its params. */
  doneOf(token: string | number): Promise<Received['params']>;
}

/** Starts the daemon and the gateway before the tests of the enclosing scope, stops both after. */
export function useWatchedBridge(daemonArgs: string[] = []): WatchedBridge {
  let daemon: RunningDaemon | undefined;
  let gateway: GatewayClient | undefined;
  let counter = 0;
  beforeAll(async () => {
    daemon = await startDaemon(daemonArgs);
    gateway = await connectGateway(daemon.info);
  });
  afterAll(async () => {
    await gateway?.close();
    await daemon?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useWatchedBridge: used before its beforeAll ran');
    return value;
  };
  const bridge: WatchedBridge = {
    get daemon() {
      return started(daemon);
    },
    get gateway() {
      return started(gateway);
    },
    async watched(prefix) {
      const token = `${prefix}-${process.pid}-${++counter}`;
      const reply = await bridge.gateway.request('progress/subscribe', {
        progressToken: token,
        minIntervalMs: 0,
      });
      if (reply.error) throw new Error(`subscribe ${token}: ${reply.error.message}`);
      return token;
    },
    of: (token) => bridge.gateway.notifications.filter((n) => n.params.progressToken === token),
    progressOf: (token) =>
      bridge
        .of(token)
        .filter((n) => n.method === 'notifications/progress')
        .map((n) => n.params),
    doneOf: (token) =>
      eventually(
        () => bridge.of(token).find((n) => n.method === 'notifications/progress/done')?.params,
        60_000,
        `done for ${token}`,
      ),
  };
  return bridge;
}

/** The daemon's status counters that count what it refused. */
interface RefusalCounters {
  connectionsRefused: number;
  framesRejected: Partial<Record<string, number>>;
}

/**
 * Expects a client the daemon keeps refusing to come back with its doubling backoff: at least
 * 25 + 50 + 100 + 200 + 400 ms from the first refusal to the sixth, less what reading the count
 * late (every 10 ms) took off. Coming back at once, refusals were 25-50 ms apart or less.
 */
export async function expectRefusalsBackedOff(
  gateway: GatewayClient,
  refusals: (counters: RefusalCounters) => number,
  what: string,
): Promise<void> {
  const reach = (count: number) =>
    eventually(
      async () => {
        const status = (await gateway.request('progress/status')).result as {
          counters: RefusalCounters;
        };
        return refusals(status.counters) >= count ? performance.now() : undefined;
      },
      30_000,
      `${count} ${what}`,
    );
  const first = await reach(1);
  const sixth = await reach(6);
  expect(sixth - first).toBeGreaterThanOrEqual(600);
}
