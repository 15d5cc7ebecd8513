/**
 * The backplane workload's floor: the same five processes and the same nats-server, with trivial
 * Node relays in place of the daemons. A paced publisher with one Unix socket per token writes to
 * relay A; locally A writes each line to the subscriber's socket, across NATS it publishes it on a
 * subject that a JetStream stream captures as the daemon's does (file store, one message per
 * subject), and relay B writes what it hears to the subscriber. What the trivial chain adds over
 * its local path is what two more processes and nats-server cost on this machine, without any of
 * the bridge's work: the backplane workload's "p99 added" reads against it.
 *
 * Usage: node bench/backplane-floor.ts [--rate N] [--repeat N] [--smoke]
 * It measures aligned workers (every token's frame due on the same tick) and staggered ones.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectSocket, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect as connectNats, DiscardPolicy, nanos, RetentionPolicy, StorageType } from 'nats';
import { framesDue, nowUs } from './lib/frames.ts';
import { natsPorts } from './lib/nats-ports.ts';
import { median, summariseLatencies } from './lib/stats.ts';
import { natsServerPath, spawnServer, untilReady } from './lib/systems.ts';

const TOKENS = 4;
/** As the backplane workload's full run; --smoke: a few hundred ms, which checks the harness. */
const FULL = { settleMs: 10_000, measureMs: 4_000 };
const SMOKE = { settleMs: 300, measureMs: 500 };
const PADDING = 'x'.repeat(160);
type Phases = 'aligned' | 'staggered';
type Chain = 'local' | 'backplane';

/** Lines end with \n; each starts with {"t":<stamp>,"k":<token index>. */
function onLines(socket: Socket, each: (line: string) => void): void {
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (text: string) => {
    pending += text;
    let end = pending.indexOf('\n');
    while (end >= 0) {
      each(pending.slice(0, end + 1));
      pending = pending.slice(end + 1);
      end = pending.indexOf('\n');
    }
  });
}

function listen(path: string, each: (line: string) => void): Promise<void> {
  return new Promise((resolve) => {
    createServer((socket) => onLines(socket, each)).listen(path, resolve);
  });
}

function dial(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connectSocket(path, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** The child side: argv role, then role-specific arguments; answers `ready`, then `result`. */
async function child(role: string, args: string[]): Promise<void> {
  const send = (message: object) => process.send?.(message);
  if (role === 'subscriber') {
    const [path] = args as [string];
    const stamps: number[] = [];
    const latencies: number[] = [];
    await listen(path, (line) => {
      const stamp = Number(line.slice(5, line.indexOf(',')));
      stamps.push(stamp);
      latencies.push(nowUs() - stamp);
    });
    process.on('message', () => send({ type: 'result', stamps, latencies }));
  } else if (role === 'relay-a') {
    const [path, next, natsUrl] = args as [string, string, string];
    if (natsUrl === '-') {
      const out = await dial(next);
      await listen(path, (line) => out.write(line));
    } else {
      const nc = await connectNats({ servers: natsUrl });
      const encoder = new TextEncoder();
      await listen(path, (line) =>
        nc.publish(`floor.${line.charAt(line.indexOf('"k":') + 4)}`, encoder.encode(line)),
      );
    }
  } else if (role === 'relay-b') {
    const [next, natsUrl] = args as [string, string];
    const out = await dial(next);
    const nc = await connectNats({ servers: natsUrl });
    const decoder = new TextDecoder();
    nc.subscribe('floor.>', {
      callback: (_error, message) => out.write(decoder.decode(message.data)),
    });
    await nc.flush();
  } else if (role === 'publisher') {
    const [path, rate, phases, seconds] = args as [string, string, Phases, string];
    const sockets = await Promise.all(Array.from({ length: TOKENS }, () => dial(path)));
    process.once('message', () => {
      const perToken = Number(rate) / TOKENS;
      const sent = sockets.map(() => 0);
      const started = nowUs();
      const tick = () => {
        const elapsedS = (nowUs() - started) / 1e6;
        sockets.forEach((socket, k) => {
          const due = framesDue(perToken, elapsedS, k, TOKENS, phases);
          let text = '';
          while ((sent[k] ?? 0) < due) {
            sent[k] = (sent[k] ?? 0) + 1;
            text += `{"t":${nowUs()},"k":${k},"p":"${PADDING}"}\n`;
          }
          if (text !== '') socket.write(text);
        });
        if (elapsedS < Number(seconds)) setTimeout(tick, 1);
        else send({ type: 'sent', count: sent.reduce((sum, each) => sum + each, 0) });
      };
      tick();
    });
  }
  send({ type: 'ready' });
}

function next(helper: ChildProcess, type: string): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const listener = (message: Record<string, unknown>) => {
      if (message.type !== type) return;
      helper.off('message', listener);
      resolve(message);
    };
    helper.on('message', listener);
  });
}

async function start(
  role: string,
  args: string[],
  children: ChildProcess[],
): Promise<ChildProcess> {
  const helper = fork(import.meta.filename, [role, ...args], { execArgv: [] });
  children.push(helper);
  await next(helper, 'ready');
  return helper;
}

async function measure(
  chain: Chain,
  phases: Phases,
  rate: number,
  { settleMs, measureMs }: typeof FULL,
): Promise<Float64Array> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-progress-floor-'));
  const children: ChildProcess[] = [];
  let natsUrl = '-';
  let server: ReturnType<typeof spawnServer> | undefined;
  try {
    if (chain === 'backplane') {
      const binary = natsServerPath();
      if (binary === undefined) throw new Error('nats-server is not installed');
      server = spawnServer(binary, ['-a', '127.0.0.1', '-p', '-1', '-js', '-sd', dir]);
      const running = server;
      await untilReady(running, 'nats-server', () => running.stderr().includes('Server is ready'));
      natsUrl = `nats://127.0.0.1:${natsPorts(running.stderr()).client}`;
      const nc = await connectNats({ servers: natsUrl });
      const jsm = await nc.jetstreamManager();
      await jsm.streams.add({
        name: 'floor',
        subjects: ['floor.>'],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        max_msgs_per_subject: 1,
        max_age: nanos(3_600_000),
      });
      await nc.close();
    }
    const subscriber = await start('subscriber', [join(dir, 'sub.sock')], children);
    if (chain === 'backplane') await start('relay-b', [join(dir, 'sub.sock'), natsUrl], children);
    await start('relay-a', [join(dir, 'a.sock'), join(dir, 'sub.sock'), natsUrl], children);
    const seconds = (settleMs + measureMs) / 1000;
    const publisher = await start(
      'publisher',
      [join(dir, 'a.sock'), String(rate), phases, String(seconds)],
      children,
    );
    const measuredFrom = nowUs() + settleMs * 1000;
    publisher.send({ type: 'go' });
    const { count } = (await next(publisher, 'sent')) as { count: number };
    await new Promise((resolve) => setTimeout(resolve, 200));
    subscriber.send({ type: 'result' });
    const { stamps, latencies } = (await next(subscriber, 'result')) as {
      stamps: number[];
      latencies: number[];
    };
    if (stamps.length !== count)
      throw new Error(`${phases} ${chain}: ${stamps.length} of ${count} frames arrived`);
    const settled = latencies.filter((_, i) => (stamps[i] ?? 0) >= measuredFrom);
    return Float64Array.from(settled);
  } finally {
    for (const each of children) each.kill();
    server?.child.kill();
    rmSync(dir, { recursive: true, force: true });
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

const [role, ...rest] = process.argv.slice(2);
if (role !== undefined && !role.startsWith('--')) await child(role, rest);
else await main();
