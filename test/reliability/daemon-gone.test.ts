/**
 * A daemon that goes away and never comes back: the gateway client keeps
 * reconnecting for `reconnectTimeoutMs`, then gives up with `gateway_lost`,
 * ends its subscriptions with that error and rejects requests with it; so
 * watch_progress and relayProgress end with it rather than at their own
 * (much longer) timeouts. A real daemon, stopped (SIGTERM) and not restarted.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, describe, expect, it } from 'vitest';
import { connectPublisher } from '../../src/client/index.js';
import { GatewayClient } from '../../src/gateway-client/gateway-client.js';
import {
  createProgressMcpServer,
  RemoteProgressSource,
  relayProgress,
} from '../../src/mcp/index.js';
import type { Notification } from '../../src/protocol/notifications.js';
import type { BridgeError } from '../../src/shared/errors.js';
import { cleanupAll, eventually, startDaemon } from '../helpers/daemon.js';
import { connectUrl, textOf } from '../helpers/mcp.js';
import { hostV1 } from '../helpers/relay-servers.js';

afterAll(() => cleanupAll());

/** Far longer than the test waits: the calls must end with gateway_lost, not at these. */
const LONG_MS = 120_000;
const RECONNECT_TIMEOUT_MS = 300;

/** A worker on SOCKET that has published progress 1 for TOKEN, its errors ignored (the daemon goes away). */
async function publishedOne(token: string, socket: string) {
  const publisher = await connectPublisher({ token, socket, intervalMs: 0, onError: () => {} });
  publisher.update({ progress: 1 });
  return publisher;
}

describe('a daemon that never comes back', () => {
  it('the gateway client gives up after reconnectTimeoutMs: gateway_lost ends each subscription and rejects requests', async () => {
    const daemon = await startDaemon();
    const states: string[] = [];
    const client = await GatewayClient.connect({
      url: daemon.info.url,
      secret: daemon.info.secret,
      reconnectTimeoutMs: RECONNECT_TIMEOUT_MS,
      onState: (state) => states.push(state),
    });
    const seen: Notification[] = [];
    const ended: BridgeError[] = [];
    for (const progressToken of ['a', 'b'])
      await client.subscribe(
        { progressToken, minIntervalMs: 0 },
        (n) => seen.push(n),
        (error) => ended.push(error),
      );
    const publisher = await publishedOne('a', daemon.info.socket);
    await eventually(() => (seen.length === 1 ? true : undefined), 10_000, 'the first value');
    await daemon.stop();
    await eventually(
      () => (ended.length === 2 ? true : undefined),
      30_000,
      'both subscriptions ended',
    );
    expect(ended.map((e) => e.code)).toEqual(['gateway_lost', 'gateway_lost']);
    expect(ended[0]?.message).toContain('reconnectTimeoutMs');
    expect(states).toEqual(['connected', 'disconnected']);
    await expect(client.get('a')).rejects.toMatchObject({ code: 'gateway_lost' });
    await publisher.close();
    await client.close();
  });

  it('watch_progress ends with gateway_lost, not at its timeout', async () => {
    const daemon = await startDaemon();
    const source = await RemoteProgressSource.connect({
      url: daemon.info.url,
      secret: daemon.info.secret,
      reconnectTimeoutMs: RECONNECT_TIMEOUT_MS,
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = createProgressMcpServer({ source });
    await server.connect(serverSide);
    const client = new Client({ name: 'mcp-progress-test', version: '0.0.0' });
    await client.connect(clientSide);
    const progress: number[] = [];
    const call = client.callTool(
      {
        name: 'watch_progress',
        arguments: { progressToken: 'watched', minIntervalMs: 0, timeoutMs: LONG_MS },
      },
      undefined,
      { onprogress: (p) => progress.push(p.progress), timeout: LONG_MS },
    );
    const publisher = await publishedOne('watched', daemon.info.socket);
    await eventually(() => (progress.length === 1 ? true : undefined), 10_000, 'the first value');
    await daemon.stop();
    const result = await call;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('none came back within 300 ms (reconnectTimeoutMs)');
    expect(progress).toEqual([1]);
    await publisher.close();
    await client.close();
    await source.close();
  });

  it('relayProgress ends: done settles and relay.error is gateway_lost, with one warning', async () => {
    const daemon = await startDaemon();
    const warnings: string[] = [];
    const server = await hostV1(async (_args, extra) => {
      const relay = await relayProgress(extra, {
        url: daemon.info.url,
        secret: daemon.info.secret,
        socket: daemon.info.socket,
        minIntervalMs: 0,
        reconnectTimeoutMs: RECONNECT_TIMEOUT_MS,
        onWarning: (message) => warnings.push(message),
      });
      const publisher = await publishedOne(
        relay.env.MCP_PROGRESS_TOKEN,
        relay.env.MCP_PROGRESS_SOCKET,
      );
      const done = await relay.done;
      await publisher.close();
      await relay.close();
      return `done=${JSON.stringify(done)} error=${relay.error?.code}`;
    });
    const mcp = await connectUrl(server.url);
    const progress: number[] = [];
    const call = mcp.client.callTool({ name: 'render', arguments: { steps: 1 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: LONG_MS,
    });
    await eventually(() => (progress.length === 1 ? true : undefined), 10_000, 'the first value');
    await daemon.stop();
    const result = await call;
    expect(textOf(result)).toBe('done=undefined error=gateway_lost');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('progress relaying ended');
    await mcp.close();
    await server.close();
  });
});
