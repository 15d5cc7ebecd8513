/**
 * Serves an MCP server over this process's stdin and stdout until the host
 * goes away. stdout carries MCP messages only; everything else goes to stderr.
 *
 * The opening message picks the revision: `initialize` (the 2025 revisions)
 * goes to the SDK 1.x server; a request carrying the 2026-07-28 `_meta`
 * envelope (server/discover first) goes to the 2.x one. The 2.x package's
 * serveStdio makes that decision, so both follow its rules exactly.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport as LegacyStdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import {
  StdioServerTransport,
  serveStdio as serveByRevision,
} from '@modelcontextprotocol/server/stdio';

export type StdioEnd = 'stdin closed' | 'transport closed' | 'SIGINT' | 'SIGTERM' | 'stdout error';

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
  // A host that went away makes writes fail with EPIPE: that is an end, not a crash.
  const onStdoutError = () => end('stdout error');
  process.stdin.once('end', onStdinEnd);
  process.stdin.once('close', onStdinEnd);
  process.stdout.on('error', onStdoutError);
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigterm);
  let stop: () => Promise<unknown>;
  if (modern === undefined) {
    const transport = new LegacyStdioServerTransport();
    transport.onclose = () => end('transport closed');
    await server.connect(transport);
    stop = () => server.close();
  } else {
    const transport = new StdioServerTransport();
    const handle = serveByRevision(
      // The entry only connects and closes a 2025-era instance, which the 1.x server does
      // the same way; it adds the 2026-07-28 handlers to the modern instance alone.
      ({ era }) => (era === 'modern' ? modern() : (server as unknown as ModernMcpServer)),
      { transport },
    );
    // serveStdio took the transport's onclose: chain ours after it.
    const entryOnClose = transport.onclose;
    transport.onclose = () => {
      entryOnClose?.();
      end('transport closed');
    };
    stop = () => handle.close();
  }
  const reason = await ended;
  process.stdin.off('end', onStdinEnd);
  process.stdin.off('close', onStdinEnd);
  process.off('SIGINT', onSigint);
  process.off('SIGTERM', onSigterm);
  await stop().catch(() => {});
  process.stdin.destroy();
  return reason;
}
