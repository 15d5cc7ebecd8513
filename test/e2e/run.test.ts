/** `mcp-progress run`: the real binary around real commands, watched by a real gateway. */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PROFILE_NAMES } from '../../src/cli/progress-profiles.js';
import {
  BIN,
  collectOutput,
  eventually,
  PATIENT_DAEMON_ARGS,
  ROOT,
  slowProcessTests,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { useWatchedBridge } from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { tool } from '../helpers/tools.js';

const runCli = slowProcessTests();

const bridge = useWatchedBridge(PATIENT_DAEMON_ARGS);
const { of, progressOf, doneOf } = bridge;

/** The stream's one `done` was delivered, with this status and message (none when omitted). */
async function expectDone(token: string, status: string, message?: string): Promise<void> {
  const done = { progressToken: token, status, ...(message === undefined ? {} : { message }) };
  expect(await doneOf(token)).toEqual(done);
}

const watched = bridge.watched;
const socketEnv = () => ({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket });

/** Starts run in the background (stdin not a terminal), for signal tests. */
function startRun(token: string, args: string[]) {
  const child = spawn(process.execPath, [BIN, 'run', '--token', token, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MCP_PROGRESS_TOKEN: '', ...socketEnv() },
  });
  return { child, ...collectOutput(child), exit: waitForExit(child) };
}

/** Runs `run --token TOKEN ARGS` to its end against the test's daemon. */
const runFor = (token: string, args: string[]) =>
  runCli(['run', '--token', token, ...args], socketEnv());

/** Runs `run --token TOKEN ARGS` to its end, which must be exit 0 and done ok; returns its output and what the stream showed. */
async function runToOk(token: string, args: string[]) {
  const result = await runFor(token, args);
  expect(result.code, result.stderr).toBe(0);
  await expectDone(token, 'ok');
  return { result, values: progressOf(token) };
}

/** Every value's progress is above the one before it. */
function expectRising(values: Array<{ progress?: unknown }>): void {
  const numbers = values.map((v) => v.progress as number);
  for (let i = 1; i < numbers.length; i++)
    expect(numbers[i], JSON.stringify(values)).toBeGreaterThan(numbers[i - 1] as number);
}

/** Waits until run's stdout shows TEXT. */
async function untilPrinted(run: ReturnType<typeof startRun>, text: string): Promise<void> {
  await eventually(() => (run.stdout().includes(text) ? true : undefined), 60_000, text);
}

/** A cancel from the MCP side reaches run, its one worker, which stops CMD with SIGTERM: exit 143. */
async function cancelRun(token: string, reason: string, run: ReturnType<typeof startRun>) {
  const reply = await bridge.gateway.request('progress/cancel', { progressToken: token, reason });
  expect(reply.result).toEqual({ workers: 1 });
  expect(await run.exit).toBe(143);
}

/**
 * A file for a background program's pid; the program is killed however the test ends (a timeout
 * too), so that none outlives it.
 */
function killedAtEnd(name: string): string {
  const pidFile = join(tempDir(), `${name}.pid`);
  onTestFinished(() => {
    const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0;
    if (pid > 0 && running(pid)) process.kill(pid, 'SIGKILL');
  });
  return pidFile;
}

