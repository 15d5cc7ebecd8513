/** A real `ws` gateway client: JSON-RPC requests and collected notifications. */
import WebSocket from 'ws';
import type { DaemonInfo } from '../../src/locate.js';
import { eventually } from './daemon.js';

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
