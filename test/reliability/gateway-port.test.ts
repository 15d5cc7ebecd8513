/**
 * The gateway port before authentication: connections that have not shown the secret are capped
 * per local user and timed out, so that another local user holding thousands of half-sent
 * connections, renewed as each is closed, hurts neither the owner's new sessions nor workers.
 * The holder really is another user (created with useradd when the test runs as root, as in CI).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, type RunningDaemon, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { httpBase, initializeText } from '../helpers/mcp.js';
import { asOtherUserOptions, OTHER_USER, otherUser } from '../helpers/other-user.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { rawWorker, workerStatus } from '../helpers/worker.js';

afterAll(() => cleanupAll());

/**
 * Opens `count` connections, each with half an upgrade request, and holds them until stdin ends;
 * with `renew`, each one the daemon closes is replaced at once by a new one.
 */
const HOLDER = `
import resource, selectors, socket, sys
port, count, renew = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "renew"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
sel = selectors.DefaultSelector()
sel.register(sys.stdin, selectors.EVENT_READ)
def hold():
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(b"GET /ws HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nUpgrade: websocket\\r\\n" % port)
    except OSError:
        pass
    if renew:
        sel.register(s, selectors.EVENT_READ)
    return s
held = [hold() for _ in range(count)]
if not renew:
    # The first was evicted by a later one of ours: what the daemon told it.
    held[0].settimeout(60)
    print("first was told", held[0].recv(4096).decode().replace("\\r\\n", " "), flush=True)
print("holding", len(held), flush=True)
renewed = 0
while True:
    for key, _ in sel.select():
        if key.fileobj is sys.stdin:
            if not sys.stdin.readline():
                sys.exit(0)
            continue
        sel.unregister(key.fileobj)
        key.fileobj.close()
        hold()
        renewed += 1
        print("renewed", renewed, flush=True)
`;

interface Holder {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  /** How many connections it has replaced so far. */
  renewed(): number;
  /** What it printed. */
  output(): string;
}

/** Runs HOLDER as the other user. */
function holdConnections(port: number, count: number, renew = false): Holder {
  const child = spawn(
    PYTHON,
    [...PYTHON_ARGS, '-c', HOLDER, String(port), String(count), renew ? 'renew' : 'hold'],
    { stdio: ['pipe', 'pipe', 'pipe'], ...asOtherUserOptions() },
  );
  let out = '';
  let printed = '';
  let err = '';
  let renewed = 0;
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    err += text;
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
      if (printed.length < 8192) printed += text;
      const counts = [...out.matchAll(/renewed (\d+)/g)];
      renewed = Number(counts.at(-1)?.[1] ?? 0);
      out = out.slice(-64);
      if (out.includes('holding') || renewed > 0) resolve();
    });
    child.once('exit', (code) => reject(new Error(`holder exited with ${code}: ${err}`)));
  });
  return { child, ready, renewed: () => renewed, output: () => printed };
}

/** Whether an /mcp initialize POST on a connection of its own is answered 200. */
function mcpInitialize(daemon: RunningDaemon): Promise<boolean> {
  const body = initializeText('lockout-test');
  return new Promise((resolve) => {
    const post = request(
      `${httpBase(daemon.info)}/mcp`,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${daemon.info.secret}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (response) => {
        response.resume();
        response.once('end', () => resolve(response.statusCode === 200));
        response.once('error', () => resolve(false));
      },
    );
    post.once('error', () => resolve(false));
    post.end(body);
  });
}

