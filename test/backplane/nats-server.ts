/** A real `nats-server -js` on a free loopback port with a temporary store, for backplane tests. */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { eventually, tempDir, waitForExit } from '../helpers/daemon.js';

/** The nats-server binary, or undefined when it is not installed (the tests then skip). */
export const NATS_SERVER =
  ['/usr/sbin/nats-server', '/usr/bin/nats-server'].find((path) => existsSync(path)) ??
  (spawnSync('sh', ['-c', 'command -v nats-server']).stdout?.toString().trim() || undefined);

if (NATS_SERVER === undefined) {
  console.warn(
    'backplane tests skipped: nats-server is not installed (Debian: apt-get install nats-server)',
  );
}

export interface RunningNats {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function startNats(
  port?: number,
  storeDir = tempDir('nats-store-'),
): Promise<RunningNats> {
  if (NATS_SERVER === undefined) throw new Error('nats-server is not installed');
  const chosen = port ?? (await freePort());
  const child = spawn(
    NATS_SERVER,
    ['-a', '127.0.0.1', '-p', String(chosen), '-js', '-sd', storeDir],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`nats-server exited: ${stderr}`);
      return stderr.includes('Server is ready') ? true : undefined;
    },
    15_000,
    'nats-server to be ready',
  );
  return {
    url: `nats://127.0.0.1:${chosen}`,
    port: chosen,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await waitForExit(child);
      }
    },
  };
}
