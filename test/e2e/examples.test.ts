/** examples/: `npm run demo`'s script end to end, and the MCP server examples (relayProgress, relayTask). */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  cleanupAll,
  collectOutput,
  eventually,
  ROOT,
  startDaemon,
  waitForExit,
} from '../helpers/daemon.js';

afterAll(() => cleanupAll());
// Each test starts several real processes; on a machine shared with other test runs that can take long.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

/** A daemon, and an SDK 1.x client connected over stdio to examples/`file` using that daemon. */
async function exampleServer(file: string) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const daemon = await startDaemon();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(ROOT, 'examples', file)],
    env: {
      ...(process.env as Record<string, string>),
      MCP_PROGRESS_RUNTIME_DIR: daemon.runtimeDir,
    },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'example-test', version: '0.0.0' });
  await client.connect(transport);
  return { daemon, client };
}

describe('the demo', () => {
  it('starts its own daemon, runs two example workers, tails them to the end, and exits 0', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'examples/demo.mjs'), '--fast'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: '', MCP_PROGRESS_TOKEN: '' },
    });
    const output = collectOutput(child);
    expect(await waitForExit(child), output.stderr()).toBe(0);
    const stdout = output.stdout();
    // stdout is a pipe here, so tail prints plain lines; each worker's stream ends ok.
    const lines = stdout.split('\n');
    for (const worker of ['worker.mjs', 'train.py']) {
      expect(
        lines.some((line) => line.startsWith(`${worker}  `) && line.includes('✓ ok')),
        `${worker} ok in:\n${stdout}`,
      ).toBe(true);
    }
    // The last line of the training says what its value says: 2 of 2 epochs (--fast runs 2).
    const trained = lines.filter((line) => line.startsWith('train.py  ')).at(-1) ?? '';
    expect(trained).toMatch(/100%\s+2\/2 .*epochs 2\/2/);
    expect(trained).not.toContain('epochs 1/2');
  });
});

describe('examples/mcp-server.mjs', () => {
  it("relays the Python worker's progress to the MCP client that called the tool", async () => {
    const { daemon, client } = await exampleServer('mcp-server.mjs');
    const progress: number[] = [];
    const messages: Array<string | undefined> = [];
    const result = await client.callTool({ name: 'train', arguments: { epochs: 2 } }, undefined, {
      onprogress: (p: { progress: number; message?: string | undefined }) => {
        progress.push(p.progress);
        messages.push(p.message);
      },
      timeout: 60_000,
    });
    expect(result.isError).toBeFalsy();
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.at(-1)).toBe(2);
    // The final message agrees with the final value: epochs 2/2, never "epochs 1/2" at 2 of 2.
    expect(messages.at(-1)).toMatch(/^epochs 2\/2( · |$)/);
    await client.close();
    await daemon.stop();
  });
});

describe('examples/mcp-task-server.mjs', () => {
  it('runs the tool as a task whose statusMessage follows the worker, then completes with the result', async () => {
    const { CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
    const { CreateTaskResultSchema } = await import('@modelcontextprotocol/sdk/experimental/tasks');
    const { daemon, client } = await exampleServer('mcp-task-server.mjs');
    try {
      const { task } = await client.request(
        {
          method: 'tools/call',
          params: { name: 'train', arguments: { epochs: 2 }, task: { ttl: 60_000 } },
        },
        CreateTaskResultSchema,
      );
      expect(task.status).toBe('working');
      const working = await eventually(
        async () => {
          const now = await client.experimental.tasks.getTask(task.taskId);
          return now.status === 'working' && now.statusMessage?.includes('%') ? now : undefined;
        },
        30_000,
        'a statusMessage with a percentage while the task works',
      );
      expect(working.statusMessage).toMatch(/^"training" active at \d+\/2 \(\d+%\)/);
      const result = await client.experimental.tasks.getTaskResult(
        task.taskId,
        CallToolResultSchema,
      );
      expect(result.content).toEqual([{ type: 'text', text: 'trained 2 epochs' }]);
      expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    } finally {
      await client.close();
      await daemon.stop();
    }
  });
});
