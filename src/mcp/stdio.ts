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
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
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
  const wire = new StdioServerTransport();
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
  const { serveStdio: serveByRevision } = await import('@modelcontextprotocol/server/stdio');
  const handle = serveByRevision(
    // Should the 2.x entry pin a 2025 instance on this connection after all (a client that
    // falls back to initialize), the 1.x server serves it: the entry only connects and closes it.
    ({ era }) => (era === 'modern' ? modern() : (server as unknown as ModernMcpServer)),
    { transport: handover },
  );
  return () => handle.close();
}

/**
 * The started stdio transport after its first message was read: hands that message, and
 * whatever arrived meanwhile, to whoever connects to it next, then everything after.
 */
class Handover implements Transport {
  onmessage?: ((message: JSONRPCMessage) => void) | undefined;
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  readonly first: JSONRPCMessage;
  readonly #wire: StdioServerTransport;
  readonly #held: JSONRPCMessage[];
  #live = false;

  private constructor(wire: StdioServerTransport, held: JSONRPCMessage[]) {
    this.#wire = wire;
    this.#held = held;
    this.first = held[0] as JSONRPCMessage;
    wire.onmessage = (message) => {
      if (this.#live) this.onmessage?.(message);
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
      while (this.#held.length > 0) this.onmessage?.(this.#held.shift() as JSONRPCMessage);
      this.#live = true;
    });
  }

  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    return this.#wire.send(message);
  }

  close(): Promise<void> {
    return this.#wire.close();
  }
}