describe('mcp-progress run', () => {
  it('has help', async () => {
    const help = await runCli(['run', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(
      /^Usage: mcp-progress run \[--token T\] \[--parse\[=NAME\]\] -- CMD/,
    );
    for (const name of PROFILE_NAMES) expect(help.stdout).toContain(`\n  ${name}`);
  });

  it('exits 2 without a command', async () => {
    const result = await runCli(['run', '--token', 'x']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('no command');
  });

  it("sets the worker's environment, passes the exit code through and publishes done ok on 0", async () => {
    const token = await watched('run-ok');
    const result = await runFor(token, [
      '--',
      'sh',
      '-c',
      'echo "$MCP_PROGRESS_TOKEN $MCP_PROGRESS_SOCKET"',
    ]);
    expect(result).toMatchObject({
      code: 0,
      stdout: `${token} ${bridge.daemon.info.socket}\n`,
      stderr: '',
    });
    await expectDone(token, 'ok');
    expect(progressOf(token)).toEqual([]);
  });

  it('publishes done error with the exit code when the command fails', async () => {
    const token = await watched('run-fail');
    const result = await runFor(token, ['--', 'sh', '-c', 'exit 3']);
    expect(result.code).toBe(3);
    await expectDone(token, 'error', 'sh exited with code 3');
  });

  it('generates a token, prints it on stderr, and the command publishes to it', async () => {
    const result = await runCli(
      ['run', '--', process.execPath, BIN, 'publish', '--progress', '7', '--total', '9'],
      socketEnv(),
    );
    expect(result.code).toBe(0);
    const token = /token (run-[\w-]+) \(watch it with: mcp-progress tail run-[\w-]+\)/.exec(
      result.stderr,
    )?.[1];
    expect(token).toBeDefined();
    const list = (await bridge.gateway.request('progress/list')).result as {
      streams: Array<{ progressToken: string; state: string; last?: unknown; status?: string }>;
    };
    expect(list.streams.find((s) => s.progressToken === token)).toMatchObject({
      state: 'done',
      status: 'ok',
      last: { progressToken: token, progress: 7, total: 9 },
    });
  });

  it('uses $MCP_PROGRESS_TOKEN when no --token is given, and prints nothing then', async () => {
    const token = await watched('run-env');
    const result = await runCli(['run', '--', 'sh', '-c', 'echo "$MCP_PROGRESS_TOKEN"'], {
      ...socketEnv(),
      MCP_PROGRESS_TOKEN: token,
    });
    expect(result).toMatchObject({ code: 0, stdout: `${token}\n`, stderr: '' });
    await doneOf(token);
  });

  it("leaves the stream alone when the command's own client already ended it", async () => {
    const token = await watched('run-inner-done');
    const result = await runFor(token, [
      '--',
      process.execPath,
      BIN,
      'publish',
      '--done',
      '--status',
      'cancelled',
    ]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    await expectDone(token, 'cancelled');
    expect(of(token).filter((n) => n.method === 'notifications/progress/done')).toHaveLength(1);
  });

  it('takes the command without "--" too, its flags left alone', async () => {
    const result = await runFor('no-dashes', ['sh', '-c', 'echo -n hi']);
    expect(result).toMatchObject({ code: 0, stdout: 'hi' });
  });

  it('exits 127 and publishes done error when the command does not exist', async () => {
    const token = await watched('run-missing');
    const result = await runFor(token, ['--', 'no-such-command-xyz']);
    expect(result.code).toBe(127);
    expect(result.stderr).toContain('command not found: no-such-command-xyz');
    await expectDone(token, 'error', 'command not found: no-such-command-xyz');
  });

  it('runs the command all the same when no daemon is there, and says so', async () => {
    const result = await runCli(
      ['run', '--token', 'lonely', '--', 'sh', '-c', 'echo ran; exit 4'],
      {
        MCP_PROGRESS_SOCKET: join(tempDir(), 'bridge.sock'),
      },
    );
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('ran\n');
    // One line: the done that could not be delivered adds nothing to "no daemon".
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^mcp-progress run: no daemon socket at .*mcp-progress daemon/),
    ]);
  });

  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    it(`forwards ${signal} to the command and exits with its code`, async () => {
      const token = await watched(`run-${signal}`);
      const name = signal.slice(3);
      const run = startRun(token, [
        '--',
        'sh',
        '-c',
        `trap 'echo "got ${name}"; exit 7' ${name}; echo ready; while :; do sleep 0.05; done`,
      ]);
      await untilPrinted(run, 'ready');
      run.child.kill(signal);
      expect(await run.exit).toBe(7);
      expect(run.stdout()).toContain(`got ${name}`);
      await expectDone(token, 'error', 'sh exited with code 7');
    });
  }

  it('exits 128 + N when a signal N kills the command', async () => {
    const token = await watched('run-killed');
    const result = await runFor(token, ['--', 'sh', '-c', 'kill -KILL $$']);
    expect(result.code).toBe(137);
    await expectDone(token, 'error', 'sh was killed by SIGKILL');
  });
});

