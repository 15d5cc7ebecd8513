/**
 * Bursts of worker connections (issue 15): thousands of connects at once are
 * all accepted, and when the daemon's queue of connects is full (EAGAIN) the
 * CLI, the Node client and the Python client retry with a bounded backoff
 * instead of giving up.
 */
import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectPublisher } from '../../src/client/index.js';
import { encodeFrame, FrameDecoder } from '../../src/protocol/wire.js';
import type { BridgeError } from '../../src/shared/errors.js';
import {
  BIN,
  cleanupAll,
  collectOutput,
  eventually,
  ROOT,
  startDaemon,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

afterEach(cleanupAll);

type Attempt = { socket: Socket } | { error: NodeJS.ErrnoException };

function attemptConnect(path: string): Promise<Attempt> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    socket.once('connect', () => resolve({ socket }));
    socket.once('error', (error: NodeJS.ErrnoException) => resolve({ error }));
  });
}

/** Pings on an open connection and resolves with the pong's data. */
function ping(socket: Socket): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const decoder = new FrameDecoder(1 << 16);
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      for (const frame of decoder.push(text))
        if (!(frame instanceof Error) && frame.type === 'pong') resolve(frame.data);
    });
    socket.once('close', () => reject(new Error('closed before pong')));
    socket.write(encodeFrame('ping', {}));
  });
}

describe.skipIf(process.platform === 'win32')('connection bursts', () => {
  it('2,000 connects at once are all accepted and each is served', async () => {
    const daemon = await startDaemon(['--max-connections', '5000']);
    const attempts = await Promise.all(
      Array.from({ length: 2000 }, () => attemptConnect(daemon.info.socket)),
    );
    const failed = attempts.filter((a): a is { error: NodeJS.ErrnoException } => 'error' in a);
    expect(failed.map((a) => a.error.code)).toEqual([]);
    const sockets = attempts.map((a) => (a as { socket: Socket }).socket);
    const pongs = await Promise.all(sockets.map(ping));
    expect(pongs).toHaveLength(2000);
    for (const socket of sockets) socket.destroy();
    await daemon.stop();
  });

  it('with its queue of connects full (EAGAIN), publish, the Node client and the Python client retry until it takes them', async () => {
    const daemon = await startDaemon(['--max-connections', '10000']);
    const socketPath = daemon.info.socket;
    const watcher = await connectGateway(daemon.info);
    for (const token of ['cli-burst', 'node-burst', 'py-burst'])
      await watcher.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    // A stopped daemon accepts nothing: fill its queue until a connect is refused with EAGAIN.
    daemon.child.kill('SIGSTOP');
    const fillers: Socket[] = [];
    try {
      for (let full = false; !full; ) {
        const batch = await Promise.all(
          Array.from({ length: 256 }, () => attemptConnect(socketPath)),
        );
        for (const attempt of batch) {
          if ('socket' in attempt) fillers.push(attempt.socket);
          else if (attempt.error.code === 'EAGAIN') full = true;
          else throw attempt.error;
        }
      }

      const cli = spawn(
        process.execPath,
        [
          BIN,
          'publish',
          '--socket',
          socketPath,
          '--token',
          'cli-burst',
          '--done',
          '--timeout-ms',
          '20000',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
      );
      const cliOutput = collectOutput(cli);
      const python = spawn(
        PYTHON,
        [
          ...PYTHON_ARGS,
          '-c',
          [
            'import logging, sys',
            `sys.path.insert(0, ${JSON.stringify(join(ROOT, 'clients/python'))})`,
            'logging.basicConfig(stream=sys.stderr)',
            'import mcp_progress',
            `p = mcp_progress.Progress("py-burst", ${JSON.stringify(socketPath)}, done_timeout=20)`,
            'p.update(1, 2)',
            'print("delivered" if p.done() else "not delivered", flush=True)',
          ].join('\n'),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const pythonOutput = collectOutput(python);
      const errors: BridgeError[] = [];
      const publisher = await connectPublisher({
        token: 'node-burst',
        socket: socketPath,
        doneTimeoutMs: 20_000,
        onError: (error) => errors.push(error),
      });
      publisher.update({ progress: 1, total: 2 });
      const nodeDone = publisher.done();
      // Each client has met the full queue (they say so) and is still trying.
      await eventually(
        () => (errors.some((e) => e.message.includes('busy')) ? true : undefined),
        15_000,
        'the Node client meeting a busy daemon',
      );
      await eventually(
        () => (pythonOutput.stderr().includes('busy') ? true : undefined),
        15_000,
        'the Python client meeting a busy daemon',
      );
      expect(cli.exitCode).toBeNull();
      daemon.child.kill('SIGCONT');

      expect((await nodeDone).delivered).toBe(true);
      expect(await waitForExit(python)).toBe(0);
      expect(pythonOutput.stdout().trim()).toBe('delivered');
      expect(await waitForExit(cli)).toBe(0);
      expect(cliOutput.stderr()).toBe('');
      // And every done reached its watcher.
      await eventually(() => {
        const done = watcher.notifications
          .filter((n) => n.method === 'notifications/progress/done')
          .map((n) => n.params.progressToken);
        return ['cli-burst', 'node-burst', 'py-burst'].every((t) => done.includes(t))
          ? true
          : undefined;
      }, 15_000);
    } finally {
      daemon.child.kill('SIGCONT');
      for (const socket of fillers) socket.destroy();
      await watcher.close();
    }
    await daemon.stop();
  });
});
