// The "train" tool of examples/mcp-server.mjs as an MCP task (2025-11-25 tasks,
// through the experimental tasks API of @modelcontextprotocol/sdk 1.x). A
// client that asks for a task gets one at once; its statusMessage follows the
// worker (epoch, percentage, rate, ETA); tasks/result gives the tool's result;
// tasks/cancel stops the worker. A client that does not ask for a task gets
// the plain result.
//
//   claude mcp add train-task-example -- node /path/to/examples/mcp-task-server.mjs
//
// It needs a running daemon (`mcp-progress daemon`); without one the task
// completes all the same, its statusMessage never changes.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { relayTask } from 'mcp-progress-bridge/mcp';
import * as z from 'zod';

const trainPy = fileURLToPath(new URL('./train.py', import.meta.url));
const server = new McpServer(
  { name: 'train-task-example', version: '0.1.0' },
  {
    // The task requests this server serves; the SDK answers tasks/get, result, cancel, list.
    capabilities: { tasks: { requests: { tools: { call: {} } }, cancel: {}, list: {} } },
    taskStore: new InMemoryTaskStore(),
  },
);

server.experimental.tasks.registerToolTask(
  'train',
  {
    description:
      'Train a (fake) model for some epochs, as a task whose status follows the training.',
    inputSchema: { epochs: z.number().int().min(1).max(50).default(3) },
    execution: { taskSupport: 'optional' },
  },
  // relayTask runs this after the task is created; what it returns completes the task.
  relayTask(
    async ({ epochs }, relay) => {
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
      // Let the worker's done through: a worker that ended in error or vanished fails the task.
      await Promise.race([relay.done, sleep(1000)]);
      if (code !== 0) throw new Error(`training failed (exit ${code}): ${stderr.slice(-500)}`);
      return { content: [{ type: 'text', text: `trained ${epochs} epochs` }] };
    },
    { label: 'training' },
  ),
);

await server.connect(new StdioServerTransport());
