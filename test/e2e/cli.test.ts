/** The real binary, run as a user would: exit codes, messages, files and modes. */
import { spawn } from 'node:child_process';
import {
  chownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  BIN,
  cleanupAll,
  collectOutput,
  endRace,
  eventually,
  expectDaemonRefuses,
  publishAccepted,
  type RacingDaemon,
  ROOT,
  type RunningDaemon,
  raceDaemons,
  runCli,
  runSecondDaemon,
  startDaemon,
  tempDir,
  untilReady,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { connectHttp } from '../helpers/mcp.js';
import { rawWorker } from '../helpers/worker.js';

afterAll(() => cleanupAll());

describe('help and version', () => {
  it('prints the version', async () => {
    const { version } = (await import('../../package.json', { with: { type: 'json' } })).default;
    for (const flag of ['--version', '-v']) {
      const result = await runCli([flag]);
      expect(result).toMatchObject({ code: 0, stdout: `${version}\n` });
    }
  });

  it('lists the commands, and each command has help', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    for (const command of ['daemon', 'publish', 'status', 'schema']) {
      expect(top.stdout).toContain(`  ${command}`);
      const help = await runCli([command, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: mcp-progress ${command}`));
    }
  });

  it('an unknown command or flag exits 2 with a hint', async () => {
    const unknown = await runCli(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
    const flag = await runCli(['status', '--bogus']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--bogus');
    expect(flag.stderr).toContain('mcp-progress status --help');
  });
});

describe('exit code 2 for every wrong command line', () => {
  it('a value out of range, of the wrong form or empty exits 2 from every command, naming the flag', async () => {
    const dir = tempDir();
    const cases: Array<[string[], string]> = [
      [['daemon', '--runtime-dir', dir, '--port', '99999'], '--port'],
      [['daemon', '--runtime-dir', dir, '--abandon-grace-ms=-1'], '--abandon-grace-ms'],
      [['daemon', '--runtime-dir', dir, '--max-sessions', '0x10'], '--max-sessions'],
      [['mcp', '--runtime-dir', dir, '--port', '99999'], '--port'],
      [['mcp', '--runtime-dir', dir, '--min-interval-ms', ' 7'], '--min-interval-ms'],
      [['publish', '--runtime-dir', dir, '--token', ''], '--token'],
      [['publish', '--runtime-dir', dir, '--token', 'a', '--meta', '[1,2]'], '--meta'],
      [['run', '--token', '', '--', 'true'], '--token'],
      [['tail', '--runtime-dir', dir, '--min-interval-ms', '0b11111'], '--min-interval-ms'],
      [['status', '--runtime-dir', dir, '--timeout-ms', '0x10'], '--timeout-ms'],
    ];
    for (const [args, flag] of cases) {
      const result = await runCli(args);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(flag);
      expect(result.stderr).not.toContain('internal error');
    }
  });
});

describe('the hint of a wrong number', () => {
  it('fits the flag: an integer range gets integer examples, and a negative value is read as one', async () => {
    const dir = tempDir();
    const port = await runCli(['daemon', '--runtime-dir', dir, '--port', 'abc']);
    expect(port.code).toBe(2);
    expect(port.stderr).toBe(
      'mcp-progress daemon: --port: expected an integer from 0 to 65535, got "abc" (write it in decimal digits, such as 0 or 100)\n',
    );
    // parseArgs would take -1 for a flag; it is --total's value, refused by its range.
    const total = await runCli(['publish', '--runtime-dir', dir, '--token', 't', '--total', '-1']);
    expect(total.code).toBe(2);
    expect(total.stderr).toBe('mcp-progress publish: --total: expected a number >= 0, got -1\n');
  });
});

describe("every command's option table", () => {
  it('checks its ranges and choices before doing anything, naming the flag and what it takes', async () => {
    const dir = tempDir();
    const cases: Array<[string[], string]> = [
      [
        ['status', '--runtime-dir', dir, '--timeout-ms', '0'],
        'option --timeout-ms: expected an integer >= 1, got 0',
      ],
      [
        ['publish', '--runtime-dir', dir, '--token', 'a', '--timeout-ms=-5'],
        'option --timeout-ms: expected an integer >= 1, got -5',
      ],
      [
        ['tail', '--runtime-dir', dir, '--min-interval-ms', '60001'],
        'option --min-interval-ms: expected an integer from 0 to 60000, got 60001',
      ],
      [
        ['mcp', '--runtime-dir', dir, '--port', '70000'],
        'option --port: expected an integer from 0 to 65535, got 70000',
      ],
      [
        ['mcp', '--runtime-dir', dir, '--log-level', 'loud'],
        '--log-level: expected error, warn, info or debug, got "loud"',
      ],
      [
        ['daemon', '--runtime-dir', dir, '--log-level', 'loud'],
        '--log-level: expected error, warn, info or debug, got "loud"',
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runCli(args);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(message);
    }
    // Nothing was started or written: the checks come first.
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('publish and status', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon();
  });
  afterAll(() => daemon.stop());

  const socketArgs = () => ['--socket', daemon.info.socket];

  it('exits 0 when the frame is accepted and 1 with the daemon message when it is rejected', async () => {
    const ok = await runCli([
      'publish',
      ...socketArgs(),
      '--token',
      'cli-1',
      '--progress',
      '5',
      '--total',
      '10',
    ]);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    const again = await runCli(['publish', ...socketArgs(), '--token', 'cli-1', '--progress', '5']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      'rejected (non_monotonic): progress 5 is not greater than the last accepted progress 5',
    );
    const done = await runCli([
      'publish',
      ...socketArgs(),
      '--token',
      'cli-1',
      '--done',
      '--status',
      'error',
      '--message',
      'x',
    ]);
    expect(done.code).toBe(0);
    const closed = await runCli(['publish', ...socketArgs(), '--token', 'cli-1']);
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain('rejected (stream_closed)');
  });

  it('--token sends a string and --token-json sends any JSON token', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: '7', minIntervalMs: 0 });
    await gateway.request('progress/subscribe', { progressToken: 7, minIntervalMs: 0 });
    expect(
      (await runCli(['publish', ...socketArgs(), '--token', '7', '--progress', '1'])).code,
    ).toBe(0);
    expect(
      (
        await runCli([
          'publish',
          ...socketArgs(),
          '--token-json',
          '7',
          '--progress',
          '2',
          '--meta',
          '{"k":[1]}',
        ])
      ).code,
    ).toBe(0);
    const got = await gateway.waitFor(2);
    expect(got.map((n) => n.params)).toEqual([
      { progressToken: '7', progress: 1 },
      { progressToken: 7, progress: 2, _meta: { k: [1] } },
    ]);
    await gateway.close();
  });

  it('uses MCP_PROGRESS_SOCKET and MCP_PROGRESS_TOKEN when the flags are absent', async () => {
    const result = await runCli(['publish', '--message', 'from env'], {
      MCP_PROGRESS_SOCKET: daemon.info.socket,
      MCP_PROGRESS_TOKEN: 'env-token',
    });
    expect(result.code).toBe(0);
    const status = JSON.parse((await runCli(['status', '--json', ...socketArgs()])).stdout);
    expect(status.streams.active).toBeGreaterThanOrEqual(1);
  });

  it('finds the default socket of a runtime dir', async () => {
    const result = await runCli([
      'publish',
      '--runtime-dir',
      daemon.runtimeDir,
      '--token',
      'rd',
      '--progress',
      '1',
    ]);
    expect(result.code).toBe(0);
  });

  it('refuses a wrong command line with exit 2 and says why', async () => {
    const cases: Array<[string[], string]> = [
      [['--token', 'a', '--progress', 'ten'], '--progress: expected a finite number, got "ten"'],
      [['--token', 'a', '--token-json', '1'], 'give --token or --token-json, not both'],
      [['--progress', '1'], 'no token: pass --token T'],
      [
        ['--token', 'a', '--done', '--status', 'failed'],
        '--status: expected ok, error or cancelled',
      ],
      [['--token', 'a', '--status', 'ok'], '--status goes with --done'],
      [['--token-json', '{"a":1}'], '--token-json: a token is a JSON string or integer'],
      // The daemon would refuse 1.5; 1e999 parses to Infinity, which JSON sends as null.
      [['--token-json', '1.5'], '--token-json: a token is a JSON string or integer'],
      [['--token-json', '1e999'], '--token-json: a token is a JSON string or integer'],
      [['--token-json', '9007199254740993'], '(a safe integer'],
      [['--token', 'a', '--meta', 'nope'], '--meta: expected JSON'],
      // JSON, but not an object: _meta is an object, and the daemon would refuse it.
      [['--token', 'a', '--meta', '[1,2]'], '--meta: expected a JSON object'],
      [['--token', 'a', '--meta', 'null'], '--meta: expected a JSON object'],
      [['--token', ''], '--token: a token is a non-empty string'],
      [['--token-json', '""'], '--token-json: a token is a non-empty string'],
      // Number() reads these as 16, 31 and 7; a person meant something else.
      [['--token', 'a', '--progress', '0x10'], '--progress: expected a finite number'],
      [['--token', 'a', '--progress', '0b11111'], '--progress: expected a finite number'],
      [['--token', 'a', '--progress', ' 7'], '--progress: expected a finite number'],
      [['--token', 'a', '--total', '1e999'], '--total: expected a finite number'],
      [
        ['--token', 'a', '--timeout-ms', '0o17'],
        '--timeout-ms: expected an integer >= 1, got "0o17"',
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runCli(['publish', ...socketArgs(), ...args]);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain(message);
    }
  });

  it('takes decimal numbers in every form a person writes them', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'decimal', minIntervalMs: 0 });
    for (const value of ['1', '2.5', '+3', '4.', '5e0', '.6e1']) {
      const result = await runCli([
        'publish',
        ...socketArgs(),
        '--token',
        'decimal',
        `--progress=${value}`,
      ]);
      expect(result, value).toMatchObject({ code: 0, stderr: '' });
    }
    const got = await gateway.waitFor(6);
    expect(got.map((n) => n.params.progress)).toEqual([1, 2.5, 3, 4, 5, 6]);
    await gateway.close();
  });

  it('cuts a message over 4096 bytes as the clients do, and the daemon takes it', async () => {
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'long', minIntervalMs: 0 });
    // 4092 ASCII bytes and then 2-byte characters: the cut at 4093 falls inside the first one
    // and backs up to its start, leaving room for "...".
    const long = `${'a'.repeat(4092)}${'é'.repeat(100)}`;
    const result = await runCli(['publish', ...socketArgs(), '--token', 'long', '--message', long]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const [got] = await gateway.waitFor(1);
    const message = got?.params.message as string;
    expect(message).toBe(`${'a'.repeat(4092)}...`);
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(4096);
    await gateway.close();
  });

  it('reports a frame the daemon rejects for its content', async () => {
    // What only the daemon knows (the stream ended) is refused by the daemon.
    const first = await runCli(['publish', ...socketArgs(), '--token', 'ended', '--done']);
    expect(first.code).toBe(0);
    const result = await runCli([
      'publish',
      ...socketArgs(),
      '--token',
      'ended',
      '--progress',
      '5',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('rejected (stream_closed)');
  });

  it('status shows the figures, as text and as JSON', async () => {
    const claimant = await rawWorker(daemon.info.socket);
    claimant.send('claim', { v: 1, progressToken: 'claimed-job', seq: 1 });
    expect((await claimant.reply((r) => r.type === 'ack')).data).toEqual({ seq: 1 });
    const text = await runCli(['status', ...socketArgs()]);
    expect(text.stdout).toMatch(/^claims\s+1$/m);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`pid ${daemon.child.pid}`);
    expect(text.stdout).toMatch(/frames\s+\d+ accepted, \d+ rejected \(/);
    const json = JSON.parse((await runCli(['status', '--json', ...socketArgs()])).stdout);
    expect(json).toMatchObject({
      pid: daemon.child.pid,
      socket: daemon.info.socket,
      url: daemon.info.url,
      counters: { framesRejected: { non_monotonic: 1 } },
    });
    expect(json.counters.framesAccepted).toBeGreaterThan(0);
    expect(json.claims).toBe(1);
    // The claimant is the one worker: status's own connection is not counted.
    expect(json.connections).toBe(1);
    expect(text.stdout).toMatch(/^workers\s+1 connected$/m);
    claimant.destroy();
  });

  it('exits 1 and says how to start a daemon when none runs', async () => {
    const dir = tempDir();
    const publish = await runCli(['publish', '--runtime-dir', dir, '--token', 'x']);
    expect(publish.code).toBe(1);
    expect(publish.stderr).toContain('no daemon socket at');
    expect(publish.stderr).toContain('mcp-progress daemon');
    const status = await runCli(['status', '--runtime-dir', dir]);
    expect(status.code).toBe(1);
  });
});

describe('finding a daemon and being refused by it', () => {
  const running: RunningDaemon[] = [];
  afterEach(async () => {
    for (const d of running.splice(0)) await d.stop('SIGKILL');
  });

  it("status and publish with --runtime-dir use the socket named in the runtime dir's daemon.json", async () => {
    const elsewhere = join(tempDir(), 'elsewhere.sock');
    const daemon = await startDaemon(['--socket', elsewhere]);
    running.push(daemon);
    expect(daemon.info.socket).toBe(elsewhere);
    const status = await runCli(['status', '--json', '--runtime-dir', daemon.runtimeDir]);
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ pid: daemon.child.pid, socket: elsewhere });
    const publish = await runCli([
      'publish',
      '--runtime-dir',
      daemon.runtimeDir,
      '--token',
      'elsewhere',
      '--progress',
      '1',
    ]);
    expect(publish).toMatchObject({ code: 0, stderr: '' });
  });

  it("status at the connection cap prints the daemon's rejected reason and exits 1", async () => {
    const daemon = await startDaemon(['--max-connections', '1']);
    running.push(daemon);
    // Hold the only connection: once it has its pong, the daemon counts it.
    const held = connect({ path: daemon.info.socket });
    held.setEncoding('utf8');
    const answered = new Promise<string>((resolve) => {
      let text = '';
      held.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('\f')) resolve(text);
      });
    });
    held.write('{"type":"ping","data":{}}\f');
    expect(await answered).toContain('"type":"pong"');
    const status = await runCli(['status', '--socket', daemon.info.socket]);
    held.destroy();
    expect(status.code).toBe(1);
    expect(status.stderr).toContain('rejected (too_many_connections)');
    expect(status.stderr).toContain('at most 1 worker connections');
    expect(status.stderr).not.toContain('before answering');
  });
});

describe('the daemon process', () => {
  const running: RunningDaemon[] = [];
  afterEach(async () => {
    for (const d of running.splice(0)) await d.stop('SIGKILL');
  });

  it('creates the runtime dir 0700, and the socket and daemon.json 0600', async () => {
    const daemon = await startDaemon([], join(tempDir(), 'nested', 'run'));
    running.push(daemon);
    expect(statSync(daemon.runtimeDir).mode & 0o777).toBe(0o700);
    expect(statSync(daemon.info.socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(daemon.runtimeDir, 'daemon.json')).mode & 0o777).toBe(0o600);
    expect(daemon.info).toMatchObject({
      pid: daemon.child.pid,
      socket: join(daemon.runtimeDir, 'bridge.sock'),
      url: expect.stringMatching(/^ws:\/\/127\.0\.0\.1:\d+\/ws$/),
      secret: expect.stringMatching(/^[\w-]{40,}$/),
    });
  });

  it('tightens an existing runtime dir that others could read', async () => {
    const dir = tempDir();
    const { chmodSync } = await import('node:fs');
    chmodSync(dir, 0o755);
    const daemon = await startDaemon([], dir);
    running.push(daemon);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('creates a missing runtime dir 0700, and refuses a symlink or a dir owned by someone else', async () => {
    const parent = tempDir();
    const fresh = join(parent, 'a', 'b');
    const daemon = await startDaemon([], fresh);
    running.push(daemon);
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
    symlinkSync(fresh, join(parent, 'link'));
    const viaLink = await runCli(['daemon', '--runtime-dir', join(parent, 'link'), '--port', '0']);
    expect(viaLink.code).toBe(1);
    expect(viaLink.stderr).toContain('is not a directory');
    // A directory of another owner, for real either way: as root one given to another uid, as
    // anyone else / (root's).
    const isRoot = process.getuid?.() === 0;
    let foreign = '/';
    let owner = 0;
    if (isRoot) {
      foreign = join(parent, 'foreign');
      owner = 54_321;
      mkdirSync(foreign, { mode: 0o700 });
      chownSync(foreign, owner, owner);
    }
    expect(statSync(foreign).uid).toBe(owner);
    const refused = await runCli(['daemon', '--runtime-dir', foreign, '--port', '0']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`belongs to uid ${owner}, not to you`);
  });

  it('never follows a file planted where daemon.json is written', async () => {
    const dir = tempDir();
    const victim = join(tempDir(), 'victim.txt');
    writeFileSync(victim, 'precious\n');
    // The temporary name is daemon.json.<pid>.tmp. A shell plants it for its own pid ($$) and then
    // execs the daemon, which keeps that pid: the planted name is exactly the one the daemon uses.
    const child = spawn(
      'sh',
      [
        '-c',
        'ln -s "$1" "$2/daemon.json.$$.tmp" && exec "$3" "$4" daemon --runtime-dir "$2" --port 0',
        'sh',
        victim,
        dir,
        process.execPath,
        BIN,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
    );
    const output = collectOutput(child);
    try {
      await untilReady(output);
      // The daemon's pid is the one the name was planted for; the link was removed, not followed.
      expect(JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')).pid).toBe(child.pid);
      expect(readFileSync(victim, 'utf8')).toBe('precious\n');
      expect(lstatSync(join(dir, 'daemon.json')).isFile()).toBe(true);
      expect(readdirSync(dir)).not.toContain(`daemon.json.${child.pid}.tmp`);
    } finally {
      child.kill('SIGTERM');
      await waitForExit(child);
    }
  });

  it('a second daemon on the same socket exits non-zero naming the running pid', async () => {
    const first = await startDaemon();
    running.push(first);
    const second = await runSecondDaemon(first.runtimeDir);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`a daemon (pid ${first.child.pid}`);
    expect(second.stderr).toContain('is already running');
    // The live daemon's socket is untouched and still answers.
    expect((await runCli(['status', '--socket', first.info.socket])).code).toBe(0);
  });

  it('of three daemons started at once on one runtime dir, one runs and the others name it', async () => {
    // A race: a round may miss the window, so several rounds make a regression show.
    for (let round = 0; round < 5; round++) {
      const dir = tempDir();
      const race = await raceDaemons(dir, [undefined, undefined, undefined]);
      try {
        const everyStderr = race.all.map((r) => r.output.stderr()).join('\n');
        expect(race.ready.length, everyStderr).toBe(1);
        const winner = race.ready[0] as RacingDaemon;
        for (const loser of race.exited) {
          expect(await waitForExit(loser.child)).toBe(1);
          expect(loser.output.stderr()).not.toContain('internal error');
          expect(loser.output.stderr()).toContain(`a daemon (pid ${winner.child.pid}`);
          expect(loser.output.stderr()).toContain('is already running');
        }
        expect(JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')).pid).toBe(
          winner.child.pid,
        );
        if (round === 0) expect((await runCli(['status', '--runtime-dir', dir])).code).toBe(0);
        winner.child.kill('SIGTERM');
        expect(await waitForExit(winner.child)).toBe(0);
      } finally {
        await endRace(race.all);
      }
    }
  }, 150_000); // five rounds of three process starts, on a loaded machine

  it('a failed start after the bind cleans up and exits: daemon.json in the way as a directory', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'daemon.json'));
    const result = await runCli(['daemon', '--runtime-dir', dir, '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`cannot write ${join(dir, 'daemon.json')}`);
    expect(result.stderr).toContain('--runtime-dir');
    expect(result.stderr).not.toContain('internal error');
    // No live socket, and no temporary file holding the secret, is left behind.
    expect(readdirSync(dir)).toEqual(['daemon.json']);
  });

  it("on stop a daemon leaves a newer daemon's socket and daemon.json in place", async () => {
    const dir = tempDir();
    const old = await startDaemon([], dir);
    // Its files vanish (a cleaner of /run, a person), and a new daemon starts in their place.
    rmSync(old.info.socket);
    rmSync(join(dir, 'daemon.json'));
    const next = await startDaemon([], dir);
    running.push(next);
    expect(await old.stop('SIGTERM')).toBe(0);
    expect(statSync(next.info.socket).isSocket()).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, 'daemon.json'), 'utf8')).pid).toBe(next.child.pid);
    const status = await runCli(['status', '--json', '--runtime-dir', dir]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout).pid).toBe(next.child.pid);
  });

  it('replaces a stale socket left by a daemon that was killed', async () => {
    const dir = tempDir();
    const killed = await startDaemon([], dir);
    await killed.stop('SIGKILL');
    expect(statSync(killed.info.socket).isSocket()).toBe(true);
    const next = await startDaemon([], dir);
    running.push(next);
    expect(next.info.pid).not.toBe(killed.info.pid);
    expect(
      (await runCli(['publish', '--socket', next.info.socket, '--token', 's', '--progress', '1']))
        .code,
    ).toBe(0);
  });

  it('refuses to remove a socket path that is not a socket', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'bridge.sock'), 'precious');
    const result = await runCli(['daemon', '--runtime-dir', dir, '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('exists and is not a socket');
  });

  it('on SIGTERM stops cleanly and removes the socket and daemon.json', async () => {
    const daemon = await startDaemon();
    const code = await daemon.stop('SIGTERM');
    expect(code).toBe(0);
    expect(() => statSync(daemon.info.socket)).toThrow();
    expect(() => statSync(join(daemon.runtimeDir, 'daemon.json'))).toThrow();
    expect(daemon.stderr()).toContain('stopped');
  });

  it('a client holding a half-sent HTTP request does not hold up the stop', async () => {
    const daemon = await startDaemon();
    const { port } = new URL(daemon.info.url);
    const holder = connect({ host: '127.0.0.1', port: Number(port) });
    holder.on('error', () => {});
    const closedByDaemon = new Promise<void>((resolve) => holder.once('close', () => resolve()));
    await new Promise<void>((resolve) => holder.once('connect', () => resolve()));
    holder.write('GET / HTTP/1.1\r\nHost: x\r\n');
    // Without a cut-off the stop would wait for Node's 60 s header timeout, beyond this test's.
    expect(await daemon.stop('SIGTERM')).toBe(0);
    await closedByDaemon;
    expect(() => statSync(join(daemon.runtimeDir, 'daemon.json'))).toThrow();
  }, 45_000);

  it('on SIGINT flushes held values to subscribers before closing them', async () => {
    const daemon = await startDaemon(['--min-interval-ms', '60000']);
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: 'flush' });
    await publishAccepted(['--socket', daemon.info.socket], '--token', 'flush', '--progress', '1');
    await publishAccepted(['--socket', daemon.info.socket], '--token', 'flush', '--progress', '2');
    await gateway.waitFor(1);
    const closed = new Promise<number>((resolve) =>
      gateway.ws.once('close', (code) => resolve(code)),
    );
    expect(await daemon.stop('SIGINT')).toBe(0);
    expect(await closed).toBe(1001);
    expect(gateway.notifications.map((n) => n.params.progress)).toEqual([1, 2]);
  });

  it('checks options up front and names the bad one', async () => {
    await expectDaemonRefuses(
      ['--port', 'abc'],
      '--port: expected an integer from 0 to 65535, got "abc"',
    );
    // Out of range is a wrong command line too: exit 2, as for every bad flag value.
    await expectDaemonRefuses(
      ['--port', '70000'],
      'option --port: expected an integer from 0 to 65535, got 70000',
    );
    await expectDaemonRefuses(['--host', '0.0.0.0', '--port', '0'], '--allow-remote');
  });

  it('binding a non-loopback host needs --allow-remote and prints a warning', async () => {
    const dir = tempDir();
    const child = spawn(
      process.execPath,
      [
        join(import.meta.dirname, '../../bin/mcp-progress'),
        'daemon',
        '--runtime-dir',
        dir,
        '--port',
        '0',
        '--host',
        '0.0.0.0',
        '--allow-remote',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (t: string) => {
      stderr += t;
    });
    // The warning comes just before the ready line, possibly in another chunk.
    await expect.poll(() => stderr, { timeout: 10_000 }).toContain('ready:');
    expect(stderr).toContain('reachable beyond this machine');
    expect(stderr).not.toMatch(/secret":|[\w-]{43}/);
    child.kill('SIGTERM');
    expect(await waitForExit(child)).toBe(0);
  });
});

/** A WebSocket upgrade: "open" when the daemon took it, else its refusal (status and body). */
function attempt(
  url: string,
  headers: Record<string, string>,
  protocols: string[] = ['mcp-progress.v1'],
) {
  return new Promise<{ status: number; body: string } | 'open'>((resolve) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.once('open', () => {
      ws.close();
      resolve('open');
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (t: string) => {
        body += t;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', () => {});
  });
}

describe('the WebSocket gateway refuses what it must', () => {
  let daemon: RunningDaemon;
  beforeAll(async () => {
    daemon = await startDaemon(['--allow-origin', 'http://localhost:5173']);
  });
  afterAll(() => daemon.stop());

  it('without the secret: 401', async () => {
    const result = await attempt(daemon.info.url, {});
    expect(result).toMatchObject({
      status: 401,
      body: expect.stringContaining('secret is missing'),
    });
  });

  it('with a wrong secret: 401', async () => {
    const result = await attempt(daemon.info.url, { authorization: 'Bearer wrong-wrong-wrong' });
    expect(result).toMatchObject({ status: 401, body: expect.stringContaining('secret is wrong') });
  });

  it('with a foreign Origin, even with the secret: 403', async () => {
    const result = await attempt(daemon.info.url, {
      authorization: `Bearer ${daemon.info.secret}`,
      origin: 'https://evil.example',
    });
    expect(result).toMatchObject({
      status: 403,
      body: expect.stringContaining('--allow-origin https://evil.example'),
    });
  });

  it('without the subprotocol: 400', async () => {
    const result = await attempt(
      daemon.info.url,
      { authorization: `Bearer ${daemon.info.secret}` },
      [],
    );
    expect(result).toMatchObject({ status: 400, body: expect.stringContaining('mcp-progress.v1') });
  });

  it('accepts the secret as a header or as ?access_token=, and an allowed Origin', async () => {
    expect(await attempt(daemon.info.url, { authorization: `Bearer ${daemon.info.secret}` })).toBe(
      'open',
    );
    expect(await attempt(`${daemon.info.url}?access_token=${daemon.info.secret}`, {})).toBe('open');
    expect(
      await attempt(daemon.info.url, {
        authorization: `Bearer ${daemon.info.secret}`,
        origin: 'http://localhost:5173',
      }),
    ).toBe('open');
  });

  it('answers bad JSON-RPC with stable codes, and one session never affects another', async () => {
    const bad = await connectGateway(daemon.info);
    const good = await connectGateway(daemon.info);
    await good.request('progress/subscribe', { progressToken: 'steady', minIntervalMs: 0 });
    const errorOf = (raw: string) =>
      new Promise<{ code: number; message: string; data: { code: string } }>((resolve) => {
        bad.ws.once('message', (data) => resolve(JSON.parse(String(data)).error));
        bad.ws.send(raw);
      });
    expect(await errorOf('not json')).toMatchObject({
      code: -32700,
      data: { code: 'parse_error' },
    });
    expect(await errorOf('[1]')).toMatchObject({ code: -32600, data: { code: 'invalid_request' } });
    expect(await errorOf('{"jsonrpc":"1.0","id":1,"method":"progress/list"}')).toMatchObject({
      code: -32600,
    });
    expect(await errorOf('{"jsonrpc":"2.0","id":1,"method":"progress/nope"}')).toMatchObject({
      code: -32601,
      message: expect.stringContaining('progress/subscribe'),
    });
    const invalid = await errorOf(
      '{"jsonrpc":"2.0","id":2,"method":"progress/subscribe","params":{"progressToken":"x","minIntervalMs":-5}}',
    );
    expect(invalid).toMatchObject({ code: -32602, data: { code: 'invalid_params' } });
    expect(invalid.message).toContain('params.minIntervalMs');
    const unknown = await errorOf(
      '{"jsonrpc":"2.0","id":3,"method":"progress/subscribe","params":{"progressToken":"x","colour":1}}',
    );
    expect(unknown.message).toContain('colour');
    // A notification (no id) is never answered, even when its params are wrong: the next reply is the request's.
    bad.ws.send('{"jsonrpc":"2.0","method":"progress/subscribe","params":{"minIntervalMs":-5}}');
    expect(await errorOf('{"jsonrpc":"2.0","id":4,"method":"progress/nope"}')).toMatchObject({
      code: -32601,
    });
    await runCli([
      'publish',
      '--socket',
      daemon.info.socket,
      '--token',
      'steady',
      '--progress',
      '1',
    ]);
    expect((await good.waitFor(1))[0]?.params).toEqual({ progressToken: 'steady', progress: 1 });
    await Promise.all([bad.close(), good.close()]);
  });
});

describe('the secret never reaches a log', () => {
  it('sent through every surface that sees it, at every log level, it is in no log line', async () => {
    // Debug logs every level's lines; its own debug lines below show this daemon logged at debug.
    const daemon = await startDaemon(['--log-level', 'debug']);
    const { url, secret } = daemon.info;
    const http = url.replace(/^ws:/, 'http:').replace(/\/ws$/, '');
    const bearer = { authorization: `Bearer ${secret}` };
    const query = `access_token=${secret}`;
    // The WebSocket upgrade: taken, and refused after the secret was read (origin, subprotocol, path).
    expect(await attempt(`${url}?${query}`, {})).toBe('open');
    expect(await attempt(url, bearer)).toBe('open');
    expect(await attempt(`${url}?${query}`, { origin: 'https://evil.example' })).toMatchObject({
      status: 403,
    });
    expect(await attempt(`${url}?${query}`, {}, [])).toMatchObject({ status: 400 });
    expect(await attempt(`${http}/elsewhere?${query}`, bearer)).toMatchObject({ status: 404 });
    const session = await connectGateway(daemon.info);
    await session.request('progress/subscribe', { progressToken: 'x' });
    await session.close();
    // Plain HTTP, /metrics and /mcp, with the secret in the query and in the header.
    for (const [path, status] of [
      ['/ws', 426],
      // The live page takes its cookie only, never the secret (docs/PROTOCOL.md 4.8).
      ['/', 401],
      ['/elsewhere', 404],
      ['/metrics', 200],
    ] as const) {
      expect((await fetch(`${http}${path}?${query}`)).status, path).toBe(status);
      expect((await fetch(`${http}${path}`, { headers: bearer })).status, path).toBe(status);
    }
    const notJson = await fetch(`${http}/mcp?${query}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{"jsonrpc": "2.0", "id": 0,',
    });
    expect(notJson.status).toBe(400);
    const mcp = await connectHttp(daemon.info);
    expect(
      (await mcp.client.callTool({ name: 'list_progress', arguments: {} })).isError,
    ).toBeFalsy();
    await mcp.close();
    expect(await daemon.stop()).toBe(0);
    await eventually(() => (daemon.stderr().includes('stopped') ? true : undefined));
    const lines = daemon.stderr().split('\n');
    for (const seen of ['debug: websocket session', 'debug: MCP session', 'info: stopped'])
      expect(
        lines.some((line) => line.includes(seen)),
        seen,
      ).toBe(true);
    expect(lines.filter((line) => line.includes(secret))).toEqual([]);
  });
});

describe('mcp-progress mcp started by hand', () => {
  it('in a terminal, says once on stderr that it is an MCP server on stdio; under a host, says nothing', async () => {
    const { PYTHON, PYTHON_ARGS } = await import('../helpers/python.js');
    const dir = tempDir();
    const notice = 'mcp-progress mcp: this is an MCP server on stdio';
    const terminal = spawn(
      PYTHON,
      [
        ...PYTHON_ARGS,
        join(ROOT, 'test/fixtures/in_terminal.py'),
        notice,
        '\\x04', // Ctrl-D: the end of input, and so of the server
        process.execPath,
        BIN,
        'mcp',
        '--runtime-dir',
        dir,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MCP_PROGRESS_SOCKET: '' } },
    );
    const output = collectOutput(terminal);
    // The fixture waits for the notice, ends the input with Ctrl-D, and exits 1 if either fails.
    expect(await waitForExit(terminal), output.stdout() + output.stderr()).toBe(0);
    expect(output.stdout()).toMatch(/\[exit 0\]\n$/);
    expect(output.stdout().split(notice).length - 1).toBe(1);
    // With stdin not a terminal (a host's pipe; here it ends at once), not a word on stderr.
    const piped = await runCli(['mcp', '--runtime-dir', tempDir()]);
    expect(piped).toMatchObject({ code: 0, stderr: '' });
  });
});
