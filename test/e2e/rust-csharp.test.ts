/**
 * docs/RUST-CSHARP.md made real: its Rust and C# workers (examples/rust/worker.rs,
 * examples/csharp/Worker.cs) are built with Debian's rustc and Mono's mcs and run against the
 * daemon; the page must show each file whole.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupAll,
  collectOutput,
  eventually,
  ROOT,
  type RunningDaemon,
  startDaemon,
  tempDir,
  waitForExit,
} from '../helpers/daemon.js';
import { connectGateway, type GatewayClient } from '../helpers/gateway.js';
import { tool } from '../helpers/tools.js';

const rustc = tool('rustc', { debian: 'rustc', probe: ['rustc', '--version'] });
const mcs = tool('mcs', { debian: 'mono-mcs', probe: ['mcs', '--version'] });
const page = readFileSync(join(ROOT, 'docs/RUST-CSHARP.md'), 'utf8');

interface Language {
  readonly name: string;
  readonly tool: typeof rustc;
  readonly source: string;
  readonly fence: string;
  /** Builds the source into `dir`; returns the command that runs it. */
  build(dir: string): string[];
}

const LANGUAGES: Language[] = [
  {
    name: 'Rust',
    tool: rustc,
    source: 'examples/rust/worker.rs',
    fence: 'rust',
    build(dir) {
      const output = join(dir, 'worker');
      run('rustc', ['--edition', '2018', '-D', 'warnings', '-o', output, join(ROOT, this.source)]);
      return [output];
    },
  },
  {
    name: 'C#',
    tool: mcs,
    source: 'examples/csharp/Worker.cs',
    fence: 'csharp',
    build(dir) {
      const output = join(dir, 'Worker.exe');
      run('mcs', ['-warnaserror', `-out:${output}`, join(ROOT, this.source)]);
      return ['mono', output];
    },
  },
];

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr}${result.stdout}`);
}

const notices = (gateway: GatewayClient, token: string, method: string) =>
  gateway.notifications.filter((n) => n.method === method && n.params.progressToken === token);

afterAll(cleanupAll);

describe.each(LANGUAGES)('the $name worker of docs/RUST-CSHARP.md', (language) => {
  let daemon: RunningDaemon;
  let command: string[];
  beforeAll(async () => {
    language.tool.require();
    command = language.build(tempDir());
    daemon = await startDaemon();
  }, 120_000);
  afterAll(() => daemon?.stop());

  const start = (steps: number, token: string) => {
    const child = spawn(command[0] ?? '', [...command.slice(1), String(steps)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, MCP_PROGRESS_SOCKET: daemon.info.socket, MCP_PROGRESS_TOKEN: token },
    });
    return { child, output: collectOutput(child) };
  };

  it.skipIf(language.tool.skip)('is shown whole on the page', () => {
    const source = readFileSync(join(ROOT, language.source), 'utf8');
    expect(page).toContain(`\`\`\`${language.fence}\n${source}\`\`\``);
  });

  it.skipIf(language.tool.skip)('publishes its steps and a done the daemon acks', async () => {
    const token = `${language.fence}-job`;
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const { child, output } = start(3, token);
    expect(await waitForExit(child)).toBe(0);
    expect(output.stdout()).toBe('done delivered: true\n');
    await eventually(
      () => (notices(gateway, token, 'notifications/progress/done').length > 0 ? true : undefined),
      10_000,
      'the done',
    );
    const values = notices(gateway, token, 'notifications/progress').map((n) => n.params.progress);
    // Increasing, ending on the last step (a slow session may see fewer: the gate coalesces).
    expect(values.at(-1)).toBe(3);
    expect(values).toEqual([...values].sort((a, b) => Number(a) - Number(b)));
    expect(notices(gateway, token, 'notifications/progress').at(-1)?.params).toEqual({
      progressToken: token,
      progress: 3,
      total: 3,
      message: 'step 3',
    });
    expect(notices(gateway, token, 'notifications/progress/done')).toHaveLength(1);
    expect(notices(gateway, token, 'notifications/progress/done')[0]?.params).toMatchObject({
      status: 'ok',
      message: 'the result',
    });
    await gateway.close();
  });

  it.skipIf(language.tool.skip)('stops on a cancel and ends the stream as cancelled', async () => {
    const token = `${language.fence}-cancel`;
    const gateway = await connectGateway(daemon.info);
    await gateway.request('progress/subscribe', { progressToken: token, minIntervalMs: 0 });
    const { child, output } = start(100_000, token);
    await gateway.waitFor(1, 30_000);
    const reply = await gateway.request('progress/cancel', {
      progressToken: token,
      reason: 'stop',
    });
    expect(reply.result).toEqual({ workers: 1 });
    expect(await waitForExit(child)).toBe(0);
    expect(output.stdout()).toBe('cancelled: stop\n');
    await eventually(
      () => notices(gateway, token, 'notifications/progress/done')[0],
      10_000,
      'the done',
    );
    expect(notices(gateway, token, 'notifications/progress/done')[0]?.params).toMatchObject({
      status: 'cancelled',
    });
    await gateway.close();
  });
});
