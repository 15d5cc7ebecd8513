/**
 * Baseline: the node-ipc relay. node-ipc's Guarded server, configured as the
 * bridge's ingress adapter configures it, relays every `progress` frame's
 * data as a JSON-RPC notification to every WebSocket client, serialised once
 * and batched per read with cork/uncork. No validation, no routing: what is
 * left is node-ipc's own cost.
 */
import { createServer as createHttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { IPCModule } from 'node-ipc';
import { type WebSocket, WebSocketServer } from 'ws';
import { onParentMessage, toParent } from '../lib/child.ts';

const clients = new Map<WebSocket, Socket>();
let frames = 0;

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

  const ipc = new IPCModule();
  Object.assign(ipc.config, {
    silent: true,
    unlink: false,
    parser: 'guarded',
    maxMessageSize: 64 * 1024,
    maxPendingBytes: 1024 * 1024,
    messageTimeout: 0,
    maxConnections: Number.MAX_SAFE_INTEGER,
    socketRoot: `${socketPath}.d/`,
  });
  ipc.serve(socketPath);
  const server = ipc.server;
  if (server === false) throw new Error('node-ipc did not create a server');
  server.on('connect', ((socket: Socket) => {
    // Batch the writes of one read, as the bridge's adapter does.
    socket.prependListener('data', () => {
      for (const client of clients.values()) client.cork();
    });
    socket.on('data', () => {
      for (const client of clients.values()) client.uncork();
    });
  }) as (...args: never[]) => void);
  server.on('progress', ((data: unknown) => {
    frames++;
    if (clients.size === 0) return;
    const payload = Buffer.from(
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: data }),
    );
    for (const client of clients.keys()) client.send(payload, { binary: false });
  }) as (...args: never[]) => void);
  server.on('ping', ((_data: unknown, socket: Socket) => {
    frames++;
    server.emit(socket, 'pong', {});
  }) as (...args: never[]) => void);
  server.on('start', (() => {
    http.listen(0, '127.0.0.1', () => {
      const address = http.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      toParent({ type: 'ready', url: `ws://127.0.0.1:${port}/` });
    });
  }) as (...args: never[]) => void);
  server.start();
}
