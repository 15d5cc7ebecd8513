/**
 * A worker on host A seen through every surface of other hosts: `mcp-progress mcp` on
 * host B with a real SDK client, relayProgress in a real MCP server using daemon B,
 * `tail` and `status` on host C (docs/BACKPLANE.md, the quick start).
 */
import { execFileSync, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayProgress } from '../../src/mcp/index.js';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  type RunningDaemon,
  runCli,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio, connectUrl, progressParams } from '../helpers/mcp.js';
import { hostV1 } from '../helpers/relay-servers.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import { fresh, startHost } from './hosts.js';
import { natsServer, type RunningNats, startNats } from './nats-server.js';

describe.skipIf(natsServer.skip)('every surface of another host', () => {
  beforeAll(() => natsServer.require());
  let nats: RunningNats;
  let a: RunningDaemon;
  let b: RunningDaemon;
  let c: RunningDaemon;
  let worker: RawWorker;

  beforeAll(async () => {
    nats = await startNats();
    [a, b, c] = await Promise.all([
      startHost(nats.url, 'gpu-a'),
      startHost(nats.url, 'laptop-b'),
      startHost(nats.url, 'desk-c'),
    ]);
    worker = await rawWorker(a.info.socket);
  });

  afterAll(async () => {
    worker?.destroy();
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
    await nats?.stop();
    cleanupAll();
  });

  /** Waits until daemon `on` has a subscriber for the token. */
  async function subscribed(on: RunningDaemon, token: string): Promise<void> {
    const gateway = await connectGateway(on.info);
    try {
      await eventually(async () => {
        const reply = await gateway.request('progress/get', { progressToken: token });
        const stream = (reply.result as { stream?: { subscribers: number } }).stream;
        return (stream?.subscribers ?? 0) > 0 ? true : undefined;
      });
    } finally {
      await gateway.close();
    }
  }

  it('mcp-progress mcp on host B: watch_progress follows a worker on host A; list_progress names the host', async () => {
    const mcp = await connectStdio(['--runtime-dir', b.runtimeDir]);
    try {
      const token = fresh('mcp');
      const seen: number[] = [];
      const call = mcp.client.callTool(
        { name: 'watch_progress', arguments: { progressToken: token, minIntervalMs: 0 } },
        undefined,
        { onprogress: (p) => seen.push(p.progress) },
      );
      await subscribed(b, token);
      for (const progress of [1, 2, 3]) {
        worker.send('progress', { v: 1, progressToken: token, progress, total: 3 });
      }
      const list = await eventually(async () => {
        const result = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
        const streams = (result.structuredContent as { streams: Array<Record<string, unknown>> })
          .streams;
        return streams.some((s) => s.progressToken === token) ? result : undefined;
      });
      expect(
        (list.structuredContent as { streams: Array<Record<string, unknown>> }).streams.find(
          (s) => s.progressToken === token,
        ),
      ).toMatchObject({ host: 'gpu-a' });
      expect((list.content as Array<{ text: string }>)[0]?.text).toContain(
        `"${token}" on host gpu-a`,
      );
      worker.send('done', { v: 1, progressToken: token });
      const result = await call;
      expect(result.structuredContent).toMatchObject({
        progressToken: token,
        state: 'done',
        status: 'ok',
        progress: 3,
        total: 3,
      });
      expect(seen).toEqual([1, 2, 3]);
      const got = await mcp.client.callTool({
        name: 'get_progress',
        arguments: { progressToken: token },
      });
      expect(got.structuredContent).toMatchObject({ found: true, stream: { host: 'gpu-a' } });
    } finally {
      await mcp.close();
    }
  });

  it('relayProgress with daemon B: a worker on host A publishing under the route key reaches the MCP client', async () => {
    const keys: string[] = [];
    const server = await hostV1(async (args, extra) => {
      await using relay = await relayProgress(extra, {
        runtimeDir: b.runtimeDir,
        minIntervalMs: 0,
      });
      keys.push(relay.routeKey);
      // The job runs on host A (as over ssh): it gets only the route key, and speaks A's daemon.
      for (let progress = 1; progress <= args.steps; progress++) {
        worker.send('progress', {
          v: 1,
          progressToken: relay.routeKey,
          progress,
          total: args.steps,
        });
      }
      worker.send('done', { v: 1, progressToken: relay.routeKey });
      await relay.done;
      return `rendered ${args.steps} frames on host A`;
    });
    const client = await connectUrl(server.url);
    try {
      const seen: number[] = [];
      const result = await client.client.callTool(
        { name: 'render', arguments: { steps: 4 } },
        undefined,
        { onprogress: (p) => seen.push(p.progress) },
      );
      expect(result.content).toEqual([{ type: 'text', text: 'rendered 4 frames on host A' }]);
      expect(keys).toHaveLength(1);
      // The last value is never dropped; coalescing may merge earlier ones, each increasing.
      expect(seen.at(-1)).toBe(4);
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1] ?? 0);
      for (const params of progressParams(client.received)) {
        expect(params).toMatchObject({ total: 4 });
      }
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('tail on host C shows the stream of host A with its host; status names the hosts', async () => {
    const token = fresh('tail');
    const child = spawn(
      process.execPath,
      [BIN, 'tail', token, '--runtime-dir', c.runtimeDir, '--min-interval-ms', '0'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, MCP_PROGRESS_SOCKET: '' },
      },
    );
    const output = collectOutput(child);
    try {
      await subscribed(c, token);
      worker.send('progress', { v: 1, progressToken: token, progress: 1, total: 2 });
      await eventually(() => (output.stdout().includes('1/2') ? true : undefined));
      // tail names its token: the host comes from the list, once it polled it.
      // desk-c knows gpu-a from its stream at once, its instance from its first heartbeat.
      const gpuA = /host gpu-a +up {4}[1-9]\d* active streams {2}\(instance [0-9a-f]{8}\)/;
      const status = await eventually(
        async () => {
          const read = await runCli(['status', '--runtime-dir', c.runtimeDir]);
          return gpuA.test(read.stdout) ? read : undefined;
        },
        20_000,
        "desk-c's status to show gpu-a with its instance",
      );
      expect(status.stdout).toMatch(
        /backplane {6}desk-c \(instance [0-9a-f]{8}\), connected to NATS/,
      );
      // desk-c learns of laptop-b from its heartbeat (once a second), which may not have come yet.
      const readStatus = async () =>
        JSON.parse((await runCli(['status', '--json', '--runtime-dir', c.runtimeDir])).stdout) as {
          backplane: { name: string; hosts: Array<{ name: string }> };
        };
      const json = await eventually(
        async () => {
          const read = await readStatus();
          return read.backplane.hosts.length >= 2 ? read : undefined;
        },
        20_000,
        'desk-c to know both other hosts',
      );
      expect(json.backplane.name).toBe('desk-c');
      expect(json.backplane.hosts.map((h) => h.name).sort()).toEqual(['gpu-a', 'laptop-b']);
      worker.send('progress', { v: 1, progressToken: token, progress: 2, total: 2 });
      worker.send('done', { v: 1, progressToken: token });
      expect(await waitForExit(child)).toBe(0);
      expect(output.stdout()).toMatch(/done|✓ ok/);
    } finally {
      if (child.exitCode === null) child.kill();
    }
  });

  it('tail without tokens lists every stream with the host it is on', async () => {
    const token = fresh('all');
    worker.send('progress', { v: 1, progressToken: token, progress: 7, message: 'seven' });
    await eventually(async () => {
      const gateway = await connectGateway(c.info);
      try {
        const reply = await gateway.request('progress/get', { progressToken: token });
        return (reply.result as { stream?: unknown }).stream ? true : undefined;
      } finally {
        await gateway.close();
      }
    });
    const child = spawn(process.execPath, [BIN, 'tail', '--runtime-dir', c.runtimeDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: '' },
    });
    const output = collectOutput(child);
    try {
      await eventually(() =>
        output.stdout().includes(`${token} @gpu-a  7  seven`) ? true : undefined,
      );
    } finally {
      child.kill();
      await waitForExit(child);
    }
  });
});