describe('mcp-progress run --parse', () => {
  const script = [
    'printf "header line\\n"',
    'for i in 1 2 3 4 5 6 7 8 9 10; do',
    '  printf "\\rtrain: %3d%%|##########| %d/10 [00:01<00:02, 3.2it/s]" $((i*10)) $i >&2',
    '  sleep 0.02',
    'done',
    'printf "\\n" >&2',
    'printf "frame 3/4 written\\nall done\\n"',
  ].join('\n');

  it('publishes what the output shows, and passes the output through unchanged', async () => {
    const token = await watched('parse');
    const { result, values } = await runToOk(token, ['--parse', '--', 'sh', '-c', script]);
    expect(result.stdout).toBe('header line\nframe 3/4 written\nall done\n');
    const expectedStderr = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
      .map(
        (i) => `\rtrain: ${String(i * 10).padStart(3)}%|##########| ${i}/10 [00:01<00:02, 3.2it/s]`,
      )
      .join('');
    expect(result.stderr).toBe(`${expectedStderr}\n`);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 10,
      total: 10,
      message: 'train',
    });
    // "frame 3/4" came after 10/10: not an increase, so not published (the daemon would refuse it).
    expect(values.map((v) => v.progress)).toEqual(
      [...values.map((v) => v.progress as number)].sort((a, b) => a - b),
    );
  });

  it('passes 20 MB of output without a line break through, every byte of it', async () => {
    const token = await watched('parse-no-newlines');
    const child = spawn(
      process.execPath,
      [BIN, 'run', '--token', token, '--parse', '--', 'sh', '-c', 'head -c 20000000 /dev/zero'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...socketEnv() } },
    );
    let bytes = 0;
    let nonZero = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      for (const byte of chunk) if (byte !== 0) nonZero++;
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    expect(await waitForExit(child)).toBe(0);
    expect({ bytes, nonZero, stderr }).toEqual({
      bytes: 20_000_000,
      nonZero: 0,
      // Nothing in it is progress, and run says so once.
      stderr:
        "mcp-progress run --parse: no progress found in sh's output; name a profile with --parse=NAME (ffmpeg, tqdm, ninja, blender, rsync, wget, curl, pip, apt, dpkg, docker, generic)\n",
    });
    await expectDone(token, 'ok');
    expect(progressOf(token)).toEqual([]);
  });

  it('never joins a half line of stdout with a half line of stderr', async () => {
    const token = await watched('parse-two-streams');
    const { result, values } = await runToOk(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      'printf "batch size 32"; sleep 0.01; printf "/64 done\\n" >&2; echo',
    ]);
    expect(result.stdout).toBe('batch size 32\n');
    expect(result.stderr).toMatch(
      /^\/64 done\nmcp-progress run --parse: no progress found in sh's output; /,
    );
    // Glued together, the two halves read "batch size 32/64 done": progress 32 of 64 that no line shows.
    expect(values).toEqual([]);
  });

  it('exits and publishes done when CMD exits, though a child it left running holds the output open', async () => {
    const token = await watched('parse-background');
    const pidFile = killedAtEnd('background');
    // The sleep inherits sh's stdout and stderr (run's pipes) and outlives this test's timeout:
    // a run that waits for the pipes to close fails it.
    const run = startRun(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      `sleep 60 & echo $! > ${pidFile}; echo started; exit 3`,
    ]);
    expect(await run.exit).toBe(3);
    expect(run.stdout()).toBe('started\n');
    await expectDone(token, 'error', 'sh exited with code 3');
  }, 30_000);

  it('passes through, and reads, what a program CMD left running writes after CMD exited, until it closes the output', async () => {
    const token = await watched('parse-grandchild');
    // The subshell outlives sh by a second, writing every 0.1 s to the stdout it inherited.
    const { result, values } = await runToOk(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      '(for i in 1 2 3 4 5 6 7 8 9 10; do echo "later step $i/10"; sleep 0.1; done) & echo started',
    ]);
    const later = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `later step ${i}/10\n`).join('');
    expect(result.stdout).toBe(`started\n${later}`);
    expect(values.at(-1)).toMatchObject({ progress: 10, total: 10 });
  });

  it('passes every byte CMD wrote before it exited through to a slow reader, however long that takes', async () => {
    const token = await watched('parse-slow-reader');
    // A real pipe to a reader taking 4 KiB every 20 ms: sh exits with a good part of its 400 kB still in
    // the pipes, and run takes more than a second after that to pass them on.
    const reader = [
      'import os, sys, time',
      'n = 0',
      'while True:',
      '    b = os.read(0, 4096)',
      '    if not b: break',
      '    n += len(b)',
      '    time.sleep(0.02)',
      'print(n)',
    ].join('\n');
    const quote = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;
    const pipeline = [
      [
        process.execPath,
        BIN,
        'run',
        '--token',
        token,
        '--parse',
        '--',
        'sh',
        '-c',
        'head -c 400000 /dev/zero',
      ],
      [PYTHON, ...PYTHON_ARGS, '-c', reader],
    ]
      .map((words) => words.map(quote).join(' '))
      .join(' | ');
    const child = spawn('sh', ['-c', pipeline], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_TOKEN: '', ...socketEnv() },
    });
    const output = collectOutput(child);
    expect(await waitForExit(child), output.stderr()).toBe(0);
    expect(output.stdout()).toBe('400000\n');
    await expectDone(token, 'ok');
  });

  it('closes the output 5 s after CMD exited when a program it left running never stops writing', async () => {
    const token = await watched('parse-chatty-background');
    const pidFile = killedAtEnd('chatty');
    const run = startRun(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      `(while :; do echo background; done) & echo $! > ${pidFile}; echo started`,
    ]);
    expect(await run.exit).toBe(0);
    // Not a regular expression: 5 s of output is too long for one (its stack overflowed).
    const lines = run.stdout().split('\n');
    expect(lines).toContain('started');
    const others = lines.filter((line) => line !== 'started');
    expect(others.length).toBeGreaterThan(1);
    // Each is the background program's line, the last perhaps cut where the output closed.
    expect(others.filter((line) => !'background'.startsWith(line))).toEqual([]);
    await expectDone(token, 'ok');
  }, 30_000);

  it('a cancel reaches run without --parse, before the command has published anything', async () => {
    const token = await watched('plain-cancel');
    const run = startRun(token, ['--', 'sh', '-c', 'while :; do sleep 0.05; done']);
    const reply = await eventually(
      async () => {
        const answer = await bridge.gateway.request('progress/cancel', {
          progressToken: token,
          reason: 'stop',
        });
        return (answer.result as { workers: number }).workers === 1 ? answer : undefined;
      },
      60_000,
      'run to claim its token',
    );
    expect(reply.result).toEqual({ workers: 1 });
    expect(await run.exit).toBe(143);
    await expectDone(token, 'cancelled', 'sh was killed by SIGTERM');
  });

  it('a cancel from the MCP side stops the command with SIGTERM and ends the stream cancelled', async () => {
    const token = await watched('parse-cancel');
    const run = startRun(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      'echo "step 1/100"; while :; do sleep 0.05; done',
    ]);
    await eventually(
      () => (progressOf(token).length > 0 ? true : undefined),
      60_000,
      'first progress',
    );
    await cancelRun(token, 'stop it', run);
    await expectDone(token, 'cancelled', 'sh was killed by SIGTERM');
  });
});

