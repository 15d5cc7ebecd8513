// An MCP client of `mcp-progress mcp`, as Claude Code or Cursor would be: it
// calls watch_progress for one token and prints each notifications/progress.
//
//   node examples/watch.mjs TOKEN [mcp-progress mcp flags, e.g. --runtime-dir DIR]
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [token, ...flags] = process.argv.slice(2);
if (token === undefined) {
  console.error('usage: node examples/watch.mjs TOKEN [--runtime-dir DIR]');
  process.exit(2);
}
const bin = resolve(import.meta.dirname, '../bin/mcp-progress');
const client = new Client({ name: 'watch-example', version: '1.0.0' });
await client.connect(
  new StdioClientTransport({ command: process.execPath, args: [bin, 'mcp', ...flags] }),
);
const result = await client.callTool(
  { name: 'watch_progress', arguments: { progressToken: token } },
  undefined,
  {
    onprogress: (p) => console.log(`progress ${p.progress}/${p.total ?? '?'} ${p.message ?? ''}`),
    timeout: 3_600_000,
  },
);
console.log(result.content.map((part) => part.text).join('\n'));
await client.close();
