/**
 * Baseline: the floor of the MCP path over Streamable HTTP, what the daemon's
 * /mcp is measured against beside the stdio floor (mcp-floor.ts): the same
 * relay, written by hand on node:http (no SDK, no checks, one session), on a
 * loopback TCP port as /mcp is. It shows what HTTP over TCP costs before any
 * MCP server's own work.
 *
 * `tools/call` answers with an SSE stream; every line a worker writes to the
 * Unix socket goes on it as one event (`data: <notification>`), one write per
 * read, framed as a chunk and written to the connection's socket: the
 * cheapest way Node has (the bridge's /mcp does the same; node:http's own
 * write adds a cork and a nextTick per chunk). `{"done":true}` sends the
 * confirming ping on the stream; the client's answer (a POST) sends the result
 * and ends the stream. `initialize` and other requests are answered as JSON;
 * notifications and responses with 202; GET (a standalone stream) with 405.
 *
 * Usage: mcp-http-floor.ts SOCKET_PATH. Once both listen it prints
 * `{"url": "http://127.0.0.1:<port>/mcp"}` on stdout. Any bearer is accepted.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  CONFIRM_ID,
  CONFIRM_PING,
  callToken,
  DONE_RESULT,
  type FloorMessage,
  listenForWorkers,
  progressNotification,
  reply,
  socketPathArgument,
  standardReply,
} from './floor-relay.ts';

const socketPath = socketPathArgument('mcp-http-floor.ts');

/** The call being answered: its id, its token as JSON, and its SSE stream. */
let call: { id: number | string; token: string; stream: ServerResponse } | undefined;
/** A call whose confirming ping is out: the client's answer sends its result. */
let ending: { id: number | string; stream: ServerResponse } | undefined;

/** SSE events as one chunk of the stream's chunked body, straight to its socket. */
function writeChunk(stream: ServerResponse, events: string): void {
  stream.socket?.write(`${Buffer.byteLength(events).toString(16)}\r\n${events}\r\n`);
}

function event(json: string): string {
  return `data: ${json}\n\n`;
}

function json(response: ServerResponse, body: string, headers: Record<string, string> = {}): void {
  response.writeHead(200, { 'content-type': 'application/json', ...headers }).end(body);
}

function post(message: FloorMessage, response: ServerResponse): void {
  const { id, method } = message;
  if (id === CONFIRM_ID && method === undefined) {
    response.writeHead(202).end();
    if (ending !== undefined) {
      writeChunk(ending.stream, event(reply(ending.id, DONE_RESULT)));
      ending.stream.end();
    }
    ending = undefined;
    return;
  }
  if (id === undefined || method === undefined) {
    response.writeHead(202).end();
    return;
  }
  if (method === 'tools/call') {
    response.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'transfer-encoding': 'chunked',
    });
    response.flushHeaders();
    call = { id, token: callToken(message), stream: response };
    return;
  }
  // The session's id comes with the answer to initialize, as Streamable HTTP has it.
  json(
    response,
    standardReply(id, message, 'mcp-http-floor'),
    method === 'initialize' ? { 'mcp-session-id': 'floor' } : {},
  );
}

function handle(request: IncomingMessage, response: ServerResponse): void {
  if (request.method === 'DELETE') {
    response.writeHead(200).end();
    return;
  }
  if (request.method !== 'POST') {
    response.writeHead(405, { allow: 'POST, DELETE' }).end();
    return;
  }
  let body = '';
  request.setEncoding('utf8');
  request.on('data', (text: string) => {
    body += text;
  });
  request.on('end', () => post(JSON.parse(body) as FloorMessage, response));
}

/** The events of one read, and the stream they go on: one write per read, as the stdio floor. */
let out = '';
let outStream: ServerResponse | undefined;
listenForWorkers(
  socketPath,
  (line) => {
    if (call === undefined) return;
    outStream = call.stream;
    if (line.done === true) {
      out += event(CONFIRM_PING);
      ending = { id: call.id, stream: call.stream };
      call = undefined;
      return;
    }
    out += event(progressNotification(call.token, line));
  },
  () => {
    if (out === '' || outStream === undefined) return;
    writeChunk(outStream, out);
    out = '';
  },
  () => {
    const http = createServer(handle);
    http.listen(0, '127.0.0.1', () => {
      const address = http.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}/mcp` })}\n`);
    });
  },
);
// The harness's SIGTERM ends it; exiting this way also writes --cpu-prof.
process.once('SIGTERM', () => process.exit(0));
