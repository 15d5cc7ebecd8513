/**
 * Baseline: the hop of the two-process floor. With a separate daemon the MCP path has two server
 * processes, each woken once per update; this is the least the first of them can be: it listens
 * on the worker's Unix socket and writes each read, unchanged and unchecked, to the floor relay's
 * socket (mcp-floor.ts), one write per read. The floor relay behind it is the second process.
 *
 *   node floor-hop.ts LISTEN_SOCKET FLOOR_SOCKET
 *
 * It prints one line, `{"listening":true}`, once its socket is there; the floor relay's socket
 * is connected to when a worker connects (the relay listens only once its client started it).
 */
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const [listenPath, floorPath] = process.argv.slice(2);
if (listenPath === undefined || floorPath === undefined)
  throw new Error('usage: floor-hop.ts LISTEN_SOCKET FLOOR_SOCKET');

const server = createServer((worker) => {
  const floor = connect({ path: floorPath });
  worker.on('data', (chunk: Buffer) => floor.write(chunk));
  worker.on('end', () => floor.end());
  worker.on('error', () => floor.destroy());
  floor.on('error', () => worker.destroy());
});
rmSync(listenPath, { force: true });
server.listen(listenPath, () => process.stdout.write('{"listening":true}\n'));
process.once('SIGTERM', () => process.exit(0));
