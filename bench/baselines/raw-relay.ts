/**
 * Baseline: the raw relay, the practical limit of this design in Node. A
 * minimal node:net server splits on form feed, JSON.parses, and writes each
 * frame's params as a JSON-RPC notification to every WebSocket client,
 * serialised once and batched per read with cork/uncork. No validation, no
 * routing, no limits. It answers `ping` so connect times compare.
 */
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';
import { onParentMessage, toParent } from '../lib/child.ts';

const clients = new Map<WebSocket, Socket>();
let frames = 0;

function corkClients(): void {
  for (const socket of clients.values()) socket.cork();
}

function uncorkClients(): void {
  for (const socket of clients.values()) socket.uncork();
}

function relay(socket: Socket): void {
  socket.setEncoding('utf8');
  let tail = '';
  socket.on('data', (text: string) => {
    const combined = tail === '' ? text : tail + text;
    let start = 0;
    let end = combined.indexOf('\f');
    corkClients();
    while (end !== -1) {
      const message = JSON.parse(combined.slice(start, end));
      frames++;
      if (message.type === 'ping') {
        socket.write('{"type":"pong","data":{}}\f');
      } else if (clients.size > 0) {
        const payload = Buffer.from(
          JSON.stringify({
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: message.data,
          }),
        );
        for (const client of clients.keys()) client.send(payload, { binary: false });
      }
      start = end + 1;
      end = combined.indexOf('\f', start);
    }
    uncorkClients();
    tail = start === 0 ? combined : combined.slice(start);
  });
  socket.on('error', () => socket.destroy());
}

onParentMessage((message) => {
  if (message.type === 'stats') toParent({ type: 'stats', frames, atMs: performance.now() });
  if (message.type === 'start') start(message.socketPath as string);
});

function start(socketPath: string): void {
  const http = createHttpServer();
  const wss = new WebSocketServer({
    server: http,
    perMessageDeflate: false,
    clientTracking: false,
  });
  wss.on('connection', (ws, request) => {
    clients.set(ws, request.socket);
    ws.on('close', () => clients.delete(ws));
    ws.on('error', () => ws.terminate());
  });
  const server = createServer(relay);
  server.listen(socketPath, () => {
    http.listen(0, '127.0.0.1', () => {
      const address = http.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      toParent({ type: 'ready', url: `ws://127.0.0.1:${port}/` });
    });
  });
}
