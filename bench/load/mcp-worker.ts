/**
 * The worker of the MCP-path workload: the bridge's Node client (interval 0)
 * or mcp-telemetry's SDK (one step event per update), each update stamped
 * with the host's monotonic clock in its message, `n=<i> t=<us>`, so that
 * the MCP client can time it and check the order and the final value.
 *
 * Before the measured updates it sends warm-up updates until the harness
 * says the client saw one (`go`): neither system is asked to replay what was
 * sent before the tool call subscribed. With `warm` (bench --warm) the warm-up
 * updates come at the measured rate until `go`, so that the measured window
 * finds every process of the path warm.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import { nowUs } from '../lib/frames.ts';
import type { McpWorkerConfig, McpWorkerDone } from '../lib/mcp-targets.ts';

interface Sink {
  /** Update number `n` (1-based over the measured run), with its message. */
  update(n: number, message: string): void;
  done(): Promise<void>;
}

const WARMUP_EVERY_MS = 20;
/** The rate of `warm` warm-up updates before a burst, which has no rate of its own. */
const BURST_WARM_RATE = 1000;
/** The built client of a build, as a user's worker imports it: this build's, or the --before build's. */
function builtClient(root: string): string {
  return pathToFileURL(join(root, 'dist/client/index.js')).href;
}

let config: McpWorkerConfig;
let sink: Sink | undefined;
let warmups = 0;
/** The next tick of what is sending: the warm-up's, or the measured run's pacing. */
let timer: NodeJS.Timeout | undefined;

async function bridgeSink(
  socket: string,
  token: string,
  intervalMs: number | undefined,
  clientRoot: string,
): Promise<Sink> {
  // A variable path: tsc must not need dist/.
  const { connectPublisher } = (await import(
    builtClient(clientRoot)
  )) as typeof import('../../src/client/index.ts');
  const publisher = await connectPublisher({ socket, token, intervalMs });
  return {
    // Warm-ups take progress 1..w and the measured run follows on, so values strictly increase.
    update: (n, message) => publisher.update({ progress: warmups + n, message }),
    async done() {
      const outcome = await publisher.done('ok');
      if (!outcome.delivered) throw new Error(`done not delivered: ${outcome.error?.message}`);
    },
  };
}

async function telemetrySink(socketPath: string): Promise<Sink> {
  const { MCPTelemetry } = await import('mcp-telemetry-sdk');
  const telemetry = new MCPTelemetry({ socketPath });
  const job = telemetry.createJob({ id: 'bench', task: 'bench' });
  job.start();
  return {
    update: (_n, message) => job.stepDone(message),
    async done() {
      await job.done(0);
    },
  };
}

/** The floor relay's worker: one JSON line per update on its socket, no acks. */
async function floorSink(socketPath: string): Promise<Sink> {
  const socket = connect({ path: socketPath });
  await once(socket, 'connect');
  return {
    update: (n, message) => {
      socket.write(`${JSON.stringify({ progress: warmups + n, message })}\n`);
    },
    async done() {
      socket.end('{"done":true}\n');
      await once(socket, 'close');
    },
  };
}

function sendWarmUp(): void {
  warmups++;
  sink?.update(0, `warmup ${warmups}`);
}

function warmUp(): void {
  sendWarmUp();
  timer = setTimeout(warmUp, WARMUP_EVERY_MS);
}

/**
 * Calls `send` `count` times (Infinity: until its timer is cleared) at `ratePerSecond`, `batch` at
 * a time, the first at once: each tick (1 ms, or a batch's time) sends the batches due by the
 * clock, so a stalled loop catches up. Then `done`.
 */
function paced(
  ratePerSecond: number,
  count: number,
  batch: number,
  send: () => void,
  done: () => void,
): void {
  const startUs = nowUs();
  const tickMs = Math.max(1, Math.floor((batch * 1000) / ratePerSecond));
  let sent = 0;
  const tick = () => {
    const batches = Math.floor(((nowUs() - startUs) / 1e6) * (ratePerSecond / batch)) + 1;
    const due = Math.min(count, batches * batch);
    for (; sent < due; sent++) send();
    if (sent >= count) done();
    else timer = setTimeout(tick, tickMs);
  };
  tick();
}

/** Warm-up updates at `ratePerSecond` (a burst's at BURST_WARM_RATE), `batch` at a time, until `go`. */
function warmAtRate(ratePerSecond: number, batch: number): void {
  clearTimeout(timer);
  const rate = ratePerSecond > 0 ? ratePerSecond : BURST_WARM_RATE;
  paced(rate, Number.POSITIVE_INFINITY, batch, sendWarmUp, () => {});
}

/** `count` updates at `ratePerSecond` (0: all at once), `batch` at a time, then done. */
async function run(count: number, ratePerSecond: number, batch: number): Promise<McpWorkerDone> {
  const active = sink;
  if (active === undefined) throw new Error('go before config');
  // The warm-up counter stops here: the bridge's measured progress values follow on from it.
  clearTimeout(timer);
  let sent = 0;
  const send = () => {
    sent++;
    active.update(sent, `n=${sent} t=${nowUs()}`);
  };
  if (ratePerSecond <= 0) {
    while (sent < count) send();
  } else {
    await new Promise<void>((resolve) => paced(ratePerSecond, count, batch, send, resolve));
  }
  const lastUpdateUs = nowUs();
  await active.done();
  return { type: 'sent', sent, lastUpdateUs, doneAckUs: nowUs(), warmups };
}

onParentMessage((message: Message) => {
  switch (message.type) {
    case 'config':
      config = message.config as McpWorkerConfig;
      (config.kind === 'bridge'
        ? bridgeSink(config.socket, config.token ?? '', config.intervalMs, config.clientRoot)
        : config.kind === 'floor'
          ? floorSink(config.socket)
          : telemetrySink(config.socket)
      ).then(
        (made) => {
          sink = made;
          toParent({ type: 'ready' });
        },
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      break;
    case 'token':
      // The relay hands out its route key only once the tool call runs.
      config = { ...config, token: message.token as string };
      bridgeSink(config.socket, config.token ?? '', config.intervalMs, config.clientRoot).then(
        (made) => {
          sink = made;
          toParent({ type: 'ready' });
        },
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      break;
    case 'warmup':
      warmUp();
      break;
    case 'warm':
      warmAtRate(message.ratePerSecond as number, message.batch as number);
      break;
    case 'go':
      run(message.count as number, message.ratePerSecond as number, message.batch as number).then(
        (done) => toParent({ ...done }),
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      break;
  }
});
