/**
 * Serves an MCP server over this process's stdin and stdout until the host
 * goes away. stdout carries MCP messages only; everything else goes to stderr.
 *
 * The opening message picks the revision: `initialize` (the 2025 revisions)
 * goes to the SDK 1.x server, as it always did; a request carrying the
 * 2026-07-28 `_meta` envelope (server/discover first) goes to the 2.x
 * package's serveStdio and a 2.x server, both loaded only then, so a host's
 * start-up does not pay for them.
 */

import type { Writable } from 'node:stream';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { HANDED_ON } from './progress-sends.js';
import { claimsSessionlessRevision } from './revision.js';

export type StdioEnd =
  | 'stdin closed'
  | 'transport closed'
  | 'SIGINT'
  | 'SIGTERM'
  | 'SIGHUP'
  | 'stdout error';

/** Builds the server for a 2026-07-28 client, once per connection that opens with one. */
export type ModernServerFactory = () => ModernMcpServer | Promise<ModernMcpServer>;

/**
 * Resolves when the host closes stdin (the SDK transport does not notice that) or a signal arrives.
 * Without `modern`, only the 2025 revisions are served (a 2026-07-28 opening gets "method not found").
 */
export async function serveStdio(
  server: McpServer,
  modern?: ModernServerFactory,
): Promise<StdioEnd> {
  let end: (reason: StdioEnd) => void = () => {};
  const ended = new Promise<StdioEnd>((resolve) => {
    end = resolve;
  });
  const onStdinEnd = () => end('stdin closed');
  const onSigint = () => end('SIGINT');
  const onSigterm = () => end('SIGTERM');
  // The terminal closed: a clean end too, so that an embedded daemon removes daemon.json and its socket.
  const onSighup = () => end('SIGHUP');
  // A host that went away makes writes fail with EPIPE: that is an end, not a crash.
  const onStdoutError = () => end('stdout error');
  process.stdin.once('end', onStdinEnd);
  process.stdin.once('close', onStdinEnd);
  process.stdout.on('error', onStdoutError);
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigterm);
  process.once('SIGHUP', onSighup);
  const wire = new StdioServerTransport(process.stdin, process.stdout);
  wire.send = sendWithoutPromises(process.stdout);
  let stop: () => Promise<unknown> = () => server.close();
  if (modern === undefined) {
    wire.onclose = () => end('transport closed');
    await server.connect(wire);
  } else {
    // Not awaited: a host may close stdin before it sends anything.
    connectByRevision(wire, server, modern, () => end('transport closed')).then(
      (stopServing) => {
        stop = stopServing;
      },
      () => end('transport closed'),
    );
  }
  const reason = await ended;
  process.stdin.off('end', onStdinEnd);
  process.stdin.off('close', onStdinEnd);
  process.off('SIGINT', onSigint);
  process.off('SIGTERM', onSigterm);
  process.off('SIGHUP', onSighup);
  await stop().catch(() => {});
  process.stdin.destroy();
  return reason;
}

/**
 * The stdio transport's send without a promise per message: a message that stdout took at once
 * returns HANDED_ON, so that a request's next progress notification follows in the same turn,
 * where the SDK's send makes a promise for each and resolves it a microtask later. The same
 * bytes in the same order (the SDK's serializeMessage), and a full stdout still holds the sender
 * until 'drain'. The messages of one turn leave in one write: the daemon's notifications come
 * over the local link a few at a time (NOTIFICATION_LINGER_MS), and the host then wakes once
 * for them, not once for each.
 */
export function sendWithoutPromises(
  stdout: Writable,
): (message: JSONRPCMessage, options?: TransportSendOptions) => Promise<void> {
  let corked = false;
  const uncork = () => {
    corked = false;
    stdout.uncork();
  };
  return (message) => {
    if (!corked) {
      corked = true;
      stdout.cork();
      process.nextTick(uncork);
    }
    return stdout.write(serializeMessage(message))
      ? HANDED_ON
      : new Promise((resolve) => stdout.once('drain', resolve));
  };
}