/** True while the process runs: gone, or a zombie nobody reaped, is not running. */
function running(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return false;
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(stat, 'utf8'));
  } catch {
    return false;
  }
}

describe('mcp-progress run signals the process group of CMD', () => {
  /** Starts run around sh, whose Python grandchild in the foreground writes its pid and sleeps; returns once it runs. */
  async function withGrandchild(token: string) {
    const pidFile = join(tempDir(), 'grandchild.pid');
    const python = `${PYTHON} -I -c 'import os, time; open("${pidFile}", "w").write(str(os.getpid())); time.sleep(600)'`;
    const grandchildPid = () =>
      eventually(
        () => {
          const text = existsSync(pidFile) ? readFileSync(pidFile, 'utf8') : '';
          return text === '' ? undefined : Number(text);
        },
        60_000,
        'the grandchild to write its pid',
      );
    const run = startRun(token, ['--', 'sh', '-c', `${python}; echo after`]);
    const pid = await grandchildPid();
    expect(running(pid)).toBe(true);
    const stopped = () =>
      eventually(() => (running(pid) ? undefined : true), 60_000, 'the grandchild to stop');
    return { run, stopped };
  }

  it('a cancel stops the grandchild too, and run says the cancel stopped CMD', async () => {
    const token = await watched('group-cancel');
    const { run, stopped } = await withGrandchild(token);
    await cancelRun(token, 'host stopped it', run);
    expect(run.stdout()).not.toContain('after');
    await stopped();
    expect(run.stderr()).toContain(
      'mcp-progress run: cancelled from the MCP side (host stopped it): stopping sh with SIGTERM',
    );
    expect(run.stderr()).toContain(
      'mcp-progress run: the cancel stopped sh: sh was killed by SIGTERM',
    );
    await expectDone(token, 'cancelled', 'sh was killed by SIGTERM');
  });

  it('a signal sent to run reaches the grandchild too', async () => {
    const token = await watched('group-signal');
    const { run, stopped } = await withGrandchild(token);
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(143);
    await stopped();
    await expectDone(token, 'error', 'sh was killed by SIGTERM');
  });

  it('Ctrl-C (SIGINT) ends the stream cancelled, as the Python client reports a KeyboardInterrupt', async () => {
    const token = await watched('run-ctrl-c');
    const run = startRun(token, [
      '--',
      PYTHON,
      ...PYTHON_ARGS,
      '-c',
      'import time; print("ready", flush=True); time.sleep(600)',
    ]);
    await untilPrinted(run, 'ready');
    run.child.kill('SIGINT');
    // Python re-raises an uncaught KeyboardInterrupt as death by SIGINT: 128 + 2.
    expect(await run.exit).toBe(130);
    await expectDone(token, 'cancelled', `${PYTHON} was killed by SIGINT`);
  });
});

