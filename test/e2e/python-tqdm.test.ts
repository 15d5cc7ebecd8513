/** The Python client's tqdm adapter and context manager, run as real Python processes. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cleanupAll, eventually, ROOT, waitForExit } from '../helpers/daemon.js';
import { useWatchedBridge } from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { tool } from '../helpers/tools.js';

afterAll(() => cleanupAll());
// Each test starts several real processes; on a machine shared with other test runs that can take long.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const tqdm = tool('tqdm', {
  debian: 'python3-tqdm',
  probe: [PYTHON, ...PYTHON_ARGS, '-c', 'import tqdm'],
  why: `the real tqdm for ${PYTHON}`,
});

const bridge = useWatchedBridge();
const { progressOf, doneOf } = bridge;

interface Script {
  token: string;
  stdout: () => string;
  exit: Promise<number | null>;
}

/** Runs a mode of py_tqdm.py with a fresh token that a gateway already watches. */
async function runScript(mode: string, steps = 50, pythonArgs = PYTHON_ARGS): Promise<Script> {
  const token = await bridge.watched(`tqdm-${mode}`);
  const child = spawn(
    PYTHON,
    [...pythonArgs, join(ROOT, 'test/fixtures/py_tqdm.py'), mode, String(steps)],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        MCP_PROGRESS_SOCKET: bridge.daemon.info.socket,
        MCP_PROGRESS_TOKEN: token,
      },
    },
  );
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (t: string) => {
    stdout += t;
  });
  child.stderr.resume();
  return { token, stdout: () => stdout, exit: waitForExit(child) };
}

function expectIncreasing(values: Array<Record<string, unknown>>) {
  const numbers = values.map((v) => v.progress as number);
  for (let i = 1; i < numbers.length; i++)
    expect(numbers[i]).toBeGreaterThan(numbers[i - 1] as number);
}

describe('the tqdm adapter', () => {
  it.skipIf(tqdm.skip)(
    'wraps an iterable: one changed import publishes the loop and ends it ok at exit',
    async () => {
      tqdm.require();
      const script = await runScript('wrap');
      expect(await script.exit).toBe(0);
      expect(script.stdout()).toContain('tqdm=real');
      expect(await doneOf(script.token)).toEqual({ progressToken: script.token, status: 'ok' });
      const values = progressOf(script.token);
      expect(values.at(-1)).toMatchObject({ progress: 50, total: 50, message: 'train 50/50' });
      expectIncreasing(values);
    },
  );

  it.skipIf(tqdm.skip)('attaches to an existing tqdm bar', async () => {
    tqdm.require();
    const script = await runScript('attach', 40);
    expect(await script.exit).toBe(0);
    await doneOf(script.token);
    expect(progressOf(script.token).at(-1)).toMatchObject({
      progress: 40,
      total: 40,
      message: 'render 40/40',
    });
  });

  it('nested bars publish the outer count plus a fraction of the inner one, always increasing', async () => {
    const script = await runScript('nested', 20);
    expect(await script.exit).toBe(0);
    await doneOf(script.token);
    const values = progressOf(script.token);
    expectIncreasing(values);
    // The last message says what the last value says: 3 of 3 epochs, not "epochs 2/3" at 3/3.
    expect(values.at(-1)).toMatchObject({ progress: 3, total: 3, message: 'epochs 3/3' });
    expect(values.some((v) => !Number.isInteger(v.progress))).toBe(true);
    for (const value of values) {
      const epochs = Number(/^epochs (\d+)\/3/.exec(String(value.message))?.[1]);
      expect(epochs, JSON.stringify(value)).toBe(Math.floor(value.progress as number));
    }
    expect(values.every((v) => v.total === 3)).toBe(true);
  });

  it('bars that follow each other keep counting up', async () => {
    const script = await runScript('sequential', 30);
    expect(await script.exit).toBe(0);
    await doneOf(script.token);
    const values = progressOf(script.token);
    expectIncreasing(values);
    expect(values.at(-1)).toMatchObject({ progress: 60, total: 60, message: 'epoch 1 30/30' });
  });

  it('a cancel stops the loop with Cancelled, and the stream ends cancelled', async () => {
    const script = await runScript('until-cancelled');
    await eventually(
      () => (progressOf(script.token).length > 0 ? true : undefined),
      60_000,
      'first update',
    );
    const reply = await bridge.gateway.request('progress/cancel', {
      progressToken: script.token,
      reason: 'stop',
    });
    expect(reply.result).toEqual({ workers: 1 });
    expect(await script.exit).not.toBe(0);
    expect(await doneOf(script.token)).toEqual({
      progressToken: script.token,
      status: 'cancelled',
      message: 'stop',
    });
  });

  it('an uncaught exception ends the stream as error, with the exception as message', async () => {
    const script = await runScript('crash');
    expect(await script.exit).toBe(1);
    expect(await doneOf(script.token)).toEqual({
      progressToken: script.token,
      status: 'error',
      message: 'RuntimeError: loss is NaN',
    });
  });

  it('works without tqdm installed: the stand-in publishes and draws nothing', async () => {
    // -S: no site-packages, so `import tqdm` fails as on a bare interpreter.
    const script = await runScript('wrap', 25, [...PYTHON_ARGS, '-S']);
    expect(await script.exit).toBe(0);
    expect(script.stdout()).toContain('tqdm=fallback');
    await doneOf(script.token);
    expect(progressOf(script.token).at(-1)).toMatchObject({
      progress: 25,
      total: 25,
      message: 'train 25/25',
    });
  });
});

describe('Progress as a context manager', () => {
  it('sends done ok on a clean exit', async () => {
    const script = await runScript('context-ok', 10);
    expect(await script.exit).toBe(0);
    expect(await doneOf(script.token)).toEqual({ progressToken: script.token, status: 'ok' });
    expect(progressOf(script.token).at(-1)).toMatchObject({ progress: 10, total: 10 });
  });

  it('sends done error with the exception when the block raises', async () => {
    const script = await runScript('context-error');
    expect(await script.exit).toBe(1);
    expect(await doneOf(script.token)).toEqual({
      progressToken: script.token,
      status: 'error',
      message: 'ValueError: bad batch',
    });
  });

  for (const [mode, exitCode, done] of [
    ['context-exit-0', 0, { status: 'ok' }],
    ['context-exit-none', 0, { status: 'ok' }],
    ['context-exit-3', 3, { status: 'error', message: 'exited with code 3' }],
    ['context-exit-text', 1, { status: 'error', message: 'exited with code 1: disk full' }],
  ] as const) {
    it(`sends done ${done.status} for sys.exit inside the block (${mode})`, async () => {
      const script = await runScript(mode);
      expect(await script.exit).toBe(exitCode);
      expect(await doneOf(script.token)).toEqual({ progressToken: script.token, ...done });
    });
  }

  it('sends done cancelled when the block is interrupted (KeyboardInterrupt, as Cancelled is)', async () => {
    const script = await runScript('context-interrupt');
    expect(await script.exit).not.toBe(0);
    expect(await doneOf(script.token)).toEqual({
      progressToken: script.token,
      status: 'cancelled',
    });
  });
});