async function metric(base: string, secret: string, name: string): Promise<number> {
  const text = await (
    await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${secret}` } })
  ).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.split(' ')[1]);
}

/** A daemon that takes CAP pending connections per user, each given HANDSHAKE_MS to authenticate. */
const cappedDaemon = (cap: number, handshakeMs: number) =>
  startDaemon([
    '--max-pending-connections',
    String(cap),
    '--handshake-timeout-ms',
    String(handshakeMs),
  ]);

describe.skipIf(otherUser.skip)(
  `the gateway port before authentication, held by ${OTHER_USER}`,
  () => {
    beforeAll(() => otherUser.require());

    it("past --max-pending-connections of one user, a new connection closes that user's oldest; sessions and workers go on", async () => {
      const cap = 32;
      const held = 3000;
      const daemon = await cappedDaemon(cap, 600_000);
      const base = httpBase(daemon.info);
      const port = Number(new URL(base).port);
      // A session authenticated before the holder arrives.
      const subscriber = await connectGateway(daemon.info);
      await subscriber.request('progress/subscribe', { progressToken: 'busy', minIntervalMs: 0 });
      // The owner's own slow client: half its upgrade sent before the holder arrives, so it is
      // the oldest pending connection of all; the holder's flood must not evict it.
      const slow = connect(port, '127.0.0.1');
      let slowAnswer = '';
      slow.setEncoding('utf8').on('data', (chunk: string) => {
        slowAnswer += chunk;
      });
      slow.once('error', () => {});
      await new Promise<void>((resolve) => slow.once('connect', resolve));
      // The daemon's own Host (with its port): any other is 421.
      slow.write(`GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`);
      const holder = holdConnections(port, held);
      await holder.ready;
      // Each connection past the cap closed the holder's oldest: exactly one each.
      const worker = await rawWorker(daemon.info.socket);
      const status = () =>
        workerStatus<{ counters: { pendingConnectionsEvicted: number } }>(worker);
      const evicted = await eventually(async () => {
        const n = (await status()).counters.pendingConnectionsEvicted;
        return n >= held - cap ? n : undefined;
      });
      expect(evicted).toBe(held - cap);
      expect(
        await metric(base, daemon.info.secret, 'mcp_progress_pending_connections_evicted_total'),
      ).toBe(held - cap);
      // The authenticated session and the worker are served as before.
      for (let i = 1; i <= 20; i++)
        worker.send('progress', { v: 1, progressToken: 'busy', progress: i, seq: i });
      await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 20);
      const got = await subscriber.waitFor(20);
      expect(got.map((n) => n.params.progress)).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      expect((await subscriber.request('progress/list')).result).toMatchObject({
        streams: [{ progressToken: 'busy' }],
      });
      // The owner is in a pool of its own: a new session gets in while the holder's pool is full.
      const owner = await connectGateway(daemon.info);
      await owner.close();
      // The owner's slow client finishes its upgrade and is let in.
      slow.write(
        `Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.alloc(16, 7).toString('base64')}\r\nSec-WebSocket-Protocol: mcp-progress.v1\r\nAuthorization: Bearer ${daemon.info.secret}\r\n\r\n`,
      );
      await eventually(() => (slowAnswer.includes('\r\n\r\n') ? true : undefined));
      expect(slowAnswer).toMatch(/^HTTP\/1\.1 101 /);
      slow.destroy();
      // The holder's first connection was closed for a newer one, and told why.
      expect(holder.output()).toMatch(
        /first was told HTTP\/1\.1 503 [\s\S]*"message": "[^"]*--max-pending-connections[\s\S]*"code": "too_many_pending"/,
      );
      holder.child.stdin?.end();
      await subscriber.close();
      worker.destroy();
      await daemon.stop();
    }, 120_000);

    it("another user renewing half-sent upgrades as they time out locks out none of the owner's WebSocket sessions or /mcp POSTs", async () => {
      const cap = 32;
      const attempts = 20;
      // A short handshake timeout, so that the holder renews its connections while the owner connects.
      const daemon = await cappedDaemon(cap, 1000);
      const port = Number(new URL(httpBase(daemon.info)).port);
      const holder = holdConnections(port, cap + 8, true);
      await holder.ready;
      let sessions = 0;
      let posts = 0;
      for (let i = 0; i < attempts; i++) {
        try {
          const session = await connectGateway(daemon.info);
          await session.close();
          sessions++;
        } catch {
          // Refused: counted as not accepted.
        }
        if (await mcpInitialize(daemon)) posts++;
      }
      const renewed = holder.renewed();
      console.log(
        `lockout: owner WebSocket sessions ${sessions}/${attempts}, /mcp POSTs ${posts}/${attempts} accepted while ${OTHER_USER} held ${cap + 8} half-sent upgrades (renewed ${renewed} times)`,
      );
      // The attack ran throughout: the holder's connections were closed and renewed.
      await eventually(() => (holder.renewed() > renewed ? true : undefined), 20_000, 'a renewal');
      expect({ sessions, posts }).toEqual({ sessions: attempts, posts: attempts });
      holder.child.stdin?.end();
      await daemon.stop();
    }, 120_000);
  },
);

describe('the gateway port before authentication', () => {
  it('closes a connection that does not complete its request within --handshake-timeout-ms', async () => {
    const daemon = await startDaemon(['--handshake-timeout-ms', '200']);
    const port = Number(new URL(httpBase(daemon.info)).port);
    const subscriber = await connectGateway(daemon.info);
    const closed = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(`GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`),
      );
      socket.once('close', () => resolve(true));
      socket.once('error', () => {});
    });
    expect(closed).toBe(true);
    const timeouts = await metric(
      httpBase(daemon.info),
      daemon.info.secret,
      'mcp_progress_handshake_timeouts_total',
    );
    expect(timeouts).toBe(1);
    // The authenticated session is past the handshake: the timeout does not touch it.
    expect((await subscriber.request('progress/list')).result).toEqual({ streams: [] });
    await subscriber.close();
    await daemon.stop();
  });
});
