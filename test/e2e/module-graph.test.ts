/**
 * What the real processes load before they are used, read from inside them
 * (helpers/module-log.mjs records every module a process loads): a host
 * starts `mcp-progress mcp` at its own start, and a daemon may sit idle all
 * day, so each loads what it needs when it first needs it. Each test then
 * uses the process and sees the module arrive, so that it can fail.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, startDaemon, tempDir } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio, httpBase, initializeText, MCP_POST_HEADERS } from '../helpers/mcp.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

const HOOK = join(import.meta.dirname, '../helpers/module-log.mjs');

function logEnv(log: string): Record<string, string> {
  return { NODE_OPTIONS: `--import ${HOOK}`, MCP_PROGRESS_TEST_MODULE_LOG: log };
}

function loaded(log: string): string[] {
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

const matching = (modules: string[], pattern: RegExp) => modules.filter((url) => pattern.test(url));

const WS = /\/node_modules\/ws\//;
const GATEWAY_CLIENT = /\/dist\/gateway-client\//;
const SDK_2 = /\/node_modules\/@modelcontextprotocol\/server\//;
const DAEMON = /\/dist\/daemon\/|\/node_modules\/node-ipc\//;
const SDK = /\/node_modules\/@modelcontextprotocol\//;
const NODE_IPC = /\/node_modules\/node-ipc\//;
const ZOD = /\/node_modules\/zod\//;
const RPC = /\/dist\/daemon\/rpc\.js$/;
const MCP_SERVER = /\/dist\/mcp\/(mcp-server|http-sessions)\.js$/;

describe('modules loaded when first used', () => {
  it('`mcp-progress mcp` with a daemon running answers initialize and tools/list without ws, the gateway client, the 2.x SDK or a daemon', async () => {
    const daemon = await startDaemon();
    const log = join(tempDir(), 'modules.log');
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir], logEnv(log));
    expect((await mcp.client.listTools()).tools).toHaveLength(3);
    const idle = loaded(log);
    expect(matching(idle, /\/dist\/cli\/mcp-command\.js$/)).toHaveLength(1);
    expect(matching(idle, WS)).toEqual([]);
    expect(matching(idle, GATEWAY_CLIENT)).toEqual([]);
    expect(matching(idle, SDK_2)).toEqual([]);
    expect(matching(idle, DAEMON)).toEqual([]);
    // The first call connects: the gateway client and ws arrive then.
    expect(
      (await mcp.client.callTool({ name: 'list_progress', arguments: {} })).isError,
    ).toBeFalsy();
    const used = loaded(log);
    expect(matching(used, GATEWAY_CLIENT).length).toBeGreaterThan(0);
    expect(matching(used, WS).length).toBeGreaterThan(0);
    await mcp.close();
  });

  it("`mcp-progress mcp` loads zod's English locale alone, and zod's errors still read in English", async () => {
    const daemon = await startDaemon();
    const log = join(tempDir(), 'modules.log');
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir], logEnv(log));
    // A token of the wrong type fails the tool's input schema: zod's message, from its en locale.
    const refused = await mcp.client.callTool({
      name: 'watch_progress',
      arguments: { progressToken: { not: 'a token' } },
    });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain('Invalid input');
    const locales = matching(loaded(log), /\/node_modules\/zod\/v4\/locales\//);
    expect(locales.map((url) => url.replace(/^.*\/locales\//, ''))).toEqual(['en.js']);
    expect(matching(loaded(log), /\/dist\/shared\/zod-english\.js$/)).toHaveLength(1);
    await mcp.close();
  });

  it('`mcp-progress mcp` with no daemon embeds one without ws, the gateway client or node-ipc; a worker brings node-ipc', async () => {
    const runtimeDir = join(tempDir(), 'rt');
    const log = join(tempDir(), 'modules.log');
    const mcp = await connectStdio(['--runtime-dir', runtimeDir, '--port', '0'], logEnv(log));
    expect((await mcp.client.listTools()).tools).toHaveLength(3);
    expect(
      (await mcp.client.callTool({ name: 'list_progress', arguments: {} })).isError,
    ).toBeFalsy();
    const embedded = loaded(log);
    expect(matching(embedded, /\/dist\/daemon\/daemon\.js$/)).toHaveLength(1);
    for (const absent of [WS, GATEWAY_CLIENT, NODE_IPC, RPC])
      expect(matching(embedded, absent)).toEqual([]);
    const worker = await rawWorker(join(runtimeDir, 'bridge.sock'));
    worker.send('ping', {});
    await worker.reply((reply) => reply.type === 'pong');
    expect(matching(loaded(log), NODE_IPC).length).toBeGreaterThan(0);
    worker.destroy();
    await mcp.close();
  });

  it('the daemon starts without node-ipc, ws, zod or the MCP SDK; a worker brings node-ipc, a session ws and zod, /mcp the SDK', async () => {
    const log = join(tempDir(), 'modules.log');
    const saved = { ...process.env };
    Object.assign(process.env, logEnv(log));
    const daemon = await startDaemon().finally(() => {
      process.env = saved;
    });
    const started = loaded(log);
    expect(matching(started, /\/dist\/daemon\/daemon\.js$/)).toHaveLength(1);
    for (const absent of [NODE_IPC, WS, ZOD, RPC, SDK, MCP_SERVER, GATEWAY_CLIENT])
      expect(matching(started, absent)).toEqual([]);
    // A worker's good frames are read with the hand-written checks: node-ipc, and still no zod.
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', { v: 1, progressToken: 'module-graph', progress: 1, seq: 1 });
    await worker.reply((reply) => reply.type === 'ack');
    const read = loaded(log);
    expect(matching(read, NODE_IPC).length).toBeGreaterThan(0);
    expect(matching(read, ZOD)).toEqual([]);
    expect(matching(read, WS)).toEqual([]);
    // The first WebSocket session brings ws and the JSON-RPC handlers with zod's schemas.
    const gateway = await connectGateway(daemon.info);
    expect((await gateway.request('progress/list', {})).result).toBeDefined();
    const session = loaded(log);
    for (const arrived of [WS, ZOD, RPC])
      expect(matching(session, arrived).length).toBeGreaterThan(0);
    expect(matching(session, SDK)).toEqual([]);
    await gateway.close();
    worker.destroy();
    const response = await fetch(`${httpBase(daemon.info)}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${daemon.info.secret}`,
        ...MCP_POST_HEADERS,
      },
      body: initializeText('module-graph-test'),
    });
    expect(response.status).toBe(200);
    await response.body?.cancel();
    await eventually(
      () => (matching(loaded(log), SDK).length > 0 ? true : undefined),
      10_000,
      'the SDK loaded',
    );
    expect(matching(loaded(log), MCP_SERVER).length).toBeGreaterThan(0);
    await daemon.stop();
  });
});