/** Bytes waiting unread in the sockets of process `pid` (ss's Recv-Q), for this user's processes. */
function unreadBytesOf(pid: number): number {
  const listed = execFileSync('ss', ['-xtnpH'], { encoding: 'utf8' });
  let unread = 0;
  for (const line of listed.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    unread += Number(line.trim().split(/\s+/)[2] ?? 0);
  }
  return unread;
}

describe.skipIf(natsServer.skip)('tail and a host look-up that fails', () => {
  beforeAll(() => natsServer.require());

  it('a look-up that timed out (its daemon stopped, the connection kept) is tried again at the next update: the host shows', async () => {
    const nats = await startNats();
    const [a, b] = await Promise.all([startHost(nats.url, 'src-a'), startHost(nats.url, 'tail-b')]);
    const worker = await rawWorker(a.info.socket);
    const child = spawn(
      process.execPath,
      [BIN, 'tail', '--runtime-dir', b.runtimeDir, '--min-interval-ms', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
    );
    const output = collectOutput(child);
    const pid = child.pid as number;
    try {
      // tail follows every stream of B, with its host.
      const first = fresh('first');
      worker.send('progress', { v: 1, progressToken: first, progress: 1, message: 'warm' });
      await eventually(
        () => (output.stdout().includes(`${first} @src-a  1  warm`) ? true : undefined),
        15_000,
        'tail to show the first stream with its host',
      );
      // A new stream's first value reaches tail while it is stopped, so that B can be stopped
      // before tail asks it for the stream's host: the question then waits on an open connection
      // until tail's request timeout, and fails (request_timeout), not by a disconnect.
      const token = fresh('late');
      child.kill('SIGSTOP');
      worker.send('progress', { v: 1, progressToken: token, progress: 1, message: 'one' });
      await eventually(
        () => (unreadBytesOf(pid) > 0 ? true : undefined),
        15_000,
        'the first value to wait in the socket of the stopped tail',
      );
      b.child.kill('SIGSTOP');
      child.kill('SIGCONT');
      await eventually(
        () => (output.stdout().includes(`${token}  1  one`) ? true : undefined),
        30_000,
        'tail to show the stream without its host once the look-up timed out',
      );
      b.child.kill('SIGCONT');
      // Each later value is shown; one of them looks again, and the host shows from then on.
      let shown = '';
      for (let progress = 2; progress <= 10 && !shown.includes(' @src-a '); progress++) {
        worker.send('progress', { v: 1, progressToken: token, progress, message: 'more' });
        shown = await eventually(
          () =>
            output
              .stdout()
              .split('\n')
              .find(
                (line) =>
                  line.startsWith(`${token} `) &&
                  line.includes(`  ${progress}  `) &&
                  line.endsWith('more'),
              ),
          15_000,
          `tail to show value ${progress}`,
        );
      }
      expect(shown).toContain(`${token} @src-a `);
    } finally {
      child.kill('SIGCONT');
      b.child.kill('SIGCONT');
      child.kill();
      await waitForExit(child);
      worker.destroy();
      await Promise.all([a.stop(), b.stop()]);
      await nats.stop();
    }
  }, 90_000);
});
