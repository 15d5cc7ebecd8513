/**
 * Issue 30's "Done when", measured: the issue's ffmpeg command (a 20 s synthetic input,
 * libx264 -preset veryslow) under the real `bin/mcp-progress run --parse`, against a real
 * daemon, watched by a WebSocket gateway session. Prints every value the session got, with the
 * time since the start, and the issue's checks.
 *
 *   npm run build && node bench/parse-ffmpeg.ts [SECONDS]     # default 20, as in the issue
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import WebSocket from 'ws';
import { startDaemonProcess } from './lib/systems.ts';

const BIN = resolve(import.meta.dirname, '../bin/mcp-progress');
const seconds = Number(process.argv[2] ?? 20);
const dir = mkdtempSync(join(tmpdir(), 'parse-ffmpeg-'));
const { server, info } = await startDaemonProcess(
  BIN,
  { execArgv: [] } as never,
  dir,
  ['--log-level', 'warn'],
  'the daemon',
);
const ws = new WebSocket(info.url, 'mcp-progress.v1', {
  headers: { authorization: `Bearer ${info.secret}` },
});
await new Promise((ready, fail) => ws.once('open', ready).once('error', fail));
const token = `ff-${process.pid}`;
const start = Date.now();
const seen: Array<{ ms: number; progress: number; total?: number; message?: string }> = [];
let doneAt: number | undefined;
ws.on('message', (data) => {
  const message = JSON.parse(String(data));
  if (message.method === 'notifications/progress')
    seen.push({ ms: Date.now() - start, ...message.params });
  if (message.method === 'notifications/progress/done') doneAt = Date.now() - start;
});
ws.send(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'progress/subscribe',
    params: { progressToken: token, minIntervalMs: 0 },
  }),
);
await new Promise((settled) => setTimeout(settled, 200));
const command = `-y -f lavfi -i testsrc=duration=${seconds}:size=640x360:rate=30 -c:v libx264 -preset veryslow ${join(dir, 'out.mp4')}`;
const run = spawn(
  process.execPath,
  [BIN, 'run', '--token', token, '--parse', '--', 'ffmpeg', ...command.split(' ')],
  {
    stdio: ['ignore', 'ignore', 'ignore'],
    env: { ...process.env, MCP_PROGRESS_SOCKET: info.socket },
  },
);
const code = await new Promise((exited) => run.once('exit', exited));
const ended = Date.now() - start;
while (doneAt === undefined && Date.now() - start < ended + 5000)
  await new Promise((settled) => setTimeout(settled, 20));
ws.close();
server.child.kill('SIGTERM');
rmSync(dir, { recursive: true, force: true });

for (const value of seen)
  console.log(
    `${String(value.ms).padStart(6)} ms  ${value.progress} of ${value.total}  ${value.message}`,
  );
const during = seen.filter((value) => value.ms < ended);
const increasing = seen.every(
  (value, i) => i === 0 || value.progress > (seen[i - 1]?.progress ?? 0),
);
const lastFifth = ended * 0.8;
const early = seen.filter((value) => value.ms < lastFifth && value.progress > 0.9 * seconds);
console.log(
  JSON.stringify(
    {
      exitCode: code,
      runMs: ended,
      values: seen.length,
      valuesDuringTheEncode: during.length,
      strictlyIncreasing: increasing,
      above90PercentBeforeTheLastFifth: early.length,
      last: seen.at(-1),
      everyMessageSaysFrameAndTime: seen.every((value) =>
        /^frame \d+, [\d.]+ s of /.test(value.message ?? ''),
      ),
      doneMs: doneAt,
    },
    null,
    2,
  ),
);
