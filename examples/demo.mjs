// `npm run demo`: starts a daemon of its own, runs two example workers (the
// Python training loop and the Node worker; the shell render loop when there
// is no python3) and tails them, so that bars move within seconds.
// --fast makes the workers quick (the tests use it). Ctrl-C stops it all.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const root = resolve(import.meta.dirname, '..');
const bin = join(root, 'bin/mcp-progress');
const fast = process.argv.includes('--fast');
const runtimeDir = mkdtempSync(join(tmpdir(), 'mcp-progress-demo-'));
const env = {
  ...process.env,
  MCP_PROGRESS_RUNTIME_DIR: runtimeDir,
  MCP_PROGRESS_SOCKET: join(runtimeDir, 'bridge.sock'),
};
delete env.MCP_PROGRESS_TOKEN;
const node = process.execPath;
const children = new Set();

function start(args, stdio = 'ignore') {
  const child = spawn(node, [bin, ...args], { env, stdio });
  children.add(child);
  const exited = new Promise((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  exited.then(() => children.delete(child));
  return { child, exited };
}

function stopAll() {
  for (const child of children) child.kill('SIGTERM');
}
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);

const daemon = start(
  ['daemon', '--runtime-dir', runtimeDir, '--port', '0', '--log-level', 'warn'],
  ['ignore', 'ignore', 'inherit'],
);
for (let waited = 0; !existsSync(join(runtimeDir, 'daemon.json')); waited += 50) {
  if (daemon.child.exitCode !== null || waited > 15_000) {
    console.error('demo: the daemon did not start');
    process.exit(1);
  }
  await sleep(50);
}

const python = spawnSync('python3', ['--version']).status === 0;
const [first, second] = [python ? 'train.py' : 'render.sh', 'worker.mjs'];
// Named streams: tail follows them from before they start, and exits once both are done.
const tail = start(['tail', '--runtime-dir', runtimeDir, first, second], 'inherit');
const workers = [
  python
    ? start([
        'run',
        '--token',
        first,
        '--',
        'python3',
        join(root, 'examples/train.py'),
        ...(fast ? ['--epochs', '2', '--steps', '10', '--delay', '0.01'] : []),
      ])
    : start([
        'run',
        '--token',
        first,
        '--',
        'sh',
        join(root, 'examples/render.sh'),
        fast ? '6' : '40',
      ]),
  start([
    'run',
    '--token',
    second,
    '--',
    node,
    join(root, 'examples/worker.mjs'),
    fast ? '8' : '120',
  ]),
];
const codes = await Promise.all(workers.map((worker) => worker.exited));
const tailCode = await tail.exited;
daemon.child.kill('SIGTERM');
await daemon.exited;
rmSync(runtimeDir, { recursive: true, force: true });
process.exitCode = codes.every((code) => code === 0) && tailCode === 0 ? 0 : 1;
