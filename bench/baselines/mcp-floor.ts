/**
 * Baseline: the floor of the MCP path, its equivalent of the raw relay. A
 * stdio MCP server written by hand (newline-delimited JSON-RPC, no SDK, no
 * checks) with one tool, `watch`: while a call runs, every line a worker
 * writes to its Unix socket (`{"progress":n,"message":"..."}`) goes straight
 * to stdout as `notifications/progress` under the call's progressToken, one
 * write per read; `{"done":true}` ends the call with its result. Frames that
 * come while no call runs are dropped, as neither system replays them.
 *
 * Before the result it pings the client and waits for the answer: the SDK 1.x
 * client loses progress read in one chunk with the result (typescript-sdk#2580),
 * and answers a ping only once what it read before was dispatched. The bridge
 * does the same (src/protocol/limits.ts, RESULT_GAP_MS), so the floor is correct too.
 *
 * The socket path is its first argument; it listens before reading stdin, so
 * the socket is there once `initialize` is answered.
 */
import {
  CONFIRM_ID,
  CONFIRM_PING,
  callToken,
  DONE_RESULT,
  type FloorMessage,
  lines,
  listenForWorkers,
  progressNotification,
  reply,
  socketPathArgument,
  standardReply,
} from './floor-relay.ts';

const socketPath = socketPathArgument('mcp-floor.ts');

let call: { id: number | string; token: string } | undefined;
/** The call the confirming ping ends. */
let ending: { id: number | string } | undefined;

function answer(request: FloorMessage): void {
  const { id, method } = request;
  if (id === undefined) return;
  if (id === CONFIRM_ID && method === undefined) {
    if (ending !== undefined) process.stdout.write(`${reply(ending.id, DONE_RESULT)}\n`);
    ending = undefined;
    return;
  }
  if (method === 'tools/call') {
    call = { id, token: callToken(request) };
    return;
  }
  process.stdout.write(`${standardReply(id, request, 'mcp-floor')}\n`);
}

let out = '';
listenForWorkers(
  socketPath,
  (line) => {
    if (call === undefined) return;
    if (line.done === true) {
      out += `${CONFIRM_PING}\n`;
      ending = { id: call.id };
      call = undefined;
      return;
    }
    out += `${progressNotification(call.token, line)}\n`;
  },
  () => {
    if (out === '') return;
    process.stdout.write(out);
    out = '';
  },
  () => {
    process.stdin.setEncoding('utf8');
    process.stdin.on(
      'data',
      lines((line) => answer(JSON.parse(line) as FloorMessage)),
    );
  },
);
// A host that closes stdin or sends SIGTERM is done with us; exiting this way also writes --cpu-prof.
process.stdin.once('end', () => process.exit(0));
process.once('SIGTERM', () => process.exit(0));