/** Reads the first message, then connects the server of its revision; resolves with how to stop it. */
async function connectByRevision(
  wire: StdioServerTransport,
  server: McpServer,
  modern: ModernServerFactory,
  onClosed: () => void,
): Promise<() => Promise<unknown>> {
  const handover = await Handover.open(wire, onClosed);
  if (!claimsSessionlessRevision(handover.first)) {
    await server.connect(handover);
    return () => server.close();
  }
  const [{ serveStdio: serveByRevision }, { taskListensOf }, { taskListenRequest }] =
    await Promise.all([
      import('@modelcontextprotocol/server/stdio'),
      import('./modern-server.js'),
      import('./tasks-extension.js'),
    ]);
  // Built before the entry reads anything, so that a listen for tasks is never the entry's:
  // the 2.x entry serves subscriptions/listen itself and knows no task ids.
  const instance = await modern();
  const listens = taskListensOf(instance);
  if (listens !== undefined) {
    handover.intercept = (message) => {
      const listen = taskListenRequest(message);
      if (listen !== undefined) {
        listens.listen(listen, (out) => handover.send(out as JSONRPCMessage)).catch(() => {});
        return true;
      }
      const cancelled = cancelledRequestId(message);
      // A cancel of a listen of ours is ours; any other goes on to the entry.
      return cancelled !== undefined && listens.cancel(cancelled);
    };
  }
  const handle = serveByRevision(
    // Should the 2.x entry pin a 2025 instance on this connection after all (a client that
    // falls back to initialize), the 1.x server serves it: the entry only connects and closes it.
    ({ era }) => (era === 'modern' ? instance : (server as unknown as ModernMcpServer)),
    { transport: handover },
  );
  return async () => {
    await listens?.close();
    await handle.close();
  };
}

/** The request a notifications/cancelled names, if `message` is one. */
function cancelledRequestId(message: JSONRPCMessage): string | number | undefined {
  if (!('method' in message) || message.method !== 'notifications/cancelled') return undefined;
  const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return typeof requestId === 'string' || typeof requestId === 'number' ? requestId : undefined;
}

/**
 * The started stdio transport after its first message was read: hands that message, and
 * whatever arrived meanwhile, to whoever connects to it next, then everything after.
 */
class Handover implements Transport {
  onmessage?: ((message: JSONRPCMessage) => void) | undefined;
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  /** Sees each message first; true: it was served there, the connected side never sees it. */
  intercept: ((message: JSONRPCMessage) => boolean) | undefined = undefined;
  readonly first: JSONRPCMessage;
  readonly #wire: StdioServerTransport;
  readonly #held: JSONRPCMessage[];
  #live = false;

  private constructor(wire: StdioServerTransport, held: JSONRPCMessage[]) {
    this.#wire = wire;
    this.#held = held;
    this.first = held[0] as JSONRPCMessage;
    wire.onmessage = (message) => {
      if (this.#live) this.#deliver(message);
      else this.#held.push(message);
    };
    wire.onerror = (error) => this.onerror?.(error);
  }

  /** Starts the transport and resolves with the first message read (`onClosed` on close). */
  static async open(wire: StdioServerTransport, onClosed: () => void): Promise<Handover> {
    const held: JSONRPCMessage[] = [];
    let handover: Handover | undefined;
    const first = new Promise<void>((resolve) => {
      wire.onmessage = (message) => {
        held.push(message);
        resolve();
      };
    });
    wire.onclose = () => {
      handover?.onclose?.();
      onClosed();
    };
    await wire.start();
    await first;
    handover = new Handover(wire, held);
    return handover;
  }

  async start(): Promise<void> {
    // The connecting side set its handlers before start: deliver what was held, in order.
    queueMicrotask(() => {
      while (this.#held.length > 0) this.#deliver(this.#held.shift() as JSONRPCMessage);
      this.#live = true;
    });
  }

  #deliver(message: JSONRPCMessage): void {
    if (this.intercept?.(message) === true) return;
    this.onmessage?.(message);
  }

  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    return this.#wire.send(message);
  }

  close(): Promise<void> {
    return this.#wire.close();
  }
}
