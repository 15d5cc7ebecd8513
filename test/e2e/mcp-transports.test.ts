/**
 * The scenarios every MCP client of the bridge must see alike, written once and run over each:
 * SDK 1.x and 2.x (every negotiation mode), over stdio to `mcp-progress mcp` and over Streamable
 * HTTP to /mcp; and raw HTTP clients of both revisions that go away mid-call.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../helpers/daemon.js';
import { daemonForFile } from '../helpers/file-daemon.js';
import { waitForSubscribers } from '../helpers/mcp.js';
import {
  expectWatchHappyPath,
  HTTP_TRANSPORTS,
  RAW_CALLERS,
  rawToolCall,
  STDIO_TRANSPORTS,
  watchResultOf,
} from '../helpers/mcp-transports.js';

const daemon = daemonForFile();

describe.each([...STDIO_TRANSPORTS, ...HTTP_TRANSPORTS].map((t, i) => ({ ...t, i })))(
  '$name',
  (transport) => {
    it('watch_progress streams every update under the call token, then the result, then nothing', async () => {
      const mcp = await transport.connect(daemon);
      try {
        await expectWatchHappyPath(transport, mcp, daemon, `watched-${transport.i}`);
      } finally {
        await mcp.close();
      }
    });
  },
);

describe.each(HTTP_TRANSPORTS)('$name, when the daemon stops', (transport) => {
  it('the daemon stops gracefully while a request holds a watch open on /mcp', async () => {
    const own = await startDaemon();
    const mcp = await transport.connect(own);
    const call = mcp.call('watch_progress', { progressToken: 'forever' }).catch(() => undefined);
    await waitForSubscribers(own.info, 'forever');
    expect(await own.stop()).toBe(0);
    expect(own.stderr()).toContain('stopped');
    expect(existsSync(join(own.runtimeDir, 'daemon.json'))).toBe(false);
    // The stop ends the watch's stream without inventing a result for it.
    expect(watchResultOf(mcp.received, 'forever').at).toBe(-1);
    // The SDK client waits to resume a stream that ended without an answer; closing it ends the call.
    await mcp.close();
    await call;
  });
});

describe.each(RAW_CALLERS.map((c, i) => ({ ...c, i })))('$name', (caller) => {
  it('that disconnects mid tools/call loses its watch and subscription, and is served after', async () => {
    const token = `abandoned-${caller.i}`;
    const headers = await caller.open(daemon);
    const controller = new AbortController();
    const call = rawToolCall(
      daemon,
      caller,
      headers,
      { id: 1, tool: 'watch_progress', args: { progressToken: token, timeoutMs: 600_000 } },
      controller.signal,
    );
    await waitForSubscribers(daemon.info, token, 1);
    controller.abort();
    await call;
    // The daemon drops the subscription long before the watch's own 10-minute timeout.
    await waitForSubscribers(daemon.info, token, 0, 20_000);
    // It ended that request only: the same client (and session) is answered at once.
    const listed = await rawToolCall(daemon, caller, headers, {
      id: 2,
      tool: 'get_progress',
      args: { progressToken: token },
    });
    expect(listed).toContain(`"progressToken":"${token}"`);
    expect(listed).toMatch(/"id":2/);
  });
});
