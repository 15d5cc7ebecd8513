/**
 * A client we did not write: the MCP Inspector CLI lists the tools of
 * `mcp-progress mcp` and calls list_progress, as a user would from a shell.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, cleanupAll, ROOT, runCli, startDaemon, tempDir } from '../helpers/daemon.js';

afterAll(() => cleanupAll());

const INSPECTOR = join(ROOT, 'node_modules/@modelcontextprotocol/inspector-cli/build/cli.js');

interface InspectorRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the inspector's CLI mode against `mcp-progress mcp` in `runtimeDir`. */
function inspect(runtimeDir: string, method: string[]): Promise<InspectorRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        INSPECTOR,
        '--cli',
        '-e',
        `MCP_PROGRESS_RUNTIME_DIR=${runtimeDir}`,
        process.execPath,
        BIN,
        'mcp',
        ...method,
      ],
      {
        // inspector-cli 1.0.3 probes ../package.json relative to the working directory but imports it
        // relative to its module (modelcontextprotocol/inspector#1503): a project subdirectory satisfies both.
        cwd: join(ROOT, 'test'),
        // It starts its worker as plain "node": make that the Node running these tests.
        env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 25_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('the MCP Inspector CLI against mcp-progress mcp', () => {
  it('lists the three tools with input and output schemas (embedded daemon)', async () => {
    const run = await inspect(tempDir(), ['--method', 'tools/list']);
    expect(run.code, run.stderr).toBe(0);
    const { tools } = JSON.parse(run.stdout) as {
      tools: Array<{
        name: string;
        description: string;
        inputSchema: { type: string; properties?: Record<string, unknown>; required?: string[] };
        outputSchema: { type: string };
      }>;
    };
    expect(tools.map((t) => t.name).sort()).toEqual([
      'get_progress',
      'list_progress',
      'watch_progress',
    ]);
    const watch = tools.find((t) => t.name === 'watch_progress');
    expect(Object.keys(watch?.inputSchema.properties ?? {}).sort()).toEqual([
      'minIntervalMs',
      'progressToken',
      'timeoutMs',
    ]);
    expect(watch?.inputSchema.required).toEqual(['progressToken']);
    for (const tool of tools) expect(tool.outputSchema.type).toBe('object');
  });

  it('calls list_progress and sees a running job', async () => {
    const daemon = await startDaemon();
    const published = await runCli([
      'publish',
      '--socket',
      daemon.info.socket,
      '--token',
      'inspected',
      '--progress',
      '2',
      '--total',
      '8',
    ]);
    expect(published.code).toBe(0);
    const run = await inspect(daemon.runtimeDir, [
      '--method',
      'tools/call',
      '--tool-name',
      'list_progress',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as {
      structuredContent: { streams: Array<Record<string, unknown>> };
      isError?: boolean;
    };
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent.streams).toEqual([
      expect.objectContaining({
        progressToken: 'inspected',
        state: 'active',
        progress: 2,
        total: 8,
      }),
    ]);
    await daemon.stop();
  });
});
