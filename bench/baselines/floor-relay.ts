/**
 * What the MCP path's two floor relays share (mcp-floor.ts over stdio, mcp-http-floor.ts over
 * Streamable HTTP): the worker's line protocol on a Unix socket, and the progress notification
 * written by hand from each line, with no checks.
 */
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

/** A worker's line: `{"progress":n,"message":"..."}` per update, `{"done":true}` at the end. */
export interface FloorLine {
  progress?: number;
  message?: string;
  done?: boolean;
}

/** The worker socket's path: the relay's one argument. */
export function socketPathArgument(script: string): string {
  const socketPath = process.argv[2];
  if (socketPath === undefined) throw new Error(`usage: ${script} SOCKET_PATH`);
  return socketPath;
}

/** A JSON-RPC message from the client, as far as a floor reads it. */
export interface FloorMessage {
  id?: number | string;
  method?: string;
  params?: { protocolVersion?: string; _meta?: { progressToken?: number | string } };
}

/** The id of the ping sent before the result (the SDK 1.x client's lost-progress bug: mcp-floor.ts). */
export const CONFIRM_ID = 'floor-confirm';
export const CONFIRM_PING = JSON.stringify({ jsonrpc: '2.0', id: CONFIRM_ID, method: 'ping' });

export function reply(id: number | string, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

const TOOLS = {
  tools: [{ name: 'watch', description: 'Relays the worker.', inputSchema: { type: 'object' } }],
};

/**
 * The answer, as JSON text, to a request both floors answer alike: every method but
 * `tools/call`, which each answers on its own transport. `name` is the server's.
 */
export function standardReply(id: number | string, message: FloorMessage, name: string): string {
  switch (message.method) {
    case 'initialize':
      return reply(id, {
        protocolVersion: message.params?.protocolVersion ?? '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name, version: '0.0.0' },
      });
    case 'tools/list':
      return reply(id, TOOLS);
    case 'ping':
      return reply(id, {});
    default:
      return JSON.stringify({
        jsonrpc: '2.0',
        id,
        error: { code: -32601, message: `no method ${message.method}` },
      });
  }
}

/** A call's progressToken as JSON (of a string or a number), written into each notification as it is. */
export function callToken(message: FloorMessage): string {
  return JSON.stringify(message.params?._meta?.progressToken ?? null);
}

export const DONE_RESULT = { content: [{ type: 'text', text: 'done' }] };

/** The progress notification of one line, under `token` (JSON of a string or a number). */
export function progressNotification(token: string, line: FloorLine): string {
  return `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":${token},"progress":${line.progress},"message":${JSON.stringify(line.message ?? '')}}}`;
}

/** Splits text into lines, across reads; calls `onLine` for each non-empty one. */
export function lines(onLine: (line: string) => void): (text: string) => void {
  let tail = '';
  return (text) => {
    const combined = tail === '' ? text : tail + text;
    let start = 0;
    let end = combined.indexOf('\n');
    while (end !== -1) {
      if (end > start) onLine(combined.slice(start, end));
      start = end + 1;
      end = combined.indexOf('\n', start);
    }
    tail = combined.slice(start);
  };
}

/**
 * Listens on the worker's socket: each read's lines go to `onLine`, then `flush` runs once, so
 * that a relay writes once per read.
 */
export function listenForWorkers(
  socketPath: string,
  onLine: (line: FloorLine) => void,
  flush: () => void,
  listening: () => void,
): Server {
  const server = createServer((socket) => {
    socket.setEncoding('utf8');
    const split = lines((line) => onLine(JSON.parse(line) as FloorLine));
    socket.on('data', (text: string) => {
      split(text);
      flush();
    });
    socket.on('error', () => {});
  });
  rmSync(socketPath, { force: true });
  return server.listen(socketPath, listening);
}
