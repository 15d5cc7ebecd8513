// The floor under an idle daemon's memory: a bare Node process that does what an idle daemon
// must, listen on a loopback HTTP port and on a Unix socket, and nothing else. It prints
// "ready" once both listen, and leaves when its stdin closes. Plain JavaScript: type
// stripping would load more than the floor has.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Required, as the daemon does: an ESM import of node:http loads undici through its getters.
const { createServer: createHttpServer } = createRequire(import.meta.url)('node:http');
const dir = mkdtempSync(join(tmpdir(), 'idle-floor-'));
const http = createHttpServer((_request, response) => response.end());
const socket = createServer(() => {});
let listening = 0;
const ready = () => {
  if (++listening === 2) process.stdout.write('ready\n');
};
http.listen(0, '127.0.0.1', ready);
socket.listen(join(dir, 'floor.sock'), ready);
process.stdin.resume();
process.stdin.on('end', () => {
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});
