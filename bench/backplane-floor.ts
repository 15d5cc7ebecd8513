/**
 * The backplane workload's floor: the same five processes and the same nats-server, with trivial
 * Node relays in place of the daemons. A paced publisher with one Unix socket per token writes to
 * relay A; locally A writes each frame to the subscriber's socket, across NATS it publishes it on
 * a live subject and, as the daemon does, each token's newest frame every 100 ms on a kept subject
 * that a JetStream stream like the daemon's captures (file store, one message per subject); relay
 * B writes what it hears live to the subscriber. What the trivial chain adds over
 * its local path is what two more processes and nats-server cost on this machine, without any of
 * the bridge's work: the backplane workload's "p99 added" reads against it.
 *
 * Usage: node bench/backplane-floor.ts [--rate N] [--repeat N] [--smoke]
 * It measures aligned workers (every token's frame due on the same tick) and staggered ones.
 * Run with an IPC channel (by the harness, through Child), it is one of the chain's helpers.
 */
import { connect as connectSocket, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect as connectNats, DiscardPolicy, nanos, RetentionPolicy, StorageType } from 'nats';
import { startNatsServer } from './lib/backplane.ts';
import { Child, type Message, onParentMessage, toParent } from './lib/child.ts';
import { FormFeedSplitter, framesDue, nowUs } from './lib/frames.ts';
import { median, summariseLatencies } from './lib/stats.ts';
import { removeScratch, scratchDir } from './lib/systems.ts';

const TOKENS = 4;
/** As the backplane workload's full run; --smoke: a few hundred ms, which checks the harness. */
const FULL = { settleMs: 10_000, measureMs: 4_000 };
const SMOKE = { settleMs: 300, measureMs: 500 };
const PADDING = 'x'.repeat(160);
/** How often relay A feeds the store, as the daemon does (STORE_EVERY_MS, src/daemon/backplane.ts). */
const STORE_EVERY_MS = 100;
type Phases = 'aligned' | 'staggered';
type Chain = 'local' | 'backplane';

/** What a helper is told to be: its role and where it reads and writes. */
type Role =
  | { role: 'subscriber'; path: string }
  | { role: 'relay-a'; path: string; next: string; natsUrl: string | undefined }
  | { role: 'relay-b'; next: string; natsUrl: string }
  | { role: 'publisher'; path: string; rate: number; phases: Phases; seconds: number };

/** Frames end with a form feed; each starts with {"t":<stamp>,"k":<token index>. */
function listen(path: string, each: (frame: string) => void): Promise<void> {
  return new Promise((resolve) => {
    createServer((socket) => {
      const splitter = new FormFeedSplitter();
      socket.setEncoding('utf8');
      socket.on('data', (text: string) => splitter.push(text, each));
    }).listen(path, resolve);
  });
}

