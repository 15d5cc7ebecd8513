/**
 * A load generator playing gateways: `sessions` WebSocket sessions (or NATS
 * connections), each subscribed to every token. Counts what arrives, reports
 * progress to the harness (which feeds the publisher's window), and at the
 * end says whether every session got the final value, and the latencies.
 */
import { type NatsConnection, connect as natsConnect } from 'nats';
import { type Message, onParentMessage, toParent } from '../lib/child.ts';
import { natsSubject, nowUs } from '../lib/frames.ts';
import { openLeanWebSocket } from '../lib/lean-websocket.ts';
import { SampleList, summariseLatencies } from '../lib/stats.ts';
import type { SessionResult, SubscriberConfig, SubscriberResult } from '../lib/targets.ts';

interface Session extends SessionResult {
  /** The newest raw message, parsed only at the end in count mode. */
  lastRaw: Buffer | Uint8Array | undefined;
  close(): void;
}

let config: SubscriberConfig;
const sessions: Session[] = [];
const errors: string[] = [];
const latencies = new SampleList();
let recordFromUs = Number.POSITIVE_INFINITY;
/** A second window before the measured one (`record-early`): the first seconds of fresh processes. */
const earlyLatencies = new SampleList();
let earlyFromUs = Number.POSITIVE_INFINITY;
let earlyToUs = Number.NEGATIVE_INFINITY;
let expectation: { final: Record<string, number>; count: number | undefined } | undefined;
let finished = false;
let expireTimer: NodeJS.Timeout | undefined;

function newSession(): Session {
  return {
    count: 0,
    lastProgress: {},
    outOfOrder: 0,
    firstAtMs: Number.NaN,
    lastAtMs: Number.NaN,
    lastRaw: undefined,
    close: () => {},
  };
}

interface Progress {
  progressToken: string;
  progress: number;
  _meta?: { t?: number };
}

/** The progress params, whichever envelope the system wraps them in. */
function progressOf(raw: Buffer | Uint8Array): Progress | undefined {
  const message = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString());
  const params = (message.params ?? message.data) as Progress | undefined;
  return params?.progressToken === undefined ? undefined : params;
}

function note(session: Session, params: Progress): void {
  const previous = session.lastProgress[params.progressToken];
  if (previous !== undefined && !(params.progress > previous)) session.outOfOrder++;
  session.lastProgress[params.progressToken] = params.progress;
}

function receive(session: Session, raw: Buffer | Uint8Array): void {
  const at = performance.now();
  if (session.count === 0) session.firstAtMs = at;
  session.count++;
  session.lastAtMs = at;
  if (config.mode === 'count') {
    session.lastRaw = raw;
  } else {
    const params = progressOf(raw);
    if (params === undefined) {
      errors.push(`unexpected message: ${Buffer.from(raw).toString().slice(0, 200)}`);
      return;
    }
    note(session, params);
    const stamp = params._meta?.t;
    if (stamp !== undefined) {
      if (stamp >= recordFromUs) latencies.push(nowUs() - stamp);
      else if (stamp >= earlyFromUs && stamp < earlyToUs) earlyLatencies.push(nowUs() - stamp);
    }
  }
  if (expectation !== undefined) check();
}

function sessionComplete(session: Session): boolean {
  if (expectation === undefined) return false;
  if (expectation.count !== undefined) return session.count >= expectation.count;
  for (const [token, final] of Object.entries(expectation.final)) {
    if (session.lastProgress[token] !== final) return false;
  }
  return true;
}

function check(): void {
  if (finished) return;
  for (const session of sessions) if (!sessionComplete(session)) return;
  finish(true);
}

