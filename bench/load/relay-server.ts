/**
 * Someone's MCP server (SDK 1.x, stdio) whose tool `relay_job` forwards its
 * worker's progress with relayProgress, minIntervalMs 0, and returns when
 * the worker is done. The worker is the harness's: the route key goes to it
 * as one `ROUTE {env}` line on stderr, which the MCP client passes on.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

// The built package, as a user's server imports it (a variable path: tsc must not need dist/):
// this checkout's, or the build that MCP_PROGRESS_BENCH_BUILD names (bench --before).
const buildRoot = process.env.MCP_PROGRESS_BENCH_BUILD;
const BUILT_MCP =
  buildRoot === undefined || buildRoot === ''
    ? new URL('../../dist/mcp/index.js', import.meta.url).href
    : pathToFileURL(join(buildRoot, 'dist/mcp/index.js')).href;
const { relayProgress } = (await import(BUILT_MCP)) as typeof import('../../src/mcp/index.ts');

const runtimeDir = process.env.MCP_PROGRESS_BENCH_RUNTIME_DIR;
const server = new McpServer({ name: 'bench-relay-server', version: '0.0.0' });
server.registerTool(
  'relay_job',
  { description: 'Runs the bench worker and relays its progress.' },
  async (extra) => {
    // try/finally, not `await using`: Node 22 runs this file by stripping types, without that syntax.
    const relay = await relayProgress(extra, { runtimeDir, minIntervalMs: 0 });
    try {
      if (!relay.relaying) throw new Error('the relay is not relaying: is the daemon running?');
      process.stderr.write(`ROUTE ${JSON.stringify(relay.env)}\n`);
      const done = await relay.done;
      return { content: [{ type: 'text' as const, text: JSON.stringify(done ?? null) }] };
    } finally {
      await relay.close();
    }
  },
);
await server.connect(new StdioServerTransport());
// A host that closes stdin or sends SIGTERM is done with us; exiting this way also writes --cpu-prof.
process.stdin.once('end', () => process.exit(0));
process.once('SIGTERM', () => process.exit(0));
