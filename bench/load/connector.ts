/**
 * Scale: opens many idle worker connections (each proves it is served with a
 * ping answered by a pong), then many idle WebSocket sessions, and holds
 * them open while the harness reads the server's memory.
 */
import { connect, type Socket } from 'node:net';
import WebSocket from 'ws';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import type {
  ConnectorConfig,
  ConnectResult,
  SubscriberTarget,
  WorkerTarget,
} from '../lib/targets.ts';

const held: Array<{ close(): void }> = [];

function openWorker(target: WorkerTarget): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket: Socket =
      target.kind === 'unix'
        ? connect({ path: target.path })
        : connect({ port: target.port, host: '127.0.0.1' });
    socket.setEncoding('utf8');
    socket.once('error', reject);
    let seen = '';
    socket.on('data', (text: string) => {
      seen += text;
      const answered =
        target.kind === 'unix' ? seen.includes('"type":"pong"') : seen.includes('PONG\r\n');
      if (answered) {
        seen = '';
        socket.removeAllListeners('data');
        socket.off('error', reject);
        socket.on('error', () => {});
        held.push({ close: () => socket.destroy() });
        resolve();
      } else if (target.kind === 'nats' && seen.startsWith('INFO') && seen.includes('\r\n')) {
        seen = '';
        socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
      }
    });
    if (target.kind === 'unix')
      socket.once('connect', () => socket.write('{"type":"ping","data":{}}\f'));
  });
}

function openSession(target: SubscriberTarget): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws =
      target.kind === 'bridge'
        ? new WebSocket(target.url, 'mcp-progress.v1', {
            headers: { authorization: `Bearer ${target.secret}` },
            perMessageDeflate: false,
          })
        : new WebSocket(target.kind === 'relay' ? target.url : '', { perMessageDeflate: false });
    ws.once('open', () => {
      held.push({ close: () => ws.terminate() });
      resolve();
    });
    ws.once('error', reject);
    ws.once('unexpected-response', (_request, response) =>
      reject(new Error(`HTTP ${response.statusCode}`)),
    );
  });
}

/** Opens `count` connections, at most `concurrency` at a time; times each one. */
async function openMany(
  count: number,
  concurrency: number,
  open: () => Promise<void>,
): Promise<ConnectResult> {
  const times: number[] = [];
  const errors: string[] = [];
  let next = 0;
  let failures = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      next++;
      const at = performance.now();
      try {
        await open();
        times.push(performance.now() - at);
      } catch (error) {
        failures++;
        if (errors.length < 5) errors.push((error as Error).message);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  const elapsedMs = performance.now() - started;
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.max(0, Math.ceil(q * times.length) - 1)] ?? Number.NaN;
  return {
    type: 'connected',
    count: times.length,
    failures,
    elapsedMs,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    errors,
  };
}

let config: ConnectorConfig;

onParentMessage((message: Message) => {
  switch (message.type) {
    case 'config':
      config = message.config as ConnectorConfig;
      toParent({ type: 'ready' });
      return;
    case 'first': {
      // One of each before the measured ones: the first connection of each kind also pays
      // the one-time load of what serves it (the bridge loads node-ipc, ws and zod then).
      const sessions = config.sessions;
      void openWorker(config.workers.target)
        .then(() => (sessions === undefined ? undefined : openSession(sessions.target)))
        .then(
          () => toParent({ type: 'first-open' }),
          (error: Error) => toParent({ type: 'first-open', error: error.message }),
        );
      return;
    }
    case 'workers': {
      const { target, count, concurrency } = config.workers;
      void openMany(count, concurrency, () => openWorker(target)).then((result) =>
        toParent({ ...result }),
      );
      return;
    }
    case 'sessions': {
      const sessions = config.sessions;
      if (sessions === undefined) return;
      void openMany(sessions.count, sessions.concurrency, () => openSession(sessions.target)).then(
        (result) => toParent({ ...result }),
      );
      return;
    }
  }
});

process.on('exit', () => {
  for (const connection of held) connection.close();
});