function finish(complete: boolean): void {
  if (finished) return;
  finished = true;
  clearTimeout(expireTimer);
  const results: SessionResult[] = sessions.map((session) => {
    if (config.mode === 'count' && session.lastRaw !== undefined) {
      const params = progressOf(session.lastRaw);
      if (params !== undefined) note(session, params);
    }
    return {
      count: session.count,
      lastProgress: session.lastProgress,
      outOfOrder: session.outOfOrder,
      firstAtMs: session.firstAtMs,
      lastAtMs: session.lastAtMs,
    };
  });
  const result: SubscriberResult = { type: 'result', sessions: results, complete, errors };
  if (config.mode === 'parse') {
    result.latency = summariseLatencies(latencies.values());
    if (earlyLatencies.length > 0)
      result.earlyLatency = summariseLatencies(earlyLatencies.values());
  }
  toParent({ ...result });
}

async function openBridge(url: string, secret: string, session: Session): Promise<void> {
  // Subscribe to each token and wait for every answer before counting notifications.
  let answered: (error?: Error) => void = () => {};
  let answers = 0;
  let onMessage = (payload: Buffer) => {
    const reply = JSON.parse(payload.toString());
    if (reply.error) answered(new Error(`subscribe refused: ${JSON.stringify(reply.error)}`));
    if (++answers === config.tokens.length) {
      onMessage = (raw) => receive(session, raw);
      answered();
    }
  };
  const ws = await openLeanWebSocket(
    url,
    { 'sec-websocket-protocol': 'mcp-progress.v1', authorization: `Bearer ${secret}` },
    { message: (payload) => onMessage(payload), closed: (reason) => closedEarly(reason) },
  );
  await new Promise<void>((resolve, reject) => {
    answered = (error) => (error ? reject(error) : resolve());
    config.tokens.forEach((progressToken, id) => {
      ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'progress/subscribe',
          params: { progressToken, minIntervalMs: config.minIntervalMs },
        }),
      );
    });
  });
  session.close = () => ws.close();
}

async function openRelay(url: string, session: Session): Promise<void> {
  const ws = await openLeanWebSocket(
    url,
    {},
    { message: (raw) => receive(session, raw), closed: (reason) => closedEarly(reason) },
  );
  session.close = () => ws.close();
}

async function openNats(port: number, session: Session): Promise<void> {
  const nc: NatsConnection = await natsConnect({ servers: `127.0.0.1:${port}`, noEcho: true });
  for (const token of config.tokens) {
    nc.subscribe(natsSubject(token), {
      callback: (error, message) => {
        if (error) errors.push(error.message);
        else receive(session, message.data);
      },
    });
  }
  await nc.flush();
  nc.closed().then((error) => {
    if (error && !finished) errors.push(`NATS connection closed: ${error.message}`);
  });
  session.close = () => void nc.close();
}

function closedEarly(reason: string): void {
  if (!finished) errors.push(`session closed early: ${reason}`);
}

async function start(): Promise<void> {
  const { target } = config;
  for (let i = 0; i < config.sessions; i++) {
    const session = newSession();
    sessions.push(session);
    if (target.kind === 'bridge') await openBridge(target.url, target.secret, session);
    else if (target.kind === 'relay') await openRelay(target.url, session);
    else await openNats(target.port, session);
  }
  setInterval(() => {
    let least = Number.POSITIVE_INFINITY;
    let total = 0;
    for (const session of sessions) {
      least = Math.min(least, session.count);
      total += session.count;
    }
    toParent({ type: 'report', atMs: nowUs() / 1000, least, total });
  }, config.reportEveryMs).unref();
}

onParentMessage((message: Message) => {
  switch (message.type) {
    case 'config':
      config = message.config as SubscriberConfig;
      start().then(
        () => toParent({ type: 'ready' }),
        (error: Error) => toParent({ type: 'failed', error: error.message }),
      );
      return;
    case 'record-from':
      recordFromUs = message.fromUs as number;
      return;
    case 'record-early':
      earlyFromUs = message.fromUs as number;
      earlyToUs = message.toUs as number;
      return;
    case 'expect':
      expectation = {
        final: message.final as Record<string, number>,
        count: message.count as number | undefined,
      };
      expireTimer = setTimeout(() => finish(false), message.timeoutMs as number);
      check();
      return;
  }
});
