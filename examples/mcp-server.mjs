// A small MCP server (stdio) with one tool, "train", that runs the Python
// training loop (examples/train.py) as a worker and relays its progress to
// the MCP client that called the tool, as notifications/progress.
//
//   claude mcp add train-example -- node /path/to/examples/mcp-server.mjs
//
// It needs a running daemon (`mcp-progress daemon`); without one the tool
// works all the same, without progress. relayProgress gives the worker a
// fresh route key (never the client's own token) and forwards cancellation.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { relayProgress } from 'mcp-progress-bridge/mcp';
import * as z from 'zod';

const trainPy = fileURLToPath(new URL('./train.py', import.meta.url));
const server = new McpServer({ name: 'train-example', version: '0.1.0' });

server.registerTool(
  'train',
  {
    description: 'Train a (fake) model for some epochs, reporting progress as it goes.',
    inputSchema: { epochs: z.number().int().min(1).max(50).default(3) },
  },
  async ({ epochs }, extra) => {
    const relay = await relayProgress(extra);
    try {
      const { code, stderr } = await new Promise((resolve) => {
        const child = spawn('python3', [trainPy, '--epochs', String(epochs)], {
          env: { ...process.env, ...relay.env }, // MCP_PROGRESS_SOCKET and MCP_PROGRESS_TOKEN
          // stdout is this server's protocol channel: the worker must not write to it.
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let err = '';
        child.stderr.setEncoding('utf8').on('data', (t) => {
          err += t;
        });
        child.on('error', (error) => resolve({ code: 127, stderr: String(error) }));
        child.on('close', (exitCode) => resolve({ code: exitCode ?? 1, stderr: err }));
      });
      // Let the worker's last values and its done through before the result.
      await Promise.race([relay.done, sleep(1000)]);
      const text =
        code === 0
          ? `trained ${epochs} epochs`
          : `training failed (exit ${code}): ${stderr.slice(-500)}`;
      return { content: [{ type: 'text', text }], isError: code !== 0 };
    } finally {
      await relay.close(); // no progress after the result
    }
  },
);

await server.connect(new StdioServerTransport());
