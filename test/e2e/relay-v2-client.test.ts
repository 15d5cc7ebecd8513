/**
 * relayProgress in a server built with @modelcontextprotocol/server 2.x that
 * serves the 2026-07-28 revision (createMcpHandler), called by a 2.x client
 * pinned to it: that revision has no server-to-client requests, so the
 * relay's pre-result ping is refused by the SDK, and the relay must still
 * forward every value, settle `done` and let the result go out.
 */
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { relayProgress } from '../../src/mcp/index.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { runWorker } from '../helpers/mcp.js';
import { connectUrlV2, NEWEST_REVISION } from '../helpers/mcp-v2.js';
import {
  type HostedServer,
  sendWebResponse,
  serveOnLoopback,
  webRequest,
} from '../helpers/relay-servers.js';

const daemon = daemonForFile();

/** A 2.x server whose one tool runs a worker under relayProgress, on a loopback port. */
async function hostModern(): Promise<HostedServer> {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'render-server', version: '2.0.0' });
    server.registerTool(
      'render',
      { inputSchema: z.object({ steps: z.int().min(1) }) },
      async ({ steps }, ctx) => {
        await using relay = await relayProgress(ctx, {
          runtimeDir: daemon.runtimeDir,
          minIntervalMs: 0,
        });
        const worker = await runWorker(relay.env, [String(steps)]);
        if (worker.code !== 0) throw new Error(`the worker failed: ${worker.stderr}`);
        const done = await relay.done;
        return {
          content: [{ type: 'text' as const, text: `rendered ${steps} frames: ${done?.status}` }],
        };
      },
    );
    return server;
  });
  return serveOnLoopback(
    async (request, response) =>
      sendWebResponse(response, await handler.fetch(await webRequest(request))),
    () => handler.close(),
    { standaloneStream: true },
  );
}

/** Calls render for 4 steps: every value reaches the client's onprogress in order, then the result. */
async function expectRenderedFour(mcp: Awaited<ReturnType<typeof connectUrlV2>>): Promise<void> {
  const seen: number[] = [];
  const result = await mcp.client.callTool(
    { name: 'render', arguments: { steps: 4 } },
    { onprogress: (p) => seen.push(p.progress), timeout: 30_000 },
  );
  expect(result.content).toEqual([{ type: 'text', text: 'rendered 4 frames: ok' }]);
  expect(seen).toEqual([1, 2, 3, 4]);
}

describe('relayProgress on createMcpHandler for a client on a 2025 revision (no session)', () => {
  it('sends no ping that no server instance could receive: every value, then the result', async () => {
    const server = await hostModern();
    const mcp = await connectUrlV2(server.url, 'legacy');
    try {
      expect(mcp.client.getNegotiatedProtocolVersion()).not.toBe(NEWEST_REVISION);
      await expectRenderedFour(mcp);
      // The answer to a ping would be a POST of its own, to a fresh server: it would wait 2 s for nothing.
      expect(mcp.received.filter((m) => m.method === 'ping')).toEqual([]);
    } finally {
      await mcp.close();
      await server.close();
    }
  });
});

describe(`relayProgress for a 2.x client at ${NEWEST_REVISION}`, () => {
  it('forwards every value in order, settles done, and the result follows', async () => {
    const server = await hostModern();
    const mcp = await connectUrlV2(server.url, 'pin');
    try {
      expect(mcp.client.getNegotiatedProtocolVersion()).toBe(NEWEST_REVISION);
      await expectRenderedFour(mcp);
      const progress = mcp.received.filter((m) => m.method === 'notifications/progress');
      expect(progress.map((m) => (m.params as { progress: number }).progress)).toEqual([
        1, 2, 3, 4,
      ]);
      const resultAt = mcp.received.findIndex(
        (m) => 'result' in m && 'content' in (m.result as object),
      );
      expect(mcp.received.findLastIndex((m) => m.method === 'notifications/progress')).toBeLessThan(
        resultAt,
      );
    } finally {
      await mcp.close();
      await server.close();
    }
  });
});
