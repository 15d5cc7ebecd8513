/**
 * Baseline for start-up only: a bare MCP SDK 1.x stdio server with three
 * tools and nothing else, what `mcp-progress mcp`'s spawn -> initialize is
 * compared with (issue 27: at most 1.15x of this).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench-sdk-server', version: '0.0.0' });
for (const name of ['first', 'second', 'third']) {
  server.registerTool(
    name,
    { description: `The ${name} tool.`, inputSchema: { value: z.string().optional() } },
    async ({ value }) => ({ content: [{ type: 'text' as const, text: value ?? name }] }),
  );
}
await server.connect(new StdioServerTransport());
process.stdin.once('end', () => process.exit(0));
process.once('SIGTERM', () => process.exit(0));
