/**
 * Serves an MCP server over this process's stdin and stdout until the host
 * goes away. stdout carries MCP messages only; everything else goes to stderr.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

export type StdioEnd = 'stdin closed' | 'transport closed' | 'SIGINT' | 'SIGTERM' | 'stdout error';

/** Resolves when the host closes stdin (the SDK transport does not notice that) or a signal arrives. */
export async function serveStdio(server: McpServer): Promise<StdioEnd> {
  const transport = new StdioServerTransport();
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
  transport.onclose = () => end('transport closed');
  await server.connect(transport);
  const reason = await ended;
  process.stdin.off('end', onStdinEnd);
  process.stdin.off('close', onStdinEnd);
  process.off('SIGINT', onSigint);
  process.off('SIGTERM', onSigterm);
  await server.close().catch(() => {});
  process.stdin.destroy();
  return reason;
}
