/**
 * What the backplane's latency rests on (docs/BACKPLANE.md, Latency), checked by the order
 * of events on the wire, never by a clock: the stream messages of one turn of the publishing
 * daemon's event loop reach NATS in one write, not one write per worker socket it read, and
 * without waiting for the 100 ms confirmation (its PING is not in that write).
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/wire.js';
import { cuttableLink } from '../helpers/cuttable-link.js';
import { cleanupAll, eventually } from '../helpers/daemon.js';
import { connectGateway } from '../helpers/gateway.js';
import { type RawWorker, rawWorker } from '../helpers/worker.js';
import { fresh, sawProgress, startHost, subscribe } from './hosts.js';
import { natsServer, startNats } from './nats-server.js';

let open: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const close of open.reverse()) await close();
  open = [];
  cleanupAll();
});

/** Whether the process is stopped (state T in /proc/PID/stat, after the command's parenthesis). */
function stopped(pid: number | undefined): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
}

/** How many stream messages of `host` each chunk the relay read holds (chunks without any left out). */
function streamPublishesPerChunk(chunks: readonly Buffer[], host: string): number[] {
  const pub = `PUB mcp-progress.s.${host}.`;
  return chunks
    .map((chunk) => chunk.toString('latin1').split(pub).length - 1)
    .filter((count) => count > 0);
}

describe.skipIf(natsServer.skip)('backplane latency', () => {
  beforeAll(() => natsServer.require());

  // The stop is checked in /proc (Linux, where CI runs the backplane tests).
  it.skipIf(process.platform !== 'linux')(
    'frames that daemon A reads from several workers in one turn go to NATS in one write',
    async () => {
      const server = await startNats();
      open.push(() => server.stop());
      const chunks: Buffer[] = [];
      const link = await cuttableLink(server.port, { seeDaemon: (chunk) => chunks.push(chunk) });
      open.push(() => link.close());
      const [a, b] = await Promise.all([
        startHost(link.url, 'turn-a'),
        startHost(server.url, 'turn-b'),
      ]);
      open.push(
        () => a.stop(),
        () => b.stop(),
      );
      const onB = await connectGateway(b.info);
      open.push(() => onB.close());
      const tokens = Array.from({ length: 8 }, () => fresh('turn'));
      await Promise.all(tokens.map((token) => subscribe(onB, token)));
      const workers: RawWorker[] = await Promise.all(tokens.map(() => rawWorker(a.info.socket)));
      open.push(() => {
        for (const worker of workers) worker.destroy();
      });
      // Each connection served once (a ping, its pong), so A reads them all from one poll.
      for (const worker of workers) worker.send('ping', {});
      await eventually(
        () => (workers.every((worker) => worker.replies.length > 0) ? true : undefined),
        10_000,
        'every worker connection to be served',
      );
      // A stopped while each worker writes one frame: run again, it finds all eight sockets
      // readable in one poll of its event loop.
      a.child.kill('SIGSTOP');
      try {
        // Stopped for sure before the first write: a poll that returned some sockets just before
        // the stop would take them in a turn of their own.
        await eventually(() => (stopped(a.child.pid) ? true : undefined), 10_000, 'A to stop');
        await Promise.all(
          workers.map(
            (worker, i) =>
              new Promise<void>((resolve) =>
                worker.socket.write(
                  encodeFrame('progress', { v: 1, progressToken: tokens[i], progress: 1 }),
                  () => resolve(),
                ),
              ),
          ),
        );
      } finally {
        a.child.kill('SIGCONT');
      }
      await Promise.all(tokens.map((token) => sawProgress(onB, token, 1)));
      // One write of eight messages (one per socket read would be eight writes, eight chunks).
      expect(streamPublishesPerChunk(chunks, 'turn-a')).toEqual([8]);
      // Not held for the confirmation: a publish made by it would share a write with its PING.
      const carrier = chunks.find((chunk) => chunk.includes('PUB mcp-progress.s.turn-a.'));
      expect(carrier?.toString('latin1')).not.toContain('PING\r\n');
    },
  );
});
