/**
 * The probe of the "flood plus probe" workload: while other processes flood
 * the worker socket, every `intervalMs` it (1) opens a new connection and
 * times connect + ping -> pong, and (2) sends one frame on an honest worker
 * connection and times it until the honest subscriber (a WebSocket session,
 * coalescing off, in this process: one clock) receives it.
 */
import { connect } from 'node:net';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import { FormFeedSplitter } from '../lib/frames.ts';
import { openLeanWebSocket } from '../lib/lean-websocket.ts';
import { SampleList, summariseLatencies } from '../lib/stats.ts';

export interface ProbeConfig {
  socketPath: string;
  url: string;
  secret: string;
  token: string;
  intervalMs: number;
}

let config: ProbeConfig;
const errors: string[] = [];
const pingUs = new SampleList();
const honestUs = new SampleList();
let running = false;
let stopRequested = false;
let loop: Promise<void> | undefined;

/** Subscriber side: progress value -> resolve of the waiting probe. */
const awaitingDelivery = new Map<number, () => void>();
let honestWrite: (text: string) => void = () => {};

function frame(type: string, data: unknown): string {
  return `${JSON.stringify({ type, data })}\f`;
}

function note(error: string): void {
  if (errors.length < 5) errors.push(error);
}

async function openHonestPair(): Promise<void> {
  let subscribed: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    subscribed = resolve;
  });
  await openLeanWebSocket(
    config.url,
    { 'sec-websocket-protocol': 'mcp-progress.v1', authorization: `Bearer ${config.secret}` },
    {
      message: (payload) => {
        const message = JSON.parse(payload.toString()) as {
          id?: number;
          error?: unknown;
          params?: { progress?: number };
        };
        if (message.id !== undefined) {
          if (message.error !== undefined)
            note(`subscribe refused: ${JSON.stringify(message.error)}`);
          subscribed();
          return;
        }
        const progress = message.params?.progress;
        if (progress !== undefined) {
          awaitingDelivery.get(progress)?.();
          awaitingDelivery.delete(progress);
        }
      },
      closed: (reason) => {
        if (!stopRequested) note(`honest session closed: ${reason}`);
      },
    },
  ).then((ws) =>
    ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'progress/subscribe',
        params: { progressToken: config.token, minIntervalMs: 0 },
      }),
    ),
  );
  await ready;
  await new Promise<void>((resolve, reject) => {
    const socket = connect({ path: config.socketPath }, () => resolve());
    socket.setEncoding('utf8');
    const splitter = new FormFeedSplitter();
    socket.on('data', (text: string) =>
      splitter.push(text, (reply) => {
        if (reply.startsWith('{"type":"rejected"')) note(reply.slice(0, 200));
      }),
    );
    socket.once('error', reject);
    honestWrite = (text) => socket.write(text);
  });
}

/** A new connection's connect + ping, until its pong. */
function probePing(): Promise<void> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connect({ path: config.socketPath });
    socket.setEncoding('utf8');
    const splitter = new FormFeedSplitter();
    socket.once('connect', () => socket.write(frame('ping', {})));
    socket.on('data', (text: string) =>
      splitter.push(text, (reply) => {
        if (!reply.startsWith('{"type":"pong"')) return;
        pingUs.push((performance.now() - started) * 1000);
        socket.destroy();
        resolve();
      }),
    );
    socket.once('error', (error) => {
      note(`probe connect: ${error.message}`);
      resolve();
    });
  });
}

let nextProgress = 1;

/** One honest frame, until the honest subscriber has it. */
function probeHonest(): Promise<void> {
  const progress = nextProgress++;
  const started = performance.now();
  return new Promise((resolve) => {
    awaitingDelivery.set(progress, () => {
      honestUs.push((performance.now() - started) * 1000);
      resolve();
    });
    honestWrite(frame('progress', { v: 1, progressToken: config.token, progress }));
  });
}

async function run(): Promise<void> {
  while (running) {
    const started = performance.now();
    await Promise.all([probePing(), probeHonest()]);
    const rest = config.intervalMs - (performance.now() - started);
    if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
  }
}

onParentMessage((message: Message) => {
  switch (message.type) {
    case 'config':
      config = message.config as ProbeConfig;
      openHonestPair().then(
        () => toParent({ type: 'ready' }),
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      return;
    case 'go':
      running = true;
      loop = run();
      return;
    case 'stop':
      running = false;
      stopRequested = true;
      // The probe in flight finishes (or its pong never comes: then report without it).
      void Promise.race([loop, new Promise((resolve) => setTimeout(resolve, 10_000))]).then(() =>
        toParent({
          type: 'result',
          ping: summariseLatencies(pingUs.values()),
          honest: summariseLatencies(honestUs.values()),
          errors,
        }),
      );
      return;
  }
});
