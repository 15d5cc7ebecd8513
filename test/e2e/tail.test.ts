/** `mcp-progress tail`: NDJSON and plain lines through pipes, and the live view in a real pseudo-terminal (tmux). */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TAIL_POLL_MS } from '../../src/shared/defaults.js';
import {
  BIN,
  collectOutput,
  eventually,
  PATIENT_DAEMON_ARGS,
  type RunningDaemon,
  slowProcessTests,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient, useWatchedBridge } from '../helpers/gateway.js';
import { startLinkRelay } from '../helpers/link-relay.js';
import { tool } from '../helpers/tools.js';
import { rawWorker } from '../helpers/worker.js';

const runCli = slowProcessTests();

const bridge = useWatchedBridge(PATIENT_DAEMON_ARGS);

const tails: ChildProcess[] = [];
afterEach(() => {
  for (const child of tails.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

let counter = 0;
const uniqueToken = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

const publish = async (token: string, ...fields: string[]) =>
  publishTo(bridge.daemon, token, ...fields);
const publishTo = async (to: RunningDaemon, token: string, ...fields: string[]) => {
  const result = await runCli(['publish', '--socket', to.info.socket, '--token', token, ...fields]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
};

function startTail(args: string[], runtimeDir = bridge.daemon.runtimeDir) {
  const child = spawn(process.execPath, [BIN, 'tail', '--runtime-dir', runtimeDir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  tails.push(child);
  const output = collectOutput(child);
  return {
    child,
    lines: () =>
      output
        .stdout()
        .split('\n')
        .filter((line) => line !== ''),
    stderr: output.stderr,
    exit: waitForExit(child),
  };
}

/** Waits until a tail without tokens follows every stream of the daemon (progress/subscribeAll). */
async function followsAll(gateway: GatewayClient): Promise<void> {
  await eventually(
    async () => {
      const status = (await gateway.request('progress/status')).result as {
        subscribedToAll: number;
      };
      return status.subscribedToAll >= 1 ? true : undefined;
    },
    60_000,
    'tail to follow every stream',
  );
}

/** Waits until the daemon counts `count` subscribers on the token, so that nothing published after is missed. */
async function subscribed(
  token: string | number,
  count = 1,
  gateway: GatewayClient = bridge.gateway,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const list = (await gateway.request('progress/list')).result as {
      streams: Array<{ progressToken: unknown; subscribers: number }>;
    };
    if ((list.streams.find((s) => s.progressToken === token)?.subscribers ?? 0) >= count) return;
    if (Date.now() > deadline) throw new Error(`no subscriber on ${token}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('mcp-progress tail --json', () => {
  it('has help', async () => {
    const help = await runCli(['tail', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: mcp-progress tail \[TOKEN\.\.\.\] \[--json\]/);
  });

  it('when no daemon is up yet, says so once, waits, and follows the stream once one starts', async () => {
    const dir = tempDir();
    const token = uniqueToken('before-daemon');
    const tail = startTail([token, '--json'], dir);
    await eventually(
      () => (tail.stderr().includes('waiting for a daemon') ? true : undefined),
      60_000,
      'tail to say it waits',
    );
    expect(tail.stderr()).toContain('start the daemon with "mcp-progress daemon"');
    expect(tail.child.exitCode).toBeNull();
    const daemon = await startDaemon(PATIENT_DAEMON_ARGS, dir);
    try {
      const gateway = await connectGateway(daemon.info);
      await subscribed(token, 1, gateway);
      await gateway.close();
      await publishTo(daemon, token, '--done', '--status', 'ok');
      expect(await tail.exit).toBe(0);
      expect(tail.lines().map((line) => JSON.parse(line).method)).toEqual([
        'notifications/progress/done',
      ]);
      expect(tail.stderr().split('waiting for a daemon').length - 1).toBe(1);
    } finally {
      await daemon.stop();
    }
  });

  it('while it waits for a daemon, Ctrl-C ends it with 0', async () => {
    const tail = startTail(['--json'], tempDir());
    await eventually(
      () => (tail.stderr().includes('waiting for a daemon') ? true : undefined),
      60_000,
      'tail to say it waits',
    );
    tail.child.kill('SIGINT');
    expect(await tail.exit).toBe(0);
  });

  it('prints each notification of the named streams as one JSON line, and exits 0 when all are done', async () => {
    const [a, b] = [uniqueToken('json-a'), uniqueToken('json-b')];
    const tail = startTail([a, b, '--json']);
    await subscribed(a);
    await subscribed(b);
    await publish(a, '--progress', '1', '--total', '2', '--message', 'half');
    await eventually(() => (tail.lines().length === 1 ? true : undefined), 60_000, 'first line');
    await publish(a, '--progress', '2', '--total', '2');
    await eventually(() => (tail.lines().length === 2 ? true : undefined), 60_000, 'second line');
    await publish(a, '--done');
    await publish(b, '--done', '--status', 'error', '--message', 'boom');
    expect(await tail.exit).toBe(0);
    expect(tail.lines().map((line) => JSON.parse(line))).toEqual([
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: a, progress: 1, total: 2, message: 'half' },
      },
      {
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: a, progress: 2, total: 2 },
      },
      {
        jsonrpc: '2.0',
        method: 'notifications/progress/done',
        params: { progressToken: a, status: 'ok' },
      },
      {
        jsonrpc: '2.0',
        method: 'notifications/progress/done',
        params: { progressToken: b, status: 'error', message: 'boom' },
      },
    ]);
  });

  it('follows integer tokens given with --token-json', async () => {
    const token = 900_000 + (process.pid % 1000) * 10 + ++counter;
    const tail = startTail(['--token-json', String(token), '--json']);
    await subscribed(token);
    const result = await runCli([
      'publish',
      '--socket',
      bridge.daemon.info.socket,
      '--token-json',
      String(token),
      '--done',
    ]);
    expect(result.code).toBe(0);
    expect(await tail.exit).toBe(0);
    expect(JSON.parse(tail.lines()[0] ?? '{}').params).toEqual({
      progressToken: token,
      status: 'ok',
    });
  });

  it('without tokens, finds streams that start after it, and stops on SIGTERM', async () => {
    const tail = startTail(['--json']);
    const [first, second] = [uniqueToken('new-1'), uniqueToken('new-2')];
    await publish(first, '--progress', '3');
    await eventually(
      () => (tail.lines().some((line) => line.includes(first)) ? true : undefined),
      60_000,
      'first new stream',
    );
    await publish(second, '--progress', '4', '--total', '8');
    await eventually(
      () => (tail.lines().some((line) => line.includes(second)) ? true : undefined),
      60_000,
      'second new stream',
    );
    const byToken = tail.lines().map((line) => JSON.parse(line).params);
    expect(byToken).toContainEqual({ progressToken: first, progress: 3 });
    expect(byToken).toContainEqual({ progressToken: second, progress: 4, total: 8 });
    tail.child.kill('SIGTERM');
    expect(await tail.exit).toBe(0);
  });

  it('without tokens, prints every value of a new stream from its first, even one that ends at once', async () => {
    const runtimeDir = tempDir();
    const daemon = await startDaemon(PATIENT_DAEMON_ARGS, runtimeDir);
    const gateway = await connectGateway(daemon.info);
    try {
      const tail = startTail(['--json', '--min-interval-ms', '0'], runtimeDir);
      await followsAll(gateway);
      const token = uniqueToken('burst');
      // One write: the stream starts and ends before any list could show it under way.
      const worker = connect({ path: daemon.info.socket });
      const frame = (type: string, data: object) =>
        `${JSON.stringify({ type, data: { v: 1, progressToken: token, ...data } })}\f`;
      worker.end(
        frame('progress', { progress: 1, total: 3 }) +
          frame('progress', { progress: 2, total: 3 }) +
          frame('progress', { progress: 3, total: 3 }) +
          frame('done', { status: 'ok' }),
      );
      const ofToken = () =>
        tail
          .lines()
          .map((line) => JSON.parse(line).params)
          .filter((params) => params.progressToken === token);
      await eventually(
        () => (ofToken().some((params) => 'status' in params) ? true : undefined),
        60_000,
        'the done',
      );
      expect(ofToken()).toEqual([
        { progressToken: token, progress: 1, total: 3 },
        { progressToken: token, progress: 2, total: 3 },
        { progressToken: token, progress: 3, total: 3 },
        { progressToken: token, status: 'ok' },
      ]);
      tail.child.kill('SIGTERM');
      expect(await tail.exit).toBe(0);
    } finally {
      await gateway.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail refused by a running daemon (--max-sessions)', () => {
  it('says the daemon refused it and why, once, not that it waits for a daemon; follows once a place frees', async () => {
    const dir = tempDir();
    const daemon = await startDaemon([...PATIENT_DAEMON_ARGS, '--max-sessions', '1'], dir);
    const holder = await connectGateway(daemon.info);
    try {
      const token = uniqueToken('refused');
      const tail = startTail([token, '--json'], dir);
      const said = await eventually(
        () => (tail.stderr().includes('\n') ? tail.stderr() : undefined),
        60_000,
        'tail to say why it waits',
      );
      expect(said).toMatch(
        /^mcp-progress tail: the daemon refused the connection \(HTTP 503\): the daemon serves at most 1 sessions of all kinds together \(--max-sessions\): .* \(too_many_sessions\); the daemon is running and said no: tail asks again every 500 ms and follows once it is let in \(at --max-sessions: once a session ends\) \(Ctrl-C to stop\)\n$/,
      );
      expect(tail.child.exitCode).toBeNull();
      await holder.close();
      // Its place taken, tail gets the stream's newest value as it subscribes, then its done.
      await publishTo(daemon, token, '--progress', '1');
      await eventually(
        () => (tail.lines().length > 0 ? true : undefined),
        60_000,
        'tail to follow',
      );
      await publishTo(daemon, token, '--done', '--status', 'ok');
      expect(await tail.exit).toBe(0);
      expect(tail.lines().map((line) => JSON.parse(line).method)).toEqual([
        'notifications/progress',
        'notifications/progress/done',
      ]);
      // Said once, though refused at every try until the place freed.
      expect(tail.stderr()).toBe(said);
    } finally {
      await holder.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail without tokens, following every stream', () => {
  it('lists the stream table at start and after a reconnect, not on a timer while the subscription reports every stream', async () => {
    const daemon = await startDaemon(PATIENT_DAEMON_ARGS);
    // tail reaches the daemon through a relay that records what it asks.
    const relay = await startLinkRelay(daemon.info);
    const worker = await rawWorker(daemon.info.socket);
    const methodsOf = (sent: readonly string[]) =>
      sent.map((text) => (JSON.parse(text) as { method?: string }).method);
    const count = (method: string) =>
      relay.requests().filter((request) => request.method === method).length;
    try {
      const tail = startTail(['--json', '--min-interval-ms', '0'], relay.runtimeDir);
      await eventually(
        () => (count('progress/list') === 1 ? true : undefined),
        60_000,
        "tail's listing at start",
      );
      const shown = (token: string) =>
        tail
          .lines()
          .map((line) => JSON.parse(line).params)
          .filter((params) => params.progressToken === token);
      // Streams start, move and end over several poll periods; each is shown whole, from the
      // subscription and one progress/get (its host), with no listing of the whole table.
      const since = Date.now();
      let streams = 0;
      while (streams < 3 || Date.now() - since < 4 * TAIL_POLL_MS) {
        const token = uniqueToken('unpolled');
        streams++;
        worker.send('progress', { v: 1, progressToken: token, progress: 1 });
        await eventually(() => (shown(token).length === 1 ? true : undefined), 60_000, 'a value');
        worker.send('done', { v: 1, progressToken: token });
        await eventually(() => (shown(token).length === 2 ? true : undefined), 60_000, 'a done');
        expect(shown(token)).toEqual([
          { progressToken: token, progress: 1 },
          { progressToken: token, status: 'ok' },
        ]);
      }
      expect(count('progress/list')).toBe(1);
      expect(count('progress/get')).toBe(streams);
      // A connection that dropped may have missed a done or a host: one listing after the resubscribe.
      relay.connections[0]?.cut();
      await eventually(
        () => ((relay.connections[1]?.sent.length ?? 0) >= 2 ? true : undefined),
        60_000,
        "tail's requests after it reconnected",
      );
      expect(methodsOf(relay.connections[1]?.sent ?? [])).toEqual([
        'progress/subscribeAll',
        'progress/list',
      ]);
      tail.child.kill('SIGTERM');
      expect(await tail.exit).toBe(0);
      expect(count('progress/list')).toBe(2);
    } finally {
      worker.destroy();
      await relay.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail without tokens, its subscribeAll cut off', () => {
  it('asks progress/subscribeAll again on the reconnect, and then follows a new stream from its first value without polling', async () => {
    const daemon = await startDaemon(PATIENT_DAEMON_ARGS);
    const relay = await startLinkRelay(daemon.info);
    const worker = await rawWorker(daemon.info.socket);
    const token = uniqueToken('resubscribed');
    // The first connection dies at tail's subscribeAll: it fails as disconnected, not refused.
    relay.verdict = (connection, text) =>
      connection.index === 1 &&
      (JSON.parse(text) as { method?: string }).method === 'progress/subscribeAll'
        ? 'cut'
        : 'pass';
    try {
      const tail = startTail(['--json', '--min-interval-ms', '0'], relay.runtimeDir);
      await eventually(
        () =>
          relay.connections[1]?.sent.some((text) => text.includes('"progress/subscribeAll"'))
            ? true
            : undefined,
        60_000,
        'subscribeAll on the reconnect',
      );
      await eventually(
        () =>
          relay.connections[1]?.sent.some((text) => text.includes('"progress/list"'))
            ? true
            : undefined,
        60_000,
        'the listing after it',
      );
      worker.send('progress', { v: 1, progressToken: token, progress: 1 });
      worker.send('progress', { v: 1, progressToken: token, progress: 2 });
      worker.send('done', { v: 1, progressToken: token });
      const shown = () =>
        tail
          .lines()
          .map((line) => JSON.parse(line).params)
          .filter((params) => params.progressToken === token);
      await eventually(() => (shown().length >= 3 ? true : undefined), 60_000, 'the stream');
      expect(shown()).toEqual([
        { progressToken: token, progress: 1 },
        { progressToken: token, progress: 2 },
        { progressToken: token, status: 'ok' },
      ]);
      expect(tail.stderr()).not.toContain('listing the streams every');
      tail.child.kill('SIGTERM');
      expect(await tail.exit).toBe(0);
    } finally {
      worker.destroy();
      await relay.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail without tokens, a done its connection missed', () => {
  it('shows the done of a stream that ended while its connection was down, once, after the reconnect', async () => {
    const daemon = await startDaemon(PATIENT_DAEMON_ARGS);
    const relay = await startLinkRelay(daemon.info);
    const gateway = await connectGateway(daemon.info);
    const worker = await rawWorker(daemon.info.socket);
    const token = uniqueToken('missed');
    try {
      const tail = startTail(['--json', '--min-interval-ms', '0'], relay.runtimeDir);
      const shown = () =>
        tail
          .lines()
          .map((line) => JSON.parse(line).params)
          .filter((params) => params.progressToken === token);
      await eventually(
        () => (relay.requests().some((r) => r.method === 'progress/list') ? true : undefined),
        60_000,
        "tail's listing at start",
      );
      worker.send('progress', { v: 1, progressToken: token, progress: 1 });
      await eventually(() => (shown().length === 1 ? true : undefined), 60_000, 'the value');
      // The reconnect's messages are held: until it is cut too, tail hears nothing of the done.
      relay.verdict = (connection) => (connection.index === 2 ? 'hold' : 'pass');
      relay.connections[0]?.cut();
      await eventually(
        () => ((relay.connections[1]?.sent.length ?? 0) >= 1 ? true : undefined),
        60_000,
        "the reconnect's resubscribe",
      );
      worker.send('done', { v: 1, progressToken: token });
      await eventually(
        async () => {
          const got = (await gateway.request('progress/get', { progressToken: token })).result as {
            stream?: { state: string };
          };
          return got.stream?.state === 'done' ? true : undefined;
        },
        60_000,
        'the stream done on the daemon',
      );
      relay.connections[1]?.cut();
      await eventually(() => (shown().length >= 2 ? true : undefined), 60_000, 'the done');
      tail.child.kill('SIGTERM');
      expect(await tail.exit).toBe(0);
      expect(shown()).toEqual([
        { progressToken: token, progress: 1 },
        { progressToken: token, status: 'ok' },
      ]);
    } finally {
      worker.destroy();
      await gateway.close();
      await relay.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail without tokens, a token that starts again', () => {
  it('asks progress/get (its host) for the new stream of a token whose done it showed, and shows both whole', async () => {
    // Done streams are evicted at once: the token may start a new stream right after.
    const daemon = await startDaemon([...PATIENT_DAEMON_ARGS, '--retention-ms', '0']);
    const relay = await startLinkRelay(daemon.info);
    const gateway = await connectGateway(daemon.info);
    const worker = await rawWorker(daemon.info.socket);
    const gets = () =>
      relay.requests().filter((request) => request.method === 'progress/get').length;
    try {
      const tail = startTail(['--json', '--min-interval-ms', '0'], relay.runtimeDir);
      await followsAll(gateway);
      const token = uniqueToken('again');
      const shown = () =>
        tail
          .lines()
          .map((line) => JSON.parse(line).params)
          .filter((params) => params.progressToken === token);
      for (const round of [1, 2]) {
        worker.send('progress', { v: 1, progressToken: token, progress: round });
        worker.send('done', { v: 1, progressToken: token });
        await eventually(
          () => (shown().length === 2 * round ? true : undefined),
          60_000,
          `stream ${round}`,
        );
        await eventually(async () => {
          const reply = await gateway.request('progress/get', { progressToken: token });
          return (reply.result as { stream?: unknown }).stream === undefined ? true : undefined;
        });
      }
      expect(shown()).toEqual([
        { progressToken: token, progress: 1 },
        { progressToken: token, status: 'ok' },
        { progressToken: token, progress: 2 },
        { progressToken: token, status: 'ok' },
      ]);
      expect(gets()).toBe(2);
      tail.child.kill('SIGTERM');
      expect(await tail.exit).toBe(0);
    } finally {
      worker.destroy();
      await gateway.close();
      await relay.close();
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail across a daemon restart', () => {
  it('with a token, waits while the daemon is away, follows it on the new daemon, and exits once done', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon(PATIENT_DAEMON_ARGS, runtimeDir);
    const token = uniqueToken('restart-named');
    const tail = startTail([token, '--json'], runtimeDir);
    const before = await connectGateway(first.info);
    await subscribed(token, 1, before);
    await before.close();
    await first.stop('SIGKILL');
    await eventually(
      () => (tail.stderr().includes('lost the daemon') ? true : undefined),
      60_000,
      'tail to lose the daemon',
    );
    const second = await startDaemon(PATIENT_DAEMON_ARGS, runtimeDir);
    const gateway = await connectGateway(second.info);
    try {
      // Nothing but tail's own wish to go on may hold it while no daemon is up.
      const outcome = await Promise.race([
        subscribed(token, 1, gateway).then(() => 'resubscribed'),
        tail.exit.then((code) => `exited with ${code} (stderr: ${tail.stderr()})`),
      ]);
      expect(outcome).toBe('resubscribed');
      await publishTo(second, token, '--done');
      expect(await tail.exit).toBe(0);
      expect(tail.lines().map((line) => JSON.parse(line).params)).toEqual([
        { progressToken: token, status: 'ok' },
      ]);
    } finally {
      await gateway.close();
      await second.stop();
    }
  });

  it('shows a stream that finishes after the restart once, and does not follow it again', async () => {
    const runtimeDir = tempDir();
    const first = await startDaemon(PATIENT_DAEMON_ARGS, runtimeDir);
    const tail = startTail(['--json'], runtimeDir);
    const token = uniqueToken('restart');
    const ofToken = () =>
      tail
        .lines()
        .map((line) => JSON.parse(line))
        .filter((message) => message.params.progressToken === token);
    await publishTo(first, token, '--progress', '5');
    await eventually(() => (ofToken().length === 1 ? true : undefined), 60_000, 'the first value');

    await first.stop('SIGKILL');
    const second = await startDaemon(PATIENT_DAEMON_ARGS, runtimeDir);
    const gateway = await connectGateway(second.info);
    try {
      // tail reconnects and follows every stream again; the new daemon's stream is a new one.
      await followsAll(gateway);
      await publishTo(second, token, '--progress', '1131');
      await publishTo(second, token, '--done');
      await eventually(() => (ofToken().length === 3 ? true : undefined), 60_000, 'the done');
      // Published after tail printed the done: the poll that finds it lists the finished
      // stream first, so a second follow of that stream would print before this marker.
      const marker = uniqueToken('restart-marker');
      await publishTo(second, marker, '--progress', '1');
      await eventually(
        () => (tail.lines().some((line) => line.includes(marker)) ? true : undefined),
        60_000,
        'the marker stream',
      );
      expect(ofToken().map((message) => message.params)).toEqual([
        { progressToken: token, progress: 5 },
        { progressToken: token, progress: 1131 },
        { progressToken: token, status: 'ok' },
      ]);
    } finally {
      await gateway.close();
    }
    tail.child.kill('SIGTERM');
    expect(await tail.exit).toBe(0);
  });
});

const ss = tool('ss', {
  debian: 'iproute2',
  why: "the unread bytes of tail's connection to a stopped daemon",
});

/**
 * Bytes received and not yet read by the daemon on its sessions' connections: those of its local
 * link (accepted at its private bind path, `gateway.sock.<pid>.<n>`), or of its TCP port.
 */
function unreadAt(daemon: RunningDaemon): number {
  const local = daemon.info.gatewaySocket;
  const rows =
    local === undefined
      ? execFileSync(
          'ss',
          ['-Htn', 'state', 'established', `( sport = :${new URL(daemon.info.url).port} )`],
          { encoding: 'utf8' },
        )
      : execFileSync('ss', ['-Hxn', 'state', 'established'], { encoding: 'utf8' })
          .split('\n')
          .filter((row) => row.includes(` ${local}.`))
          .join('\n');
  // TCP rows open with Recv-Q; Unix rows with the socket type first.
  const column = local === undefined ? 0 : 1;
  return rows
    .split('\n')
    .filter((row) => row.trim() !== '')
    .reduce((sum, row) => sum + Number(row.trim().split(/\s+/)[column]), 0);
}

describe('mcp-progress tail stopped while its list poll is unanswered', () => {
  it.skipIf(ss.skip)('exits on SIGTERM, and polls no more', async () => {
    ss.require();
    const runtimeDir = tempDir();
    // tail polls the list only when it cannot follow every stream: the one place is taken.
    const daemon = await startDaemon(
      [...PATIENT_DAEMON_ARGS, '--max-subscribe-all', '1'],
      runtimeDir,
    );
    const gateway = await connectGateway(daemon.info);
    expect((await gateway.request('progress/subscribeAll')).error).toBeUndefined();
    const tail = startTail(['--json'], runtimeDir);
    try {
      await eventually(
        () => (tail.stderr().includes('listing the streams every') ? true : undefined),
        60_000,
        'tail to fall back to listing',
      );
      await gateway.close();
      daemon.child.kill('SIGSTOP');
      // tail's next list poll is then in flight: its bytes wait unread at the stopped daemon.
      await eventually(
        () => (unreadAt(daemon) > 0 ? true : undefined),
        60_000,
        "tail's list poll to wait unanswered",
      );
      tail.child.kill('SIGTERM');
      // The failed poll must not schedule the next one: that kept tail alive for ever.
      await eventually(
        () => (tail.child.exitCode !== null ? true : undefined),
        30_000,
        () => `tail to exit after SIGTERM (stderr: ${tail.stderr()})`,
      );
      expect(await tail.exit).toBe(0);
    } finally {
      daemon.child.kill('SIGCONT');
      await daemon.stop();
    }
  });
});

describe('mcp-progress tail, stdout not a terminal', () => {
  it('prints plain lines: counts, percent, message, and the status at the end', async () => {
    const token = uniqueToken('plain');
    const tail = startTail([token]);
    await subscribed(token);
    await publish(token, '--progress', '5', '--total', '10', '--message', 'frame 5');
    await eventually(() => (tail.lines().length === 1 ? true : undefined), 60_000, 'a line');
    await publish(token, '--done', '--message', 'rendered');
    expect(await tail.exit).toBe(0);
    expect(tail.lines()).toEqual([
      `${token}   50%  5/10  frame 5`,
      `${token}   50%  5/10  ✓ ok  rendered`,
    ]);
    expect(tail.lines().join('')).not.toContain('\x1b');
  });
});

describe('mcp-progress tail TOKEN, piped, before anything is published', () => {
  it('says once on stderr what it waits for; a stream already running gets no such line', async () => {
    const token = uniqueToken('piped-wait');
    const tail = startTail([token]);
    await eventually(
      () => (tail.stderr().includes('nothing published yet') ? true : undefined),
      60_000,
      'the waiting line',
    );
    expect(tail.stderr()).toBe(
      `mcp-progress tail: nothing published yet for ${JSON.stringify(token)}; waiting (Ctrl-C to stop)\n`,
    );
    await publish(token, '--progress', '1', '--total', '2');
    await publish(token, '--done');
    expect(await tail.exit).toBe(0);
    expect(tail.stderr().split('nothing published yet').length - 1).toBe(1);

    const running = uniqueToken('piped-running');
    await publish(running, '--progress', '1', '--total', '2');
    const late = startTail([running]);
    await eventually(() => (late.lines().length === 1 ? true : undefined), 60_000, 'the value');
    await publish(running, '--done');
    expect(await late.exit).toBe(0);
    expect(late.stderr()).toBe('');
  });
});

describe('mcp-progress tail and control characters', () => {
  it('prints them visibly in plain lines, and verbatim in --json', async () => {
    const token = `${uniqueToken('ctl')}\nsecond-row`;
    const message = 'clear\x1b[2J\x1b]0;title\x07 bell\x07 back\x08 del\x7f c1\x9b';
    const plain = startTail([token]);
    const json = startTail([token, '--json']);
    await subscribed(token, 2);
    await publish(token, '--progress', '1', '--total', '2', '--message', message);
    await publish(token, '--done');
    expect(await plain.exit).toBe(0);
    expect(await json.exit).toBe(0);
    const shown = token.replace('\n', '␊');
    expect(plain.lines()).toEqual([
      `${shown}   50%  1/2  clear␛[2J␛]0;title␇ bell␇ back␈ del␡ c1\ufffd`,
      `${shown}   50%  1/2  ✓ ok  clear␛[2J␛]0;title␇ bell␇ back␈ del␡ c1\ufffd`,
    ]);
    expect(json.lines().map((line) => JSON.parse(line).params)).toEqual([
      { progressToken: token, progress: 1, total: 2, message },
      { progressToken: token, status: 'ok' },
    ]);
  });
});

const tmuxTool = tool('tmux', {
  debian: 'tmux',
  probe: ['tmux', '-V'],
  why: 'the pseudo-terminal tests of tail',
});

describe.skipIf(tmuxTool.skip)('mcp-progress tail in a real terminal (tmux)', () => {
  beforeAll(() => tmuxTool.require());
  const server = `mcp-progress-test-${process.pid}`;
  // A daemon of its own, so that the screen shows this test's streams only.
  let own: RunningDaemon;
  beforeAll(async () => {
    own = await startDaemon(PATIENT_DAEMON_ARGS);
  });
  const publish = (token: string, ...fields: string[]) => publishTo(own, token, ...fields);
  const tmux = (...args: string[]) =>
    execFileSync('tmux', ['-L', server, ...args], { encoding: 'utf8' });
  afterAll(() => {
    spawnSync('tmux', ['-L', server, 'kill-server']);
  });
  const screen = (session = 'tail') => tmux('capture-pane', '-p', '-t', session);
  const screenShows = (what: (text: string) => boolean, description: string, session = 'tail') =>
    eventually(
      () => {
        const text = screen(session);
        return what(text) ? text : undefined;
      },
      60_000,
      description,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; the screen:\n${screen(session)}`);
    });

  it('draws a bar, a counter and statuses, redrawing in place; Ctrl-C leaves it', async () => {
    const [render, count, failing] = [
      uniqueToken('bar'),
      uniqueToken('count'),
      uniqueToken('fail'),
    ];
    tmux(
      'new-session',
      '-d',
      '-s',
      'tail',
      '-x',
      '150',
      '-y',
      '20',
      `${process.execPath} ${BIN} tail --runtime-dir ${own.runtimeDir}; echo TAIL-EXIT=$?; sleep 60`,
    );
    await screenShows((text) => text.includes('mcp-progress tail:'), 'the header');
    await publish(render, '--progress', '25', '--total', '100', '--message', 'frame 25');
    await publish(count, '--progress', '17');
    await publish(failing, '--progress', '1', '--total', '4');
    await screenShows(
      (text) => text.includes(count) && text.includes(failing),
      'the three streams',
    );
    for (const progress of [50, 75])
      await publish(render, '--progress', String(progress), '--total', '100');
    const moving = await screenShows((text) => /75%\s+75\/100/.test(text), 'the bar at 75%');
    // One line per stream: redrawn in place, not scrolled.
    expect(moving.split('\n').filter((line) => line.includes(render))).toHaveLength(1);
    const barLine = moving.split('\n').find((line) => line.includes(render)) ?? '';
    expect(barLine).toMatch(new RegExp(`${render}\\s+\\[█{15}░{5}\\]\\s+75%\\s+75/100`));
    const countLine = moving.split('\n').find((line) => line.includes(count)) ?? '';
    // Ten seconds after its only value a stream shows as stalled, on a slow machine perhaps already.
    expect(countLine).toMatch(new RegExp(`${count}\\s+17(\\s+stalled)?$`));
    expect(countLine).not.toContain('[');

    await publish(render, '--done');
    await publish(failing, '--done', '--status', 'error', '--message', 'disk full');
    const finished = await screenShows(
      (text) => text.includes('✓ ok') && text.includes('✗ error'),
      'the statuses',
    );
    expect(finished).toMatch(
      new RegExp(`${failing}\\s+\\[.*\\]\\s+25%\\s+1/4\\s+✗ error\\s+disk full`),
    );
    expect(finished).toMatch(/mcp-progress tail: 1 running, 2 finished/);
    expect(finished.split('\n').filter((line) => line.includes('mcp-progress tail:'))).toHaveLength(
      1,
    );

    tmux('send-keys', '-t', 'tail', 'C-c');
    const after = await screenShows((text) => text.includes('TAIL-EXIT='), 'tail to exit');
    expect(after).toContain('TAIL-EXIT=0');
  });
  it('keeps rows with wide characters on one line each, so the view redraws in place', async () => {
    const [wide, plain] = [uniqueToken('漢字'), uniqueToken('plain')];
    tmux(
      'new-session',
      '-d',
      '-s',
      'wide',
      '-x',
      '80',
      '-y',
      '20',
      `${process.execPath} ${BIN} tail --runtime-dir ${own.runtimeDir}; echo TAIL-EXIT=$?; sleep 60`,
    );
    await screenShows((text) => text.includes('mcp-progress tail:'), 'the header', 'wide');
    // Far wider than the screen in columns, though fewer than 80 code points.
    const message = '処理中🚀フレーム'.repeat(8);
    for (let progress = 1; progress <= 6; progress++) {
      await publish(wide, '--progress', String(progress), '--total', '10', '--message', message);
      await publish(plain, '--progress', String(progress));
      await screenShows(
        (text) =>
          text.includes(`${progress}/10`) && new RegExp(`${plain}\\s+${progress}\\b`).test(text),
        `progress ${progress}`,
        'wide',
      );
    }
    const text = screen('wide');
    const lines = text.split('\n');
    expect(lines.filter((line) => line.includes('mcp-progress tail:'))).toHaveLength(1);
    expect(lines.filter((line) => line.includes(wide))).toHaveLength(1);
    expect(lines.filter((line) => line.includes(plain))).toHaveLength(1);
    expect(
      lines.find((line) => line.includes(wide)),
      text,
    ).toMatch(/6\/10 .*処理中.*…$/);
    // Nothing arrives any more, yet the view goes on redrawing: the rate and ETA give way to
    // "stalled" ten seconds after the last value.
    const stalled = await screenShows(
      (screenText) => /6\/10 {2}stalled/.test(screenText),
      'the stream shown as stalled',
      'wide',
    );
    expect(stalled.split('\n').filter((line) => line.includes('mcp-progress tail:'))).toHaveLength(
      1,
    );
    tmux('send-keys', '-t', 'wide', 'C-c');
    const after = await screenShows(
      (screenText) => screenText.includes('TAIL-EXIT='),
      'tail to exit',
      'wide',
    );
    expect(after).toContain('TAIL-EXIT=0');
  });
});
