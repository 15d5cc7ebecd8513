/**
 * The MCP client of the MCP-path workload: an SDK 1.x Client that spawns the
 * server over stdio, as a host does, and calls one tool with an `onprogress`
 * handler. It times spawn -> `initialize` result, and each measured update
 * from the worker's stamp to `onprogress`.
 */

import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import { nowUs } from '../lib/frames.ts';
import type { McpClientConfig, McpClientResult } from '../lib/mcp-targets.ts';
import { SampleList, summariseLatencies } from '../lib/stats.ts';

const STAMP = /n=(\d+) t=(\d+)/;
/** Longer than any run: the tool returns when the worker is done, and a stuck run fails on the harness's timeout. */
const CALL_TIMEOUT_MS = 600_000;

let client: Client | undefined;
let result: McpClientResult | undefined;
let rawProgressAfterResult = 0;
let lateDropped = 0;
const errors: string[] = [];

/** The daemon's /mcp, one session over Streamable HTTP: the server process is the daemon. */
async function startHttp(http: { url: string; secret: string }): Promise<void> {
  const transport = new StreamableHTTPClientTransport(new URL(http.url), {
    requestInit: { headers: { Authorization: `Bearer ${http.secret}` } },
  });
  const made = newClient();
  const startedUs = nowUs();
  await made.connect(transport);
  const startupMs = (nowUs() - startedUs) / 1000;
  countAfterResult(transport);
  client = made;
  toParent({ type: 'ready', serverPid: -1, startupMs });
}

function newClient(): Client {
  const made = new Client({ name: 'mcp-progress-bench', version: '0.0.0' });
  made.onerror = (error) => {
    // The SDK 1.x client drops progress read together with the result (typescript-sdk#2580):
    // such a notification arrived after its request's progress handler was gone.
    if (error.message.includes('unknown token')) lateDropped++;
    else errors.push(error.message);
  };
  return made;
}

/** Progress that reaches the transport once the result is in: counted, then passed on. */
function countAfterResult(transport: Transport): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    if (
      result !== undefined &&
      'method' in message &&
      message.method === 'notifications/progress'
    ) {
      rawProgressAfterResult++;
    }
    deliver?.(message);
  };
}

async function start(config: McpClientConfig): Promise<void> {
  if (config.http !== undefined) return startHttp(config.http);
  const transport = new StdioClientTransport({
    command: config.command,
    args: config.args,
    env: config.env,
    ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
    stderr: 'pipe',
  });
  let stderrTail = '';
  let pending = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    stderrTail = (stderrTail + text).slice(-4000);
    if (!config.routeOnStderr) return;
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line.startsWith('ROUTE ')) toParent({ type: 'route', env: JSON.parse(line.slice(6)) });
    }
  });
  const made = newClient();
  const startedUs = nowUs();
  try {
    await made.connect(transport);
  } catch (error) {
    throw new Error(`${(error as Error).message}; server stderr: ${stderrTail}`);
  }
  const startupMs = (nowUs() - startedUs) / 1000;
  countAfterResult(transport);
  client = made;
  toParent({ type: 'ready', serverPid: transport.pid ?? -1, startupMs });
}

async function call(config: McpClientConfig): Promise<void> {
  if (client === undefined) throw new Error('call before ready');
  const latencies = new SampleList();
  // When each measured update arrived, for --samples: latency against time shows warm-up and bursts.
  const arrivals = new SampleList();
  let notifications = 0;
  let measured = 0;
  let lastN = 0;
  let finalAtUs = Number.NaN;
  let outOfOrder = 0;
  let first = true;
  const reply = await client.callTool(
    { name: config.tool, arguments: config.toolArgs },
    undefined,
    {
      timeout: CALL_TIMEOUT_MS,
      onprogress: (progress) => {
        const atUs = nowUs();
        notifications++;
        if (first) {
          first = false;
          toParent({ type: 'first' });
        }
        const stamp = STAMP.exec(progress.message ?? '');
        if (stamp === null) return;
        measured++;
        latencies.push(atUs - Number(stamp[2]));
        arrivals.push(atUs);
        const n = Number(stamp[1]);
        if (n <= lastN) outOfOrder++;
        else {
          lastN = n;
          finalAtUs = atUs;
        }
      },
    },
  );
  if (config.samplesPath !== undefined) writeSamples(config.samplesPath, arrivals, latencies);
  const at = arrivals.values();
  const steadyFromUs = (at[0] ?? 0) + (config.steadyFromMs ?? 0) * 1000;
  const steady = latencies.values().filter((_, i) => (at[i] ?? 0) >= steadyFromUs);
  result = {
    type: 'result',
    measured,
    notifications,
    lastN,
    finalAtUs,
    outOfOrder,
    resultAtUs: nowUs(),
    afterResult: 0,
    latency: summariseLatencies(latencies.values()),
    steadyLatency: summariseLatencies(steady),
    isError: reply.isError === true,
    errors,
  };
  toParent({ type: 'called' });
}

/** `<ms since the first measured update> <latency ms>`, one line per update, in arrival order. */
function writeSamples(path: string, arrivals: SampleList, latencies: SampleList): void {
  const at = arrivals.values();
  const latency = latencies.values();
  const first = at[0] ?? 0;
  const lines = ['# ms_since_first\tlatency_ms'];
  for (let i = 0; i < at.length; i++) {
    lines.push(
      `${(((at[i] ?? 0) - first) / 1000).toFixed(3)}\t${((latency[i] ?? 0) / 1000).toFixed(3)}`,
    );
  }
  writeFileSync(path, `${lines.join('\n')}\n`);
}

onParentMessage((message: Message) => {
  const config = message.config as McpClientConfig;
  switch (message.type) {
    case 'config':
      start(config).catch((error: Error) => toParent({ type: 'failed', error: error.message }));
      break;
    case 'call':
      call(config).catch((error: Error) => toParent({ type: 'failed', error: error.message }));
      break;
    case 'close':
      // The SDK's close ends the server's stdin, and signals it if it does not leave.
      (client?.close() ?? Promise.resolve()).then(
        () => toParent({ type: 'closed' }),
        (error: Error) => toParent({ type: 'closed', error: error.message }),
      );
      break;
    case 'finish':
      // What came after the result up to now: the harness asks once the worker and server are done.
      if (result !== undefined)
        toParent({ ...result, afterResult: rawProgressAfterResult + lateDropped });
      break;
  }
});
