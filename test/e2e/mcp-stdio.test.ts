/**
 * `mcp-progress mcp` as a host runs it: an SDK Client spawns the real binary
 * over stdio; separate worker processes publish to the daemon. The watch scenario, for every
 * client and transport, is in mcp-transports.test.ts.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/wire.js';
import { readDaemonInfo } from '../../src/shared/locate.js';
import {
  cleanupAll,
  eventually,
  publishAccepted,
  runCli,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectStdio, textOf, watchParams } from '../helpers/mcp.js';
import { connectRawStdio } from '../helpers/raw-mcp.js';
import { rawWorker, workerStatus } from '../helpers/worker.js';

afterAll(() => cleanupAll());

describe('mcp-progress mcp over stdio', () => {
  it('prints its help', async () => {
    const help = await runCli(['mcp', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: mcp-progress mcp/);
    expect(help.stdout).toContain('"args": ["-y", "mcp-progress-bridge", "mcp"]');
    for (const tool of ['watch_progress', 'list_progress', 'get_progress'])
      expect(help.stdout).toContain(tool);
    const top = await runCli(['--help']);
    expect(top.stdout).toContain('  mcp ');
  });

  it('returns the state so far at the timeout, as a result and not an error', async () => {
    const daemon = await startDaemon();
    const mcp = await connectStdio(['--runtime-dir', daemon.runtimeDir]);
    const result = await mcp.client.callTool({
      name: 'watch_progress',
      arguments: { progressToken: 'never-starts', timeoutMs: 50 },
    });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      progressToken: 'never-starts',
      state: 'waiting',
      timedOut: true,
      updates: 0,
    });
    expect(textOf(result)).toContain('call watch_progress again');
    await mcp.close();
    await daemon.stop();
  });

  it('starts an embedded daemon when none runs, and stops it when the host goes away', async () => {
    const runtimeDir = tempDir();
    const mcp = await connectStdio(['--runtime-dir', runtimeDir]);
    // Started beside initialize, with no tool call: workers can connect before the first one.
    await embeddedDaemonUp(runtimeDir);
    const info = join(runtimeDir, 'daemon.json');
    const tools = await mcp.client.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual([
      'get_progress',
      'list_progress',
      'watch_progress',
    ]);
    for (const tool of tools.tools) {
      expect(tool.description?.length).toBeGreaterThan(80);
      expect(tool.outputSchema?.type).toBe('object');
    }
    await publishAccepted(
      ['--runtime-dir', runtimeDir],
      ...['--token-json', '7', '--progress', '3', '--total', '10', '--message', 'three'],
    );
    const got = await mcp.client.callTool({
      name: 'get_progress',
      arguments: { progressToken: 7 },
    });
    expect(got.structuredContent).toMatchObject({
      progressToken: 7,
      found: true,
      stream: { progressToken: 7, state: 'active', progress: 3, total: 10, message: 'three' },
    });
    // "7" is another token than 7.
    const other = await mcp.client.callTool({
      name: 'get_progress',
      arguments: { progressToken: '7' },
    });
    expect(other.isError).toBeFalsy();
    expect(other.structuredContent).toEqual({ progressToken: '7', found: false });
    expect(textOf(other)).toContain('No job has token "7"');
    const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
    expect((listed.structuredContent as { streams: unknown[] }).streams).toEqual([
      expect.objectContaining({ progressToken: 7, state: 'active', progress: 3 }),
    ]);
    const child = mcp.transport as unknown as {
      _process?: import('node:child_process').ChildProcess;
    };
    const process = child._process;
    await mcp.close();
    if (process !== undefined) await waitForExit(process);
    await eventually(() => (existsSync(info) ? undefined : true), 10_000, 'daemon.json removed');
    expect(mcp.stderr()).not.toContain('internal error');
  });

  it('answers initialize without connecting to the daemon: it connects at the first tool call', async () => {
    // A "daemon" that accepts connections and never answers: whatever waits on it hangs.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const runtimeDir = tempDir();
    writeFileSync(
      join(runtimeDir, 'daemon.json'),
      JSON.stringify({
        pid: process.pid,
        socket: join(runtimeDir, 'none.sock'),
        url: `ws://127.0.0.1:${port}/ws`,
        secret: 'unused',
        version: '0.0.0',
      }),
      { mode: 0o600 },
    );
    try {
      const mcp = await connectStdio(['--runtime-dir', runtimeDir]);
      expect(sockets).toHaveLength(0);
      expect((await mcp.client.listTools()).tools).toHaveLength(3);
      expect(sockets).toHaveLength(0);
      const call = mcp.client.callTool({ name: 'list_progress', arguments: {} });
      call.catch(() => {});
      await eventually(() => (sockets.length > 0 ? true : undefined), 10_000, 'a connection');
      for (const socket of sockets) socket.destroy();
      await mcp.close();
    } finally {
      silent.close();
    }
  });

  it('with a runtime directory it cannot make, answers initialize, says why on stderr and in each tool call, and embeds once it can', async () => {
    const parent = tempDir();
    // A file where the runtime directory's parent should be: mkdir fails with ENOTDIR.
    const blocker = join(parent, 'not-a-dir');
    writeFileSync(blocker, '');
    const runtimeDir = join(blocker, 'rt');
    const mcp = await connectStdio(['--runtime-dir', runtimeDir]);
    expect((await mcp.client.listTools()).tools).toHaveLength(3);
    await eventually(
      () => (mcp.stderr().includes('could not start a daemon') ? true : undefined),
      10_000,
      'the warning on stderr',
    );
    expect(mcp.stderr()).toContain(`cannot create the runtime directory ${runtimeDir}`);
    for (let call = 0; call < 2; call++) {
      const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
      expect(listed.isError).toBe(true);
      expect(textOf(listed)).toContain(`cannot create the runtime directory ${runtimeDir}`);
    }
    // The obstacle gone, the next call embeds a daemon.
    rmSync(blocker);
    mkdirSync(blocker, { mode: 0o700 });
    const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
    expect(listed.isError, textOf(listed)).toBeFalsy();
    expect((await readDaemonInfo(runtimeDir)).pid).toBe(mcp.transport.pid);
    await mcp.close();
  });

  it('embeds a daemon when daemon.json is corrupt, instead of failing', async () => {
    const runtimeDir = tempDir();
    const info = join(runtimeDir, 'daemon.json');
    writeFileSync(info, '{"pid": 12, "url": "ws://127.0.0.1:1/ws", trunc', { mode: 0o600 });
    await expect(readDaemonInfo(runtimeDir)).rejects.toMatchObject({
      code: 'bad_daemon_info',
      message: expect.stringContaining('is not valid JSON'),
    });
    const mcp = await connectStdio(['--runtime-dir', runtimeDir]);
    const listed = await mcp.client.callTool({ name: 'list_progress', arguments: {} });
    expect(listed.isError).toBeFalsy();
    // The embedded daemon wrote a good daemon.json over the corrupt one.
    expect((await readDaemonInfo(runtimeDir)).pid).toBe(mcp.transport.pid);
    expect(mcp.stderr()).not.toContain('internal error');
    await mcp.close();
  });

  it('a second `mcp` takes over when the `mcp` that embedded the daemon exits', async () => {
    const runtimeDir = tempDir();
    const a = await connectStdio(['--runtime-dir', runtimeDir]);
    const aPid = a.transport.pid;
    await embeddedDaemonUp(runtimeDir);
    expect((await readDaemonInfo(runtimeDir)).pid).toBe(aPid);
    const b = await connectStdio(['--runtime-dir', runtimeDir]);
    // B uses A's embedded daemon.
    expect((await b.client.callTool({ name: 'list_progress', arguments: {} })).isError).toBeFalsy();
    expect((await readDaemonInfo(runtimeDir)).pid).toBe(aPid);
    const aProcess = (
      a.transport as unknown as { _process?: import('node:child_process').ChildProcess }
    )._process;
    await a.close();
    if (aProcess !== undefined) await waitForExit(aProcess);
    // B's next calls work: it connected again, or embedded a daemon itself.
    const listed = await b.client.callTool({ name: 'list_progress', arguments: {} });
    expect(listed.isError, JSON.stringify(listed.content)).toBeFalsy();
    expect(JSON.parse(readFileSync(join(runtimeDir, 'daemon.json'), 'utf8')).pid).toBe(
      b.transport.pid,
    );
    await publishAccepted(
      ['--runtime-dir', runtimeDir],
      '--token',
      'after-takeover',
      '--progress',
      '2',
    );
    const got = await b.client.callTool({
      name: 'get_progress',
      arguments: { progressToken: 'after-takeover' },
    });
    expect(got.structuredContent).toMatchObject({ found: true, stream: { progress: 2 } });
    expect(b.stderr()).not.toContain('internal error');
    await b.close();
  });
});

describe('mcp-progress mcp and a daemon at --max-sessions', () => {
  it('a refused session fails the call at once with the daemon\'s reason: no second connect, no embed, not "went away"', async () => {
    const daemon = await startDaemon(['--max-sessions', '2', '--log-level', 'debug']);
    // The daemon logs each refused upgrade; a wrong secret (401) the test sends marks how far
    // the log has been read: every refusal a call caused before it is in by then.
    const refusedAtCap = () =>
      daemon.stderr().split('refused a WebSocket upgrade (HTTP 503)').length - 1;
    let marks = 0;
    const logReadUpToNow = async () => {
      await expect(connectGateway({ ...daemon.info, secret: 'not-the-secret' })).rejects.toThrow(
        'HTTP 401',
      );
      marks++;
      await eventually(
        () =>
          daemon.stderr().split('refused a WebSocket upgrade (HTTP 401)').length - 1 >= marks
            ? true
            : undefined,
        10_000,
        "the daemon's log of the wrong secret",
      );
    };
    const a = await connectStdio(['--runtime-dir', daemon.runtimeDir, '--log-level', 'debug']);
    // A's first call connects its session for calls: one place. The test takes the other.
    expect((await a.client.callTool({ name: 'list_progress', arguments: {} })).isError).toBeFalsy();
    const holder = await connectGateway(daemon.info);

    // A watch needs a session of its own: refused.
    const watched = await a.client.callTool({
      name: 'watch_progress',
      arguments: { progressToken: 'refused-watch', timeoutMs: 60_000 },
    });
    expect(watched.isError).toBe(true);
    expect(textOf(watched)).toContain('the daemon refused the connection (HTTP 503)');
    expect(textOf(watched)).toContain('restart the daemon with a higher --max-sessions');
    await logReadUpToNow();
    expect(refusedAtCap()).toBe(1);
    expect(a.stderr()).not.toContain('went away');
    expect(a.stderr()).not.toContain('no live daemon');
    expect(a.stderr()).not.toContain('started one in this process');

    // A second mcp whose very first call finds no place: refused once, no daemon embedded.
    const b = await connectStdio(['--runtime-dir', daemon.runtimeDir, '--log-level', 'debug']);
    const listed = await b.client.callTool({ name: 'list_progress', arguments: {} });
    expect(listed.isError).toBe(true);
    expect(textOf(listed)).toContain('the daemon refused the connection (HTTP 503)');
    await logReadUpToNow();
    expect(refusedAtCap()).toBe(2);
    expect(b.stderr()).not.toContain('no live daemon');
    expect(b.stderr()).not.toContain('started one in this process');
    expect((await readDaemonInfo(daemon.runtimeDir)).pid).toBe(daemon.child.pid);

    // The refusal left A's source as it was: once a place frees, A's watch is served.
    await holder.close();
    const served = await eventually(async () => {
      const result = await a.client.callTool({
        name: 'watch_progress',
        arguments: { progressToken: 'refused-watch', timeoutMs: 50 },
      });
      return result.isError === true ? undefined : result;
    });
    expect(served.structuredContent).toMatchObject({ timedOut: true });
    expect(a.stderr()).not.toContain('went away');
    await Promise.all([a.close(), b.close()]);
    await daemon.stop();
  });
});

describe('a host that stops reading stdout for a moment', () => {
  it('still gets every value of a full-delivery watch, in order, and then the result', async () => {
    const daemon = await startDaemon();
    const mcp = await connectRawStdio(daemon, '2025-11-25');
    const token = 'paused-host';
    const call = mcp.send('tools/call', watchParams(token, 600_000));
    const worker = await rawWorker(daemon.info.socket);
    const status = () =>
      workerStatus<{ subscriptions: number; counters: { notificationsSent: number } }>(worker);
    await eventually(async () => ((await status()).subscriptions === 1 ? true : undefined));
    // The host stops reading: the pipe and this side's buffer fill (a few hundred of these
    // values), and the rest wait in `mcp`, each one, up to MAX_WAITING_PROGRESS_SENDS.
    mcp.stdout.pause();
    const values = 4000;
    const message = `rendering frame ${'#'.repeat(200)}`;
    for (let from = 0; from < values; from += 500) {
      let batch = '';
      for (let progress = from + 1; progress <= from + 500; progress++)
        batch += encodeFrame('progress', { v: 1, progressToken: token, progress, message });
      worker.write(batch);
    }
    // Every value has left the daemon for `mcp`, which takes them while its stdout is stuck.
    await eventually(async () =>
      (await status()).counters.notificationsSent >= values ? true : undefined,
    );
    mcp.stdout.resume();
    worker.send('done', { v: 1, progressToken: token, seq: 1 });
    await mcp.ended(call);
    const received = mcp.received;
    const progress = received
      .filter((m) => m.method === 'notifications/progress')
      .map((m) => m.params?.progress);
    expect(progress.length).toBe(values);
    expect(progress).toEqual(Array.from({ length: values }, (_, i) => i + 1));
    const result = received.findIndex((m) => m.id === call);
    expect(received.slice(result + 1).filter((m) => m.method === 'notifications/progress')).toEqual(
      [],
    );
    worker.destroy();
    await mcp.close();
    await daemon.stop();
  }, 60_000);
});

/** Settles once the daemon an `mcp` embeds (beside initialize) has written daemon.json. */
function embeddedDaemonUp(runtimeDir: string): Promise<true> {
  const info = join(runtimeDir, 'daemon.json');
  return eventually(() => (existsSync(info) ? true : undefined), 10_000, 'the embedded daemon');
}
