// A Node worker: it imports the publisher only, no MCP library, and stops
// when the MCP side cancels. Token and socket come from the environment.
//
//   mcp-progress run -- node examples/worker.mjs 40
import { setTimeout as sleep } from 'node:timers/promises';
import { connectPublisher } from 'mcp-progress-bridge/client';

const items = Number(process.argv[2] ?? 40);
const p = await connectPublisher();
p.onCancel((reason) => console.error(`cancelled: ${reason ?? 'no reason given'}`));

for (let item = 1; item <= items && !p.cancelled; item++) {
  await sleep(50); // the work on one item
  p.update({ progress: item, total: items, message: `item ${item} of ${items}` });
}
const outcome = await p.done(p.cancelled ? 'cancelled' : 'ok');
if (!outcome.delivered) console.error(`progress: done not delivered (${outcome.error?.message})`);
process.exitCode = p.cancelled ? 130 : 0;
