/**
 * The documented snippets, run as written against a real daemon: the README's
 * Python snippet, and the shell one-liners (mcp-progress publish, and printf
 * with socat) that README.md and docs/CLIENTS.md both show.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { cleanupAll, eventually, PATIENT_DAEMON_ARGS, ROOT } from '../helpers/daemon.js';
import { useWatchedBridge } from '../helpers/gateway.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';
import { README, readmeBlockAfter } from '../helpers/readme.js';
import { tool } from '../helpers/tools.js';

afterAll(() => cleanupAll());
// Each test starts several real processes; on a machine shared with other test runs that can take long.
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const clientsDoc = readFileSync(join(ROOT, 'docs/CLIENTS.md'), 'utf8');

/** The one line of README.md that starts with `start`; it must appear in docs/CLIENTS.md too. */
function documentedLine(start: string): string {
  const lines = README.split('\n').filter((line) => line.startsWith(start));
  expect(lines, `README lines starting with ${start}`).toHaveLength(1);
  const line = lines[0] ?? '';
  expect(clientsDoc).toContain(line);
  return line;
}

const bridge = useWatchedBridge(PATIENT_DAEMON_ARGS);
const { progressOf, doneOf } = bridge;

const watched = bridge.watched;

/** Runs a command with the worker environment, `mcp-progress` and this Node first on PATH; resolves stdout as bytes. */
function run(
  file: string,
  args: string[],
  token: string,
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PATH: `${dirname(process.execPath)}:${join(ROOT, 'bin')}:${process.env.PATH ?? ''}`,
        MCP_PROGRESS_SOCKET: bridge.daemon.info.socket,
        MCP_PROGRESS_TOKEN: token,
        ...extraEnv,
      },
    });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.setEncoding('utf8').on('data', (t: string) => {
      stderr += t;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} ${args.join(' ')} timed out; stderr: ${stderr}`));
    }, 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(chunks), stderr });
    });
  });
}

describe('the README Python snippet', () => {
  it('runs as written with the one-file client, and ends the stream ok', async () => {
    const token = await watched('readme-py');
    const snippet = readmeBlockAfter('Publish from Python with the one-file client', 'python');
    expect(snippet).toContain('from mcp_progress import Progress');
    // The file "dropped next to the script": here, put on sys.path.
    const program = `import sys; sys.path.insert(0, ${JSON.stringify(join(ROOT, 'clients/python'))})\n${snippet}`;
    const result = await run(PYTHON, [...PYTHON_ARGS, '-c', program], token);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(await doneOf(token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(token).at(-1)).toEqual({
      progressToken: token,
      progress: 100,
      total: 100,
      message: 'step 100',
    });
  });
});

describe('the documented shell one-liners', () => {
  it('the mcp-progress publish loop, and done', async () => {
    const token = await watched('sh-publish');
    const loop = documentedLine('for i in $(seq 1 100); do render_frame');
    const done = documentedLine('mcp-progress publish --done --status ok');
    // Three frames rather than a hundred: each publish starts a Node process.
    const shortLoop = loop.replace('seq 1 100', 'seq 1 3').replace('--total 100', '--total 3');
    expect(shortLoop).not.toBe(loop);
    const result = await run('sh', ['-c', `render_frame() { :; }\n${shortLoop}\n${done}`], token);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(await doneOf(token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(token)).toEqual(
      [1, 2, 3].map((i) => ({
        progressToken: token,
        progress: i,
        total: 3,
        message: `frame ${i}`,
      })),
    );
  });

  const socat = tool('socat', {
    debian: 'socat',
    probe: ['socat', '-V'],
    why: 'the printf | socat snippets of the shell client',
  });

  it.skipIf(socat.skip)('printf | socat writes a progress frame byte for byte', async () => {
    socat.require();
    const token = await watched('sh-socat');
    const line = documentedLine(`printf '{"type":"progress"`);
    const result = await run('sh', ['-c', line], token);
    expect(result.code).toBe(0);
    await eventually(
      () => (progressOf(token).length === 1 ? true : undefined),
      60_000,
      'the frame',
    );
    expect(progressOf(token)).toEqual([{ progressToken: token, progress: 40, total: 100 }]);
  });

  it.skipIf(socat.skip)("printf | socat shows the daemon's exact answer to done", async () => {
    socat.require();
    const token = await watched('sh-socat-done');
    const line = documentedLine(`printf '{"type":"done"`);
    expect(line.endsWith(' | od -c')).toBe(true);
    const raw = await run('sh', ['-c', line.slice(0, -' | od -c'.length)], token);
    expect(raw.stdout.toString('utf8')).toBe('{"type":"ack","data":{"seq":1}}\f');
    expect(await doneOf(token)).toEqual({ progressToken: token, status: 'ok' });
    // As written, od -c shows the same bytes, the form feed as \f.
    const token2 = await watched('sh-socat-od');
    const shown = (await run('sh', ['-c', line], token2)).stdout.toString('utf8');
    expect(shown.replace(/^\d+ */gm, '').replace(/\s+/g, '')).toContain(
      '{"type":"ack","data":{"seq":1}}\\f',
    );
  });

  it.skipIf(socat.skip)(
    'examples/render.sh sends its frames over one socat connection, under run',
    async () => {
      socat.require();
      const token = await watched('render-socat');
      const result = await run(
        process.execPath,
        [
          join(ROOT, 'bin/mcp-progress'),
          'run',
          '--token',
          token,
          '--',
          'sh',
          join(ROOT, 'examples/render.sh'),
          '5',
        ],
        token,
        { RENDER_DELAY: '0.01' },
      );
      expect(result.code).toBe(0);
      expect(await doneOf(token)).toEqual({ progressToken: token, status: 'ok' });
      expect(progressOf(token).map((p) => p.progress)).toEqual([1, 2, 3, 4, 5]);
      expect(result.stderr).toContain('{"type":"ack","data":{"seq":1}}');
      expect(bridge.daemon.stderr()).not.toContain('rejected');
    },
  );

  it('examples/render.sh falls back to mcp-progress publish without a socket path', async () => {
    const token = await watched('render-publish');
    const result = await run('sh', [join(ROOT, 'examples/render.sh'), '3'], token, {
      RENDER_DELAY: '0.01',
      MCP_PROGRESS_SOCKET: '',
      MCP_PROGRESS_RUNTIME_DIR: bridge.daemon.runtimeDir,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(await doneOf(token)).toEqual({ progressToken: token, status: 'ok' });
    expect(progressOf(token).map((p) => p.progress)).toEqual([1, 2, 3]);
  });
});
