/**
 * @modelcontextprotocol/client 2.x at the newest revision it offers (2026-07-28) beside the 2025
 * ones: the same tools, an embedded daemon, routing by revision on /mcp. The watch, disconnect
 * and stop scenarios of every mode and transport are in mcp-transports.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { readDaemonInfo } from '../../src/shared/locate.js';
import { tempDir } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { connectStdio, httpBase, postMcp } from '../helpers/mcp.js';
import { connectStdioV2, NEWEST_REVISION } from '../helpers/mcp-v2.js';

const daemon = daemonForFile();

describe('the 2026-07-28 revision beside the 2025 ones', () => {
  it('a 2.x client lists the same tools, with the same schemas, as an SDK 1.x client', async () => {
    const modern = await connectStdioV2(['--runtime-dir', daemon.runtimeDir], 'pin');
    const legacy = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    try {
      // Each SDK names its own JSON Schema dialect ($schema); the schemas themselves match.
      const bare = (schema: unknown) => {
        const { $schema: _dialect, ...rest } = (schema ?? {}) as Record<string, unknown>;
        return rest;
      };
      const shape = (
        tools: Array<{ name: string; inputSchema: unknown; outputSchema?: unknown }>,
      ) =>
        tools
          .map(({ name, inputSchema, outputSchema }) => ({
            name,
            inputSchema: bare(inputSchema),
            outputSchema: bare(outputSchema),
          }))
          .sort((a, b) => a.name.localeCompare(b.name));
      const modernTools = shape((await modern.client.listTools()).tools);
      expect(modernTools.map((t) => t.name)).toEqual([
        'get_progress',
        'list_progress',
        'watch_progress',
      ]);
      expect(modernTools).toEqual(shape((await legacy.client.listTools()).tools));
    } finally {
      await modern.close();
      await legacy.close();
    }
  });

  it('over stdio with no daemon running, a pinned 2.x client gets an embedded one', async () => {
    // The 2.x client probes server/discover on a second, short-lived `mcp` process first.
    const runtimeDir = tempDir();
    const mcp = await connectStdioV2(['--runtime-dir', runtimeDir], 'pin');
    try {
      expect(mcp.client.getNegotiatedProtocolVersion()).toBe(NEWEST_REVISION);
      const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
      expect(listed.structuredContent).toEqual({ streams: [] });
      expect((await readDaemonInfo(runtimeDir)).socket).toBeTruthy();
    } finally {
      await mcp.close();
    }
  });
});

describe('routing by revision on /mcp', () => {
  const post = (body: unknown) =>
    postMcp(`${httpBase(daemon.info)}/mcp`, body, {
      authorization: `Bearer ${daemon.info.secret}`,
    });

  it('a request claiming a revision the bridge does not serve is told which it does', async () => {
    const response = await post({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/list',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2099-01-01',
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    });
    const text = await response.text();
    expect(response.status, text).toBeGreaterThanOrEqual(400);
    expect(text).toContain(NEWEST_REVISION);
    expect(text).not.toContain('initialize a new session');
  });

  it('a claim-less request without a session is still told to initialize', async () => {
    const response = await post({ jsonrpc: '2.0', id: 8, method: 'tools/list' });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('initialize');
  });
});