function dial(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connectSocket(path, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** The helper's later messages from the harness (`go`, `expect`), once its role has set it. */
let onMessage: (message: Message) => void = () => {};

/** The helper's side: told its role by `config`, it answers `ready`, then `sent` or `result`. */
async function helper(role: Role): Promise<void> {
  if (role.role === 'subscriber') {
    const stamps: number[] = [];
    const latencies: number[] = [];
    let expected = Number.POSITIVE_INFINITY;
    const answer = () => toParent({ type: 'result', stamps, latencies });
    await listen(role.path, (frame) => {
      const stamp = Number(frame.slice(5, frame.indexOf(',')));
      stamps.push(stamp);
      latencies.push(nowUs() - stamp);
      if (stamps.length === expected) answer();
    });
    onMessage = (message) => {
      if (message.type !== 'expect') return;
      expected = message.count as number;
      if (stamps.length >= expected) answer();
    };
  } else if (role.role === 'relay-a') {
    if (role.natsUrl === undefined) {
      const out = await dial(role.next);
      await listen(role.path, (frame) => out.write(`${frame}\f`));
    } else {
      const nc = await connectNats({ servers: role.natsUrl });
      const encoder = new TextEncoder();
      const newest = new Map<string, Uint8Array>();
      setInterval(() => {
        for (const [token, data] of newest) nc.publish(`floor.k.${token}`, data);
        newest.clear();
      }, STORE_EVERY_MS);
      await listen(role.path, (frame) => {
        const token = frame.charAt(frame.indexOf('"k":') + 4);
        const data = encoder.encode(frame);
        nc.publish(`floor.s.${token}`, data);
        newest.set(token, data);
      });
    }
  } else if (role.role === 'relay-b') {
    const out = await dial(role.next);
    const nc = await connectNats({ servers: role.natsUrl });
    const decoder = new TextDecoder();
    nc.subscribe('floor.s.>', {
      callback: (_error, message) => out.write(`${decoder.decode(message.data)}\f`),
    });
    await nc.flush();
  } else {
    const sockets = await Promise.all(Array.from({ length: TOKENS }, () => dial(role.path)));
    onMessage = (message) => {
      if (message.type === 'go') pace(sockets, role);
    };
  }
  toParent({ type: 'ready' });
}

/** The bench publisher's pacing (bench/load/publisher.ts): every 1 ms tick, what is due. */
function pace(sockets: Socket[], { rate, phases, seconds }: Role & { role: 'publisher' }): void {
  const perToken = rate / TOKENS;
  const sent = sockets.map(() => 0);
  const started = nowUs();
  const tick = () => {
    const elapsedS = (nowUs() - started) / 1e6;
    sockets.forEach((socket, k) => {
      const due = framesDue(perToken, elapsedS, k, TOKENS, phases);
      let text = '';
      for (; (sent[k] ?? 0) < due; sent[k] = (sent[k] ?? 0) + 1)
        text += `{"t":${nowUs()},"k":${k},"p":"${PADDING}"}\f`;
      if (text !== '') socket.write(text);
    });
    if (elapsedS < seconds) setTimeout(tick, 1);
    else toParent({ type: 'sent', count: sent.reduce((sum, each) => sum + each, 0) });
  };
  tick();
}

async function start(role: Role, helpers: Child[]): Promise<Child> {
  const child = new Child('backplane-floor.ts');
  helpers.push(child);
  child.send({ type: 'config', config: role });
  await child.ready(30_000);
  return child;
}

/** The stream the daemon makes (src/daemon/backplane.ts, ensureStore), on the floor's subjects. */
async function addStore(natsUrl: string): Promise<void> {
  const nc = await connectNats({ servers: natsUrl });
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({
    name: 'floor',
    subjects: ['floor.k.>'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    max_age: nanos(3_600_000),
  });
  await nc.close();
}

/** One run of one chain: the settled window's latencies (µs). */
async function measure(
  chain: Chain,
  phases: Phases,
  rate: number,
  { settleMs, measureMs }: typeof FULL,
): Promise<Float64Array> {
  const dir = scratchDir('floor');
  const helpers: Child[] = [];
  const nats = chain === 'backplane' ? await startNatsServer() : undefined;
  try {
    if (nats !== undefined) await addStore(nats.url);
    const sub = join(dir, 'sub.sock');
    const a = join(dir, 'a.sock');
    const subscriber = await start({ role: 'subscriber', path: sub }, helpers);
    if (nats !== undefined) await start({ role: 'relay-b', next: sub, natsUrl: nats.url }, helpers);
    await start({ role: 'relay-a', path: a, next: sub, natsUrl: nats?.url }, helpers);
    const seconds = (settleMs + measureMs) / 1000;
    const publisher = await start({ role: 'publisher', path: a, rate, phases, seconds }, helpers);
    const measuredFrom = nowUs() + settleMs * 1000;
    const sent = publisher.next<Message & { count: number }>('sent', (seconds + 60) * 1000);
    publisher.send({ type: 'go' });
    const { count } = await sent;
    const result = subscriber.next<Message & { stamps: number[]; latencies: number[] }>(
      'result',
      10_000,
    );
    subscriber.send({ type: 'expect', count });
    const { stamps, latencies } = await result.catch(() => {
      throw new Error(`${phases} ${chain}: not every one of ${count} frames arrived`);
    });
    return Float64Array.from(latencies.filter((_, i) => (stamps[i] ?? 0) >= measuredFrom));
  } finally {
    for (const each of helpers) await each.stop();
    await nats?.stop();
    removeScratch(dir);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '1000' },
      repeat: { type: 'string', default: '3' },
      smoke: { type: 'boolean', default: false },
    },
  });
  const rate = Number(values.rate);
  const repeat = values.smoke ? 1 : Number(values.repeat);
  const sizes = values.smoke ? SMOKE : FULL;
  console.log(
    `trivial relays, ${TOKENS} tokens at ${rate} frames/s in all, measured ${sizes.measureMs / 1000} s after ${sizes.settleMs / 1000} s; median p99 of ${repeat} runs`,
  );
  console.log('| workers | local p99 | backplane p99 | p99 added |\n| --- | --: | --: | --: |');
  for (const phases of ['aligned', 'staggered'] as const) {
    const p99 = { local: [] as number[], backplane: [] as number[] };
    for (let run = 0; run < repeat; run++) {
      for (const chain of ['local', 'backplane'] as const) {
        const figures = summariseLatencies(await measure(chain, phases, rate, sizes));
        p99[chain].push(figures.p99Ms);
        console.error(
          `  ${phases} ${chain} (run ${run + 1}/${repeat}): ${figures.count} frames, p50 ${figures.p50Ms.toFixed(2)} ms, p99 ${figures.p99Ms.toFixed(2)} ms`,
        );
      }
    }
    const local = median(p99.local);
    const backplane = median(p99.backplane);
    console.log(
      `| ${phases} | ${local.toFixed(2)} ms | ${backplane.toFixed(2)} ms | ${(backplane - local).toFixed(2)} ms |`,
    );
  }
}

if (process.send === undefined) await main();
else
  onParentMessage((message) => {
    if (message.type === 'config') void helper(message.config as Role);
    else onMessage(message);
  });