const tqdm = tool('python3-tqdm', {
  debian: 'python3-tqdm',
  probe: [PYTHON, ...PYTHON_ARGS, '-c', 'import tqdm'],
  why: 'run --parse on real tqdm bars',
});

describe.skipIf(tqdm.skip)('mcp-progress run --parse on real tqdm output', () => {
  beforeAll(() => tqdm.require());

  /** Runs `run --parse` around a Python script that has `time` and `tqdm` imported. */
  const parseTqdm = (token: string, lines: string[]) =>
    runToOk(token, [
      '--parse',
      '--',
      PYTHON,
      ...PYTHON_ARGS,
      '-c',
      ['import time', 'from tqdm import tqdm', ...lines].join('\n'),
    ]);

  it('a bar of bytes and then a bar of steps are two halves, not one total of 2000003 (issue 29)', async () => {
    const token = await watched('parse-two-units');
    const { values } = await parseTqdm(token, [
      "with tqdm(total=2_000_000, unit='B', unit_scale=True, desc='download', mininterval=0) as bar:",
      '    for _ in range(4):',
      '        time.sleep(0.05)',
      '        bar.update(500_000)',
      "for step in tqdm(range(3), desc='unpack', mininterval=0):",
      '    time.sleep(0.05)',
    ]);
    expect(values.some((v) => v.total === 2_000_003)).toBe(false);
    expect(values.filter((v) => v.total === 2_000_000).length).toBeGreaterThan(0);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 4_000_000,
      total: 4_000_000,
      message: 'unpack 3/3',
    });
  });

  it('nested bars count as the outer bar plus a fraction of the inner one; a later bar counts on', async () => {
    const token = await watched('parse-nested-tqdm');
    const { result, values } = await parseTqdm(token, [
      "for epoch in tqdm(range(3), desc='epochs', mininterval=0):",
      "    for batch in tqdm(range(4), desc='batch', leave=False, mininterval=0):",
      '        time.sleep(0.12)',
      "for step in tqdm(range(5), desc='eval', mininterval=0):",
      '    time.sleep(0.12)',
    ]);
    // The output passes through: tqdm drew its bars on stderr.
    expect(result.stderr).toContain('epochs: 100%');
    expectRising(values);
    const epochs = values.filter((v) => v.total === 3);
    // Every epoch counted, each with its batches as a fraction: never 100% after the first.
    for (const epoch of [0, 1, 2]) {
      expect(
        epochs.some((v) => (v.progress as number) > epoch && (v.progress as number) < epoch + 1),
        `a value inside epoch ${epoch + 1}: ${JSON.stringify(values)}`,
      ).toBe(true);
    }
    expect(epochs.find((v) => (v.progress as number) > 1)?.message).toMatch(
      /^epochs 1\/3 · batch \d\/4$/,
    );
    // The evaluation bar after the finished epochs counts on from 3: 3 + 5 of 3 + 5.
    expect(values.every((v) => v.total === 3 || v.total === 8)).toBe(true);
    expect(values.at(-1)).toEqual({ progressToken: token, progress: 8, total: 8, message: 'eval' });
  });

  it.each([
    ['leave=False', 'leave=False'],
    ['position=1, the inner bar left on screen', 'position=1'],
  ])(
    'a count bar nested in a count bar (%s) counts the outer bar only, never the sum of both',
    async (_, inner) => {
      const token = await watched(`parse-nested-counts-${inner}`);
      // Generators: tqdm knows no length, so both bars are counts ("epoch: 2it", "batch: 3it").
      const { result, values } = await parseTqdm(token, [
        'def items(n):',
        '    yield from range(n)',
        "for epoch in tqdm(items(3), desc='epoch', mininterval=0):",
        `    for batch in tqdm(items(4), desc='batch', ${inner}, mininterval=0):`,
        '        time.sleep(0.05)',
      ]);
      expect(result.stderr).toContain('batch: 4it');
      expectRising(values);
      // The epochs, as tqdm's outer bar counts them; the batches (12 in all) are never added to them.
      const epochs = values.map((v) => v.progress);
      expect(
        epochs.every((n) => n === 0 || n === 1 || n === 2 || n === 3),
        `${epochs}`,
      ).toBe(true);
      expect(values.at(-1)).toEqual({ progressToken: token, progress: 3, message: 'epoch' });
    },
  );
});

