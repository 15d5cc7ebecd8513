/** The Node gateway client against the real daemon, including a daemon restart. */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { GatewayClient, GatewayRpcError } from '../../src/gateway-client/gateway-client.js';
import type { Notification } from '../../src/protocol/notifications.js';
import { BridgeError } from '../../src/shared/errors.js';
import { cleanupAll, eventually, runCli, startDaemon, tempDir } from '../helpers/daemon.js';
import { startLinkRelay } from '../helpers/link-relay.js';
import { progressFrame, rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

const publish = (socket: string, token: string, progress: number) =>
  runCli(['publish', '--socket', socket, '--token', token, '--progress', String(progress)]);

/** A daemon on a runtime dir of its own, and a GatewayClient that finds it there and records its states. */
async function clientOfRestartable() {
  const runtimeDir = tempDir();
  const first = await startDaemon([], runtimeDir);
  const states: string[] = [];
  const client = await GatewayClient.connect({ runtimeDir, onState: (s) => states.push(s) });
  return { runtimeDir, first, states, client };
}

/** A daemon, a relay in front of its local link, and a client through the relay; its states. */
async function throughRelay() {
  const daemon = await startDaemon();
  const relay = await startLinkRelay(daemon.info);
  const states: string[] = [];
  const client = await GatewayClient.connect({
    runtimeDir: relay.runtimeDir,
    onState: (s) => states.push(s),
  });
  return { daemon, relay, states, client };
}

describe('GatewayClient', () => {
  it('finds the daemon through daemon.json, subscribes, and reports RPC errors with codes', async () => {
    const daemon = await startDaemon();
    const client = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    const got: Notification[] = [];
    await client.subscribe({ progressToken: 'gc', as: 'mine', minIntervalMs: 0 }, (n) =>
      got.push(n),
    );
    await publish(daemon.info.socket, 'gc', 1);
    await eventually(() => (got.length === 1 ? true : undefined));
    expect(got[0]?.params).toEqual({ progressToken: 'mine', progress: 1 });
    const error = await client
      .request('progress/subscribe', { progressToken: '' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayRpcError);
    expect(error).toMatchObject({ code: 'invalid_params', rpcCode: -32602 });
    expect((await client.list()).streams.map((s) => s.progressToken)).toContain('gc');
    await client.close();
    await daemon.stop();
  });

  it('delivers a message in any script as it was sent (its text decoded as UTF-8)', async () => {
    const daemon = await startDaemon();
    const client = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    const got: Notification[] = [];
    await client.subscribe({ progressToken: 'utf8', minIntervalMs: 0 }, (n) => got.push(n));
    const message = 'Übersetzung 翻訳 € 🎬';
    await runCli([
      'publish',
      ...['--socket', daemon.info.socket, '--token', 'utf8', '--progress', '1'],
      ...['--message', message],
    ]);
    await eventually(() => (got.length === 1 ? true : undefined));
    expect(got[0]?.params).toEqual({ progressToken: 'utf8', progress: 1, message });
    await client.close();
    await daemon.stop();
  });

  it('never puts a secret given in the URL into its error messages', async () => {
    const error = await GatewayClient.connect({
      url: 'ws://127.0.0.1:1/ws?access_token=hunter2-secret',
      secret: 'hunter2-secret',
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toMatchObject({ code: 'gateway_unreachable' });
    expect(error?.message).toContain('access_token=***');
    expect(error?.message).not.toContain('hunter2');
  });

  it('reconnects and resubscribes after the daemon is killed and restarted, never repeating a value', async () => {
    const { runtimeDir, first, states, client } = await clientOfRestartable();
    const seen: number[] = [];
    await client.subscribe({ progressToken: 'survivor', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') seen.push(n.params.progress);
    });
    await publish(first.info.socket, 'survivor', 1);
    await publish(first.info.socket, 'survivor', 2);
    await eventually(() => (seen.length === 2 ? true : undefined));
    await first.stop('SIGKILL');
    const second = await startDaemon([], runtimeDir);
    await eventually(
      () => (states.at(-1) === 'connected' && states.length >= 3 ? true : undefined),
      10_000,
      'reconnect',
    );
    // The restarted stream replays 2 (not shown again), then moves on.
    await publish(second.info.socket, 'survivor', 2);
    await publish(second.info.socket, 'survivor', 3);
    await eventually(() => (seen.length === 3 ? true : undefined));
    expect(seen).toEqual([1, 2, 3]);
    expect(states).toEqual(['connected', 'disconnected', 'connected']);
    await client.close();
    await second.stop();
  });

  it('reports a connection only once it has resubscribed: one that drops while it resubscribes gets no state, and states alternate', async () => {
    const { daemon, relay, states, client } = await throughRelay();
    const seen: number[] = [];
    await client.subscribe({ progressToken: 'resubscribing', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') seen.push(n.params.progress);
    });
    // The reconnect's connection dies at its first message, the resubscribe; the next one lives.
    relay.verdict = (connection) => (connection.index === 2 ? 'cut' : 'pass');
    relay.connections[0]?.cut();
    await eventually(
      () => (relay.connections.length >= 3 && states.at(-1) === 'connected' ? true : undefined),
      10_000,
      'the third connection to be reported',
    );
    expect(relay.connections[1]?.sent.map((text) => JSON.parse(text).method)).toEqual([
      'progress/subscribe',
    ]);
    await publish(daemon.info.socket, 'resubscribing', 1);
    await eventually(() => (seen.length === 1 ? true : undefined), 10_000, 'a value after');
    expect(states).toEqual(['connected', 'disconnected', 'connected']);
    await client.close();
    await relay.close();
    await daemon.stop();
  });

  it('reports nothing after close(), even for a reconnect whose resubscribe was under way', async () => {
    const { daemon, relay, states, client } = await throughRelay();
    await client.subscribe({ progressToken: 'closing', minIntervalMs: 0 }, () => {});
    // The reconnect's resubscribe is held unanswered; close() comes while it waits.
    relay.verdict = (connection) => (connection.index === 2 ? 'hold' : 'pass');
    relay.connections[0]?.cut();
    await eventually(
      () => (relay.connections[1]?.sent.length === 1 ? true : undefined),
      10_000,
      'the resubscribe on the reconnect',
    );
    expect(states).toEqual(['connected', 'disconnected']);
    await client.close();
    expect(states).toEqual(['connected', 'disconnected']);
    await relay.close();
    await daemon.stop();
  });

  it("delivers nothing of a connection close() is closing: a notification in close()'s linger is dropped", async () => {
    const { daemon, relay, client } = await throughRelay();
    const seen: number[] = [];
    await client.subscribe({ progressToken: 'lingering', minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress') seen.push(n.params.progress);
    });
    // A worker already connected: its value 2 reaches the client well within close()'s linger.
    const worker = await rawWorker(daemon.info.socket);
    worker.send('progress', progressFrame('lingering', 1));
    await eventually(() => (seen.length === 1 ? true : undefined), 10_000, 'value 1');
    // From the next message on nothing the client sends reaches the daemon, its close frame
    // neither: the daemon keeps the session and sends on while close() lingers.
    relay.verdict = () => 'hold';
    const listing = client.list().catch((e: unknown) => e);
    await eventually(
      () => (relay.connections[0]?.sent.length === 2 ? true : undefined),
      10_000,
      'the held request',
    );
    const closing = client.close();
    worker.send('progress', progressFrame('lingering', 2));
    await eventually(
      () =>
        relay.connections[0]?.received.some(
          (text) => (JSON.parse(text) as { params?: { progress?: number } }).params?.progress === 2,
        )
          ? true
          : undefined,
      10_000,
      'value 2 passed on to the closing client',
    );
    // The socket ends after value 2: close() is over once the client has read all of it.
    relay.connections[0]?.cut();
    await closing;
    expect(await listing).toMatchObject({ code: 'closed' });
    expect(seen).toEqual([1]);
    worker.destroy();
    await relay.close();
    await daemon.stop();
  });

  it("close() during a reconnect's read of daemon.json stops the attempt: it never connects", async () => {
    const { daemon, relay, client } = await throughRelay();
    const infoPath = join(relay.runtimeDir, 'daemon.json');
    const info = readFileSync(infoPath);
    // daemon.json becomes a FIFO: a reconnect's read of it waits until the test writes to it.
    rmSync(infoPath);
    execFileSync('mkfifo', ['-m', '600', infoPath]);
    const openWriter = () => openSync(infoPath, constants.O_WRONLY | constants.O_NONBLOCK);
    // A reader still waiting there (the test failed first) gets its end of file.
    onTestFinished(() => {
      try {
        closeSync(openWriter());
      } catch {}
    });
    relay.connections[0]?.cut();
    // Opening a FIFO to write without waiting succeeds only while a reader has it open.
    const writer = await eventually(
      () => {
        try {
          return openWriter();
        } catch {
          return undefined;
        }
      },
      10_000,
      'the reconnect to read daemon.json',
    );
    await client.close();
    writeSync(writer, info);
    closeSync(writer);
    await eventually(
      () => {
        try {
          closeSync(openWriter());
          return undefined;
        } catch (error) {
          return (error as NodeJS.ErrnoException).code === 'ENXIO' ? true : undefined;
        }
      },
      10_000,
      'the reconnect to finish reading daemon.json',
    );
    // A client that connects now goes through the relay too: a connection the closed one made
    // after its read would come before this one's.
    const probeDir = tempDir();
    writeFileSync(join(probeDir, 'daemon.json'), info, { mode: 0o600 });
    const probe = await GatewayClient.connect({ runtimeDir: probeDir });
    await probe.list();
    await probe.close();
    // The closed client's first connection (it sent nothing), then the probe's.
    expect(
      relay.connections.map((connection) =>
        connection.sent.map((text) => (JSON.parse(text) as { method: string }).method),
      ),
    ).toEqual([[], ['progress/list']]);
    await relay.close();
    await daemon.stop();
  });

  it('a resubscribe the restarted daemon refuses ends that subscription through onError, with the code and the token', async () => {
    const { runtimeDir, first, states, client } = await clientOfRestartable();
    const kept: number[] = [];
    const errors = { kept: [] as BridgeError[], refused: [] as BridgeError[] };
    await client.subscribe(
      { progressToken: 'kept', minIntervalMs: 0 },
      (n) => {
        if (n.method === 'notifications/progress') kept.push(n.params.progress);
      },
      (error) => errors.kept.push(error),
    );
    await client.subscribe(
      { progressToken: 'refused', minIntervalMs: 0 },
      () => {},
      (error) => errors.refused.push(error),
    );
    await first.stop('SIGKILL');
    // The daemon that comes back takes one subscription per session: the second resubscribe is refused.
    const second = await startDaemon(['--max-subscriptions', '1'], runtimeDir);
    const refusal = await eventually(() => errors.refused[0], 10_000, 'the refused resubscribe');
    expect(refusal).toBeInstanceOf(BridgeError);
    expect(refusal.code).toBe('too_many_subscriptions');
    expect(refusal.message).toContain('resubscribing to "refused"');
    // The other subscription lives on in the new daemon.
    await eventually(() => (states.at(-1) === 'connected' ? true : undefined));
    await publish(second.info.socket, 'kept', 1);
    await eventually(() => (kept.length === 1 ? true : undefined), 10_000, 'kept progress');
    expect(errors.kept).toEqual([]);
    expect(errors.refused).toHaveLength(1);
    await client.close();
    await second.stop();
  });

  it('subscribeAll gets a new stream from its first value; --max-subscribe-all refuses one session too many, naming the flag', async () => {
    const daemon = await startDaemon(['--max-subscribe-all', '1']);
    const first = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    const second = await GatewayClient.connect({ runtimeDir: daemon.runtimeDir });
    const seen: Array<[string | number, number]> = [];
    const all = await first.subscribeAll({ minIntervalMs: 0 }, (n) => {
      if (n.method === 'notifications/progress')
        seen.push([n.params.progressToken, n.params.progress]);
    });
    const refusal = await second.subscribeAll(undefined, () => {}).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'too_many_subscriptions' });
    expect((refusal as Error).message).toContain('--max-subscribe-all');
    for (const progress of [1, 2, 3]) await publish(daemon.info.socket, 'everyone', progress);
    await eventually(() => (seen.length === 3 ? true : undefined), 10_000, 'three values');
    expect(seen).toEqual([
      ['everyone', 1],
      ['everyone', 2],
      ['everyone', 3],
    ]);
    // Leaving frees the place: the other session may now follow every stream.
    await all.unsubscribe();
    await expect(second.subscribeAll(undefined, () => {})).resolves.toBeDefined();
    await first.close();
    await second.close();
    await daemon.stop();
  });

  it('says clearly when no daemon runs', async () => {
    const error = await GatewayClient.connect({ runtimeDir: tempDir() }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'daemon_not_running' });
  });
});

/** A WebSocket server that answers every request with `answer(request)` and can push raw text. */
async function fakeDaemon(answer: (request: { id: number; method: string }) => unknown) {
  const server = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    handleProtocols: () => 'mcp-progress.v1',
  });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const sockets: WebSocket[] = [];
  server.on('connection', (ws) => {
    sockets.push(ws);
    ws.on('message', (data) => {
      const request = JSON.parse(String(data)) as { id: number; method: string };
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: request.id, result: answer(request) }));
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/ws`,
    push: (text: string) => {
      for (const ws of sockets) ws.send(text);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('GatewayClient against a daemon that answers out of schema', () => {
  it('a reply that does not match its schema is a bad_reply BridgeError naming the field', async () => {
    const fake = await fakeDaemon((request) =>
      request.method === 'progress/list'
        ? { streams: [{ progressToken: 'x', state: 'running' }] }
        : request.method === 'progress/cancel'
          ? { workers: 'two' }
          : request.method === 'progress/get'
            ? { stream: 5 }
            : { surprise: true },
    );
    const client = await GatewayClient.connect({ url: fake.url, secret: 's', reconnect: false });
    for (const attempt of [
      () => client.list(),
      () => client.cancel('x'),
      () => client.get('x'),
      () => client.subscribe({ progressToken: 'x' }, () => {}),
    ]) {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BridgeError);
      expect(error).toMatchObject({ code: 'bad_reply' });
      expect((error as Error).message).toMatch(/does not match its schema \(result/);
    }
    const listError = (await client.list().catch((e: unknown) => e)) as Error;
    expect(listError.message).toContain('result.streams.0');
    await client.close();
    await fake.close();
  });

  it('a notification whose params do not match is dropped; a good one is delivered', async () => {
    const fake = await fakeDaemon(() => ({}));
    const client = await GatewayClient.connect({ url: fake.url, secret: 's', reconnect: false });
    const got: Notification[] = [];
    await client.subscribe({ progressToken: 'n', minIntervalMs: 0 }, (n) => got.push(n));
    const notify = (params: unknown) =>
      fake.push(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params }));
    notify({ progressToken: 'n', progress: 'one' });
    notify({ progressToken: 'n' });
    fake.push('not json');
    notify({ progressToken: 'n', progress: 1 });
    await eventually(() => (got.length > 0 ? true : undefined));
    expect(got.map((n) => n.params)).toEqual([{ progressToken: 'n', progress: 1 }]);
    await client.close();
    await fake.close();
  });
});
