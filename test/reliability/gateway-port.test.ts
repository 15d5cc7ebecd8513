/**
 * The gateway port before authentication: connections that have not shown
 * the secret are capped and timed out, so that another local user holding
 * thousands of half-open connections hurts neither sessions nor workers.
 * Where the test runs as root the holder really is another user (nobody).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupAll, eventually, startDaemon } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { httpBase } from '../helpers/mcp.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

const isRoot = process.getuid?.() === 0;

function idOf(flag: '-u' | '-g', name: string): number {
  return Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
}

/** Opens `count` connections, each with half an upgrade request, and holds them until stdin ends. */
const HOLDER = `
import resource, socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
held = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(b"GET /ws HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nUpgrade: websocket\\r\\n")
    except OSError:
        pass
    held.append(s)
print("holding", len(held), flush=True)
sys.stdin.read()
`;

function holdConnections(
  port: number,
  count: number,
): { child: ChildProcess; ready: Promise<void> } {
  const child = spawn(PYTHON, [...PYTHON_ARGS, '-c', HOLDER, String(port), String(count)], {
    stdio: ['pipe', 'pipe', 'pipe'],
    cwd: '/',
    ...(isRoot ? { uid: idOf('-u', 'nobody'), gid: idOf('-g', 'nobody') } : {}),
  });
  let out = '';
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    err += text;
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
      if (out.includes('holding')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`holder exited with ${code}: ${err}`)));
  });
  return { child, ready };
}

async function metric(base: string, secret: string, name: string): Promise<number> {
  const text = await (
    await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${secret}` } })
  ).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.split(' ')[1]);
}

describe('the gateway port before authentication', () => {
  it('refuses connections past --max-pending-connections at once; sessions and workers go on', async () => {
    const cap = 32;
    const held = 3000;
    const daemon = await startDaemon([
      '--max-pending-connections',
      String(cap),
      '--handshake-timeout-ms',
      '600000',
    ]);
    const base = httpBase(daemon.info);
    const port = Number(new URL(base).port);
    // A session authenticated before the holder arrives.
    const subscriber = await connectGateway(daemon.info);
    await subscriber.request('progress/subscribe', { progressToken: 'busy', minIntervalMs: 0 });
    const holder = holdConnections(port, held);
    await holder.ready;
    // Every connection past the cap was refused when it arrived (some may have been refused
    // before their half request, some after; all are counted).
    const worker = await rawWorker(daemon.info.socket);
    const status = async () => {
      const before = worker.replies.length;
      worker.send('status', {});
      const reply = await eventually(() =>
        worker.replies.slice(before).find((r) => r.type === 'status'),
      );
      return reply.data as { counters: { pendingConnectionsRefused: number } };
    };
    const refused = await eventually(async () => {
      const n = (await status()).counters.pendingConnectionsRefused;
      return n >= held - cap ? n : undefined;
    });
    expect(refused).toBe(held - cap);
    // The authenticated session and the worker are served as before.
    for (let i = 1; i <= 20; i++)
      worker.send('progress', { v: 1, progressToken: 'busy', progress: i, seq: i });
    await worker.reply((r) => r.type === 'ack' && (r.data as { seq: number }).seq === 20);
    const got = await subscriber.waitFor(20);
    expect(got.map((n) => n.params.progress)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect((await subscriber.request('progress/list')).result).toMatchObject({
      streams: [{ progressToken: 'busy' }],
    });
    // A new connection is refused at once with a message naming the flag, not left hanging.
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
      });
      socket.once('close', () => resolve(text));
      socket.once('error', () => {});
    });
    expect(answer).toContain('503');
    expect(answer).toContain('--max-pending-connections');
    // When the holder lets go, places are free again.
    holder.child.stdin?.end();
    await eventually(async () => {
      try {
        const again = await connectGateway(daemon.info);
        await again.close();
        return true;
      } catch {
        return undefined;
      }
    });
    await subscriber.close();
    worker.destroy();
    await daemon.stop();
  }, 120_000);

  it('closes a connection that does not complete its request within --handshake-timeout-ms', async () => {
    const daemon = await startDaemon(['--handshake-timeout-ms', '200']);
    const port = Number(new URL(httpBase(daemon.info)).port);
    const subscriber = await connectGateway(daemon.info);
    const closed = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write('GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
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
