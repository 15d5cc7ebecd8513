/** A real `nats-server -js` on a free loopback port with a temporary store, for backplane tests. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { natsServerPath } from '../../bench/lib/systems.ts';
import { eventually, tempDir, waitForExit } from '../helpers/daemon.js';
import { tool } from '../helpers/tools.js';

/** The nats-server binary, or undefined when it is not installed. */
export const NATS_SERVER = natsServerPath();

/** Every backplane test needs it: `describe.skipIf(natsServer.skip)`, `beforeAll(natsServer.require)`. */
export const natsServer = tool('nats-server', {
  debian: 'nats-server',
  why: 'the backplane tests',
  check: () => NATS_SERVER !== undefined,
});

export interface RunningNats {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

import { natsPorts } from '../../bench/lib/nats-ports.ts';
import { freePort } from '../../bench/lib/proc.ts';

export { freePort };

export interface NatsStart {
  port?: number;
  /** The JetStream store: the same one again for a restart that keeps the last values. */
  storeDir?: string;
  /** Extra configuration file text (authorization, tls). */
  config?: string;
  /** The scheme of `url`: tls for a server with a tls block. */
  scheme?: 'nats' | 'tls';
}

export async function startNats(start: NatsStart = {}): Promise<RunningNats> {
  natsServer.require();
  if (NATS_SERVER === undefined) throw new Error('nats-server is not installed');
  const storeDir = start.storeDir ?? tempDir('nats-store-');
  // Without a port to reuse, one of its own choosing, read from its log (bench/lib/nats-ports.ts).
  const args = ['-a', '127.0.0.1', '-p', String(start.port ?? -1), '-js', '-sd', storeDir];
  if (start.config !== undefined) {
    const file = join(tempDir('nats-config-'), 'nats.conf');
    writeFileSync(file, start.config);
    args.push('-c', file);
  }
  const child = spawn(NATS_SERVER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
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
  const port = start.port ?? natsPorts(stderr).client;
  if (port === undefined) throw new Error(`nats-server did not say its port: ${stderr}`);
  return {
    url: `${start.scheme ?? 'nats'}://127.0.0.1:${port}`,
    port,
    storeDir,
    child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await waitForExit(child);
      }
    },
  };
}

/** A CA and a server certificate for 127.0.0.1, made with openssl in a temporary dir. */
export function makeCertificates(): { ca: string; cert: string; key: string } {
  const dir = tempDir('nats-tls-');
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=test CA',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    at('server.key'),
    '-out',
    at('server.csr'),
  );
  writeFileSync(at('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    at('ext.cnf'),
    '-out',
    at('server.pem'),
  );
  return { ca: at('ca.pem'), cert: at('server.pem'), key: at('server.key') };
}