describe.skipIf(tqdm.skip)('mcp-progress run --parse on real tqdm bars given positions', () => {
  beforeAll(() => tqdm.require());

  it('an inner bar reset each epoch, closed after the outer one, ends at 3 of 3 epochs, not 10 of 10', async () => {
    const token = await watched('parse-position-bars');
    const result = await runFor(token, [
      '--parse',
      '--',
      PYTHON,
      ...PYTHON_ARGS,
      '-c',
      [
        'import time',
        'from tqdm import tqdm',
        "epochs = tqdm(total=3, desc='epoch', position=0, mininterval=0)",
        "batches = tqdm(total=4, desc='batch', position=1, mininterval=0)",
        'for epoch in range(3):',
        '    batches.reset()',
        '    for batch in range(4):',
        '        time.sleep(0.03)',
        '        batches.update(1)',
        '    epochs.update(1)',
        // Each close redraws its finished bar once more, the inner one at the outer one's place.
        'batches.close()',
        'epochs.close()',
      ].join('\n'),
    ]);
    expect(result.code, result.stderr).toBe(0);
    await expectDone(token, 'ok');
    const values = progressOf(token);
    expectRising(values);
    expect(
      values.every((v) => v.total === 3),
      JSON.stringify(values),
    ).toBe(true);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 3,
      total: 3,
      message: 'epoch 3/3',
    });
  });
});

const ffmpeg = tool('ffmpeg', {
  debian: 'ffmpeg',
  probe: ['ffmpeg', '-version'],
  why: 'run --parse on a real encode',
});

describe.skipIf(ffmpeg.skip)('mcp-progress run --parse on a real ffmpeg encode', () => {
  beforeAll(() => ffmpeg.require());

  it('detects ffmpeg, adds its progress pipe, and rises steadily to 5 s of 5 s, reached only at the end', async () => {
    const token = await watched('parse-ffmpeg');
    const out = join(tempDir(), 'out.mp4');
    // -re reads the 5 s synthetic input at its own rate: the encode takes about 5 s on any machine.
    const command = [
      'ffmpeg',
      '-nostdin',
      '-y',
      '-re',
      '-f',
      'lavfi',
      '-i',
      'testsrc=duration=5:size=320x180:rate=30',
      '-c:v',
      'libx264',
      out,
    ];
    const { result, values } = await runToOk(token, ['--parse', '--', ...command]);
    // ffmpeg's own output passes through, and the progress pipe's key=value lines stay run's.
    expect(result.stderr).toContain('Duration: N/A');
    expect(result.stderr).not.toContain('out_time_us=');
    expect(result.stdout).toBe('');
    expectRising(values);
    expect(values.every((v) => v.total === 5)).toBe(true);
    for (const value of values) expect(value.message).toMatch(/^frame \d+, [\d.]+ s of 5 s$/);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 5,
      total: 5,
      message: 'frame 150, 5 s of 5 s',
    });
    // Steadily: several values on the way (ffmpeg reports every 0.5 s), none at the end before the end.
    const before = values.slice(0, -1);
    expect(before.length, JSON.stringify(values)).toBeGreaterThanOrEqual(5);
    expect(before.every((v) => (v.progress as number) < 5)).toBe(true);
  });

  it('--parse=ffmpeg behind sh reads its status lines on stderr, no pipe added, 1 s of 1 s at the end', async () => {
    const token = await watched('parse-ffmpeg-sh');
    const out = join(tempDir(), 'sh.mp4');
    const script = `ffmpeg -nostdin -y -f lavfi -i testsrc=duration=1:size=160x90:rate=30 -c:v libx264 ${out}`;
    const { values } = await runToOk(token, ['--parse=ffmpeg', '--', 'sh', '-c', script]);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 1,
      total: 1,
      message: 'frame 30, 1 s of 1 s',
    });
    expect(values.slice(0, -1).every((v) => (v.progress as number) < 1)).toBe(true);
  });

  it('says once on stderr when nothing in the output is progress, naming the profile to try', async () => {
    const token = await watched('parse-nothing');
    // Behind sh, ffmpeg is not detected; with -nostats -loglevel error it prints nothing at all, so
    // the line comes from what sh echoes.
    const out = join(tempDir(), 'quiet.mp4');
    const script = `echo starting; ffmpeg -nostdin -nostats -loglevel error -y -f lavfi -i testsrc=duration=1 ${out}; echo finished`;
    const { result, values } = await runToOk(token, ['--parse', '--', 'sh', '-c', script]);
    expect(result.stdout).toBe('starting\nfinished\n');
    expect(result.stderr).toBe(
      "mcp-progress run --parse: no progress found in sh's output; try --parse=ffmpeg\n",
    );
    expect(values).toEqual([]);
  });
});

