/**
 * The README's host set-up from a clone, as written: the host configuration
 * block with the clone's path put in, and `npm link`, each started by a real
 * MCP SDK client the way a host starts it, and asked for its tools.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cleanupAll, ROOT, tempDir } from '../helpers/daemon.js';
import { README, readmeBlockAfter } from '../helpers/readme.js';

afterAll(() => cleanupAll());
vi.setConfig({ testTimeout: 180_000 });

const PLACEHOLDER = '/path/to/mcp-progress-bridge';

/** Starts the server as a host does (command, args, its own environment) and lists its tools. */
async function toolsOf(command: string, args: string[], env: Record<string, string>) {
  const transport = new StdioClientTransport({
    command,
    args,
    env: { ...(process.env as Record<string, string>), ...env },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'host-setup-test', version: '0.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const listed = await client.callTool({ name: 'list_progress', arguments: {} });
    expect(listed.isError).toBeFalsy();
    return tools.map((tool) => tool.name).sort();
  } finally {
    await client.close();
  }
}

describe("the README's host set-up from a clone", () => {
  it('the configuration block, with the clone path put in, starts the server for a host', async () => {
    const config = JSON.parse(readmeBlockAfter('**From a clone**', 'json')) as {
      mcpServers: { progress: { command: string; args: string[] } };
    };
    const { command, args } = config.mcpServers.progress;
    expect(command.startsWith(PLACEHOLDER)).toBe(true);
    const here = (text: string) => text.replace(PLACEHOLDER, ROOT);
    const tools = await toolsOf(here(command), args.map(here), {
      MCP_PROGRESS_RUNTIME_DIR: tempDir(),
    });
    expect(tools).toEqual(['get_progress', 'list_progress', 'watch_progress']);
  });

  it('the Claude Code line from a clone names the same command', () => {
    const line = readmeBlockAfter('**Claude Code**, from a clone', 'sh').trim();
    expect(line).toBe(
      `claude mcp add progress -- ${PLACEHOLDER}/node_modules/.bin/node ${PLACEHOLDER}/bin/mcp-progress mcp`,
    );
  });

  it('after npm link, "mcp-progress mcp" on the PATH starts the server', async () => {
    // A global prefix of the test's own: npm link adds one link there, and leaves the clone as it is.
    const prefix = tempDir();
    mkdirSync(join(prefix, 'lib'), { recursive: true });
    const link = spawnSync('npm', ['link', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: ROOT,
      env: { ...process.env, npm_config_prefix: prefix },
      encoding: 'utf8',
    });
    expect(link.status, link.stderr).toBe(0);
    const version = spawnSync('mcp-progress', ['--version'], {
      env: { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` },
      encoding: 'utf8',
    });
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(README).toContain('`"command": "mcp-progress",\n"args": ["mcp"]`');
    const tools = await toolsOf('mcp-progress', ['mcp'], {
      PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}`,
      MCP_PROGRESS_RUNTIME_DIR: tempDir(),
    });
    expect(tools).toEqual(['get_progress', 'list_progress', 'watch_progress']);
  });
});

describe('the README on an older Node', () => {
  it('explains the EBADENGINE warnings of npm ci, and names the Node that package.json requires', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      engines: { node: string };
    };
    const minimum = pkg.engines.node.replace(/^>=/, '').replace(/\.0$/, '');
    expect(README).toContain(`Node.js ${minimum} or later runs it`);
    expect(README).toMatch(
      /`npm warn EBADENGINE` lines about the older Node:\s+expected, and harmless/,
    );
  });
});
