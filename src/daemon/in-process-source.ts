/**
 * The daemon in this process as a progress source for the MCP tools: its
 * backend and in-process sessions of its hub, with no socket in between.
 */

import type { ProgressSession, ProgressSource } from '../mcp/progress-source.js';
import type { ListResult, ProgressToken } from '../protocol/frames.js';
import type { Notification, NotificationHandler } from '../protocol/notifications.js';
import { BridgeError } from '../shared/errors.js';
import type { GatewayBackend } from './rpc.js';
import type { LocalReceiver, LocalSession } from './sessions.js';

/** The daemon in this process: its backend, and in-process sessions of its hub. */
export class LocalProgressSource implements ProgressSource {
  readonly #backend: GatewayBackend;
  readonly #open: (receive: LocalReceiver) => LocalSession;
  readonly #sessions = new Set<LocalSession>();

  constructor(backend: GatewayBackend, open: (receive: LocalReceiver) => LocalSession) {
    this.#backend = backend;
    this.#open = open;
  }

  async openSession(): Promise<ProgressSession> {
    const handlers = new Map<ProgressToken, NotificationHandler>();
    const session = this.#open((notification: Notification) => {
      const label = notification.params.progressToken;
      const handler = handlers.get(label);
      if (handler === undefined) return;
      if (notification.method === 'notifications/progress/done') handlers.delete(label);
      handler(notification);
    });
    this.#sessions.add(session);
    return {
      subscribe: async (params, handler) => {
        const label = params.as ?? params.progressToken;
        if (handlers.has(label)) {
          throw new BridgeError(
            'duplicate_subscription',
            `already subscribed under token ${JSON.stringify(label)}`,
          );
        }
        handlers.set(label, handler);
        const outcome = this.#backend.subscribe(session.id, params);
        if (!outcome.ok) {
          handlers.delete(label);
          throw new BridgeError(outcome.code, outcome.message);
        }
        return {
          unsubscribe: async () => {
            if (handlers.get(label) !== handler) return;
            handlers.delete(label);
            this.#backend.unsubscribe(session.id, params.progressToken);
          },
        };
      },
      close: async () => {
        handlers.clear();
        this.#sessions.delete(session);
        session.close();
      },
    };
  }

  async list(): Promise<ListResult> {
    return this.#backend.list();
  }

  async cancel(token: ProgressToken, reason?: string): Promise<number> {
    return this.#backend.cancel(token, reason);
  }

  async close(): Promise<void> {
    for (const session of this.#sessions) session.close();
    this.#sessions.clear();
  }
}