describe('mcp-progress run --parse while nothing is progress', () => {
  it('says so once, 10 s into the output, while CMD still runs', async () => {
    const token = await watched('parse-nothing-yet');
    const run = startRun(token, [
      '--parse',
      '--',
      'sh',
      '-c',
      'echo "rsync is not here"; while :; do sleep 0.05; done',
    ]);
    const notice =
      "mcp-progress run --parse: no progress found in sh's output yet; try --parse=rsync\n";
    await eventually(
      () => (run.stderr().includes(notice) ? true : undefined),
      60_000,
      'the notice',
    );
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(143);
    // Once: not again when CMD ends.
    expect(run.stderr()).toBe(notice);
    await expectDone(token, 'error', 'sh was killed by SIGTERM');
  });
});

describe('mcp-progress run --parse=NAME', () => {
  it('refuses a profile it does not have, naming those it has', async () => {
    const result = await runCli(['run', '--parse=nope', '--', 'true']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      '--parse=nope: no such profile (profiles: ffmpeg, tqdm, ninja,',
    );
  });

  it('reads with the profile named, whatever the command is called', async () => {
    const token = await watched('parse-named');
    const script = 'for i in 1 2 3 4; do echo "[$i/4] STEP s$i"; sleep 0.05; done';
    const { values } = await runToOk(token, ['--parse=ninja', '--', 'sh', '-c', script]);
    expect(values.at(-1)).toEqual({
      progressToken: token,
      progress: 4,
      total: 4,
      message: 'step 4 of 4: STEP s4',
    });
  });
});

describe('mcp-progress run in a terminal (a real pseudo-terminal, from Python)', () => {
  /** Runs `run ARGS` on a terminal; types `typed` once `expected` shows. */
  async function inTerminal(expected: string, typed: string, args: string[]) {
    const child = spawn(
      PYTHON,
      [
        ...PYTHON_ARGS,
        join(ROOT, 'test/fixtures/in_terminal.py'),
        expected,
        typed,
        process.execPath,
        BIN,
        'run',
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...socketEnv() } },
    );
    const output = collectOutput(child);
    expect(await waitForExit(child), output.stdout() + output.stderr()).toBe(0);
    return output.stdout();
  }

  it('CMD reads what is typed on the terminal, though it runs in a session of its own', async () => {
    const token = await watched('run-typed');
    const screen = await inTerminal('ready', 'hello\\n', [
      '--token',
      token,
      '--',
      'sh',
      '-c',
      'echo ready; read line; echo "got:$line"',
    ]);
    expect(screen).toContain('got:hello');
    expect(screen).toMatch(/\[exit 0\]\n$/);
    await expectDone(token, 'ok');
  });

  it('Ctrl-C on the terminal reaches CMD through run, and the stream ends cancelled', async () => {
    const token = await watched('run-terminal-ctrl-c');
    const screen = await inTerminal('ready', '\\x03', [
      '--token',
      token,
      '--',
      PYTHON,
      ...PYTHON_ARGS,
      '-c',
      'import time; print("ready", flush=True); time.sleep(600)',
    ]);
    expect(screen).toContain('KeyboardInterrupt');
    expect(screen).toMatch(/\[exit 130\]\n$/);
    await expectDone(token, 'cancelled', `${PYTHON} was killed by SIGINT`);
  });
});
