/**
 * The three worker clients hold to one rule, each against a real daemon, so that none sends what
 * the daemon refuses (docs/CLIENTS.md):
 * - they fit a message ("Messages are bounded"): what is not Unicode becomes U+FFFD, and then a
 *   message over 4096 UTF-8 bytes is cut to 4093, never inside a character, and "..." added. The
 *   Node client (fitMessage), the Python client (_fit_message) and the C client (mcpp_fit_message)
 *   each publish the same messages, in updates and in a done, and a gateway subscribed to each
 *   stream must see the text the rule gives, the same from all three;
 * - they refuse, themselves, a progress or total the daemon would refuse ("Numbers are checked"),
 *   a token it would refuse ("Tokens are checked") and a done status it would refuse, and take
 *   every one it takes: the daemon refuses none of their frames.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildCWorker, cc } from '../helpers/c-client.js';
import { cleanupAll, collectOutput, eventually, tempDir, waitForExit } from '../helpers/daemon.js';
import {
  type DrivenWorker,
  killWorkers,
  nodeWorker,
  pythonWorker,
} from '../helpers/driven-worker.js';
import { useWatchedBridge, type WatchedBridge } from '../helpers/gateway.js';
import { events, stepThrough, waitForEvent } from '../helpers/stepped-worker.js';

afterEach(() => killWorkers());
afterAll(() => cleanupAll());
vi.setConfig({ testTimeout: 180_000, hookTimeout: 60_000 });

const a = (count: number) => 'a'.repeat(count);

/**
 * Each message as Python's client is given it: a byte that is not UTF-8 (in a name read with
 * os.listdir, or an argument) is the lone surrogate U+DC80..U+DCFF that surrogateescape decodes
 * it to. The Node client is given the same string (lone surrogates are what a JavaScript string
 * holds that is not Unicode), and the C client the bytes themselves.
 */
const UPDATES: Array<{ what: string; text: string; fitted: string }> = [
  { what: 'ASCII over the limit', text: 'x'.repeat(5000), fitted: `${'x'.repeat(4093)}...` },
  {
    what: '4096 bytes, ending in a 4-byte character',
    text: `${a(4092)}😀`,
    fitted: `${a(4092)}😀`,
  },
  { what: 'a 4-byte character one byte over', text: `${a(4093)}😀`, fitted: `${a(4093)}...` },
  {
    what: 'a 2-byte character across the cut',
    text: `${a(4092)}${'é'.repeat(10)}`,
    fitted: `${a(4092)}...`,
  },
  {
    what: 'a 3-byte character across the cut',
    text: `${a(4091)}${'€'.repeat(10)}`,
    fitted: `${a(4091)}...`,
  },
  {
    what: 'a 3-byte character ending at the cut',
    text: `${a(4090)}${'€'.repeat(10)}`,
    fitted: `${a(4090)}€...`,
  },
  {
    what: 'a 4-byte character across the cut',
    text: `${a(4090)}${'😀'.repeat(3)}`,
    fitted: `${a(4090)}...`,
  },
  {
    what: 'bytes that are not UTF-8',
    text: 'file-\udcff\udcfe.bin',
    fitted: 'file-\ufffd\ufffd.bin',
  },
  {
    what: 'a lone continuation byte, an overlong form, an encoded surrogate, a cut-off character, past U+10FFFF',
    text: 'a\udc80b\udcc0\udc80c\udced\udca0\udc80d\udce2\udc82e\udcf4\udc90\udc80\udc80f',
    fitted: 'a\ufffdb\ufffd\ufffdc\ufffd\ufffd\ufffdd\ufffd\ufffde\ufffd\ufffd\ufffd\ufffdf',
  },
  {
    what: 'a byte that is not UTF-8 across the cut, once replaced',
    text: `${a(4092)}\udcff${'b'.repeat(10)}`,
    fitted: `${a(4092)}...`,
  },
  {
    what: 'a byte that is not UTF-8 making it too long only once replaced (4095 bytes, 4097 after)',
    text: `${a(4094)}\udcff`,
    fitted: `${a(4093)}...`,
  },
];

const DONE = { text: `\udcff${'é'.repeat(2100)}`, fitted: `\ufffd${'é'.repeat(2045)}...` };

/** The bytes `text` stands for: each lone surrogate U+DC80..U+DCFF is the byte it was decoded from. */
function surrogateEscapedBytes(text: string): Buffer {
  const parts: Buffer[] = [];
  for (const char of text) {
    const unit = char.charCodeAt(0);
    const escaped = char.length === 1 && unit >= 0xdc80 && unit <= 0xdcff;
    parts.push(escaped ? Buffer.from([unit - 0xdc00]) : Buffer.from(char, 'utf8'));
  }
  return Buffer.concat(parts);
}

interface Seen {
  updates: unknown[];
  done: unknown;
}

let cWorker: string;
beforeAll(() => {
  cc.require();
  cWorker = buildCWorker('cc', tempDir());
});

describe('the Node, Python and C clients, given the same messages', () => {
  const bridge = useWatchedBridge();

  /**
   * Waits until the gateway saw `token`'s progress `value`, failing at once with what the worker
   * reported when it says something went wrong (the daemon refused the update: it never comes).
   */
  function seenValue(token: string, value: number, trouble: () => string | undefined) {
    const problem = trouble();
    if (problem !== undefined) throw new Error(`the worker on ${token} reported: ${problem}`);
    return bridge.progressOf(token).some((params) => params.progress === value);
  }

  /** The messages the gateway saw for `token`: each update's (1..n), and the done's. */
  async function seen(token: string): Promise<Seen> {
    const done = await bridge.doneOf(token);
    const updates = bridge.progressOf(token);
    expect(updates.map((params) => params.progress)).toEqual(UPDATES.map((_, i) => i + 1));
    return { updates: updates.map((params) => params.message), done: done.message };
  }

  async function throughDriven(
    prefix: string,
    start: (env: Record<string, string>, options: Record<string, unknown>) => DrivenWorker,
  ): Promise<Seen> {
    const token = await bridge.watched(prefix);
    const worker = start({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket }, { token });
    const trouble = () => {
      const error = worker.events.find((event) => event.event === 'error');
      return error === undefined ? undefined : JSON.stringify(error);
    };
    await worker.next((event) => event.event === 'ready', 'ready');
    for (const [index, update] of UPDATES.entries()) {
      worker.send({ update: { progress: index + 1, message: update.text } });
      await eventually(
        () => (seenValue(token, index + 1, trouble) ? true : undefined),
        60_000,
        `${prefix}: progress ${index + 1} (${update.what})`,
      );
    }
    worker.send({ done: 'ok', message: DONE.text });
    expect(await worker.next((event) => event.event === 'done', 'done')).toMatchObject({
      delivered: true,
    });
    return seen(token);
  }

  async function throughC(): Promise<Seen> {
    const token = await bridge.watched('c');
    const steps = tempDir();
    for (const [index, update] of UPDATES.entries()) {
      writeFileSync(join(steps, `message-${index + 1}`), surrogateEscapedBytes(update.text));
    }
    writeFileSync(join(steps, 'message-done'), surrogateEscapedBytes(DONE.text));
    const child = spawn(cWorker, ['messages', String(UPDATES.length), steps], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        MCP_PROGRESS_SOCKET: bridge.daemon.info.socket,
        MCP_PROGRESS_TOKEN: token,
      },
    });
    const worker = collectOutput(child);
    try {
      const trouble = () => worker.stderr() || undefined;
      await stepThrough(steps, UPDATES.length, (value) => seenValue(token, value, trouble));
      expect(await waitForEvent(worker, 'done')).toMatchObject({ delivered: true, code: null });
      expect(worker.stderr()).toBe('');
      return await seen(token);
    } finally {
      child.kill();
    }
  }

  it('deliver the same text, cut at the same character with "...", U+FFFD for each byte that is not UTF-8', async () => {
    // The bytes given to C are the ones meant: not UTF-8 where a lone surrogate stands for a byte.
    expect(surrogateEscapedBytes('f\udcff\udce2\udc82é')).toEqual(
      Buffer.from([0x66, 0xff, 0xe2, 0x82, 0xc3, 0xa9]),
    );
    const [node, python, c] = await Promise.all([
      throughDriven('node', nodeWorker),
      throughDriven('python', pythonWorker),
      throughC(),
    ]);
    const expected: Seen = {
      updates: UPDATES.map((update) => update.fitted),
      done: DONE.fitted,
    };
    expect({ node, python, c }).toEqual({ node: expected, python: expected, c: expected });
  });
});

/**
 * The status of the stream's done as a gateway saw it (every value before it had arrived too), or
 * "no done" when none came within 10 s.
 */
async function endedAs(bridge: WatchedBridge, token: string | number): Promise<string> {
  const done = await eventually(
    () => bridge.of(token).find((n) => n.method === 'notifications/progress/done')?.params,
    10_000,
    `done for ${token}`,
  ).catch(() => undefined);
  return done === undefined ? 'no done' : String(done.status);
}

/** What the daemon refused of its workers' frames so far, by code: nothing, when the clients check first. */
async function framesRejected(bridge: WatchedBridge): Promise<Partial<Record<string, number>>> {
  const status = (await bridge.gateway.request('progress/status')).result as {
    counters: { framesRejected: Partial<Record<string, number>> };
  };
  return status.counters.framesRejected;
}

/** The C worker in `mode`, on `token` (MCP_PROGRESS_TOKEN) unless a STEP_DIR/token names another. */
function startC(mode: string, values: number, steps: string, socket: string, token = '') {
  const child: ChildProcess = spawn(cWorker, [mode, String(values), steps, '3000'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MCP_PROGRESS_SOCKET: socket, MCP_PROGRESS_TOKEN: token },
  });
  return { child, output: collectOutput(child) };
}

/** The largest progress, total and integer token the daemon takes, 2^53 - 1, and one past it. */
const MAX = '9007199254740991';
const OVER = '9007199254740992';

/**
 * Updates, in order, as their numbers' text (Number() in Node, int() or float() in Python, strtod
 * in C): each one the daemon would refuse is refused by the client, with the daemon's code (Node,
 * Python; the C call fails), and each one it takes is sent. A C update without a total passes
 * MCP_PROGRESS_NO_TOTAL (-1).
 */
const NUMBERS: Array<{
  what: string;
  progress?: string;
  total?: string;
  refused?: 'invalid_field' | 'non_monotonic';
  /** The C API cannot make it: it has no omitted progress. */
  notInC?: true;
}> = [
  { what: 'the lowest progress, total 0', progress: `-${MAX}`, total: '0' },
  { what: 'a progress below the lowest', progress: `-${OVER}`, refused: 'invalid_field' },
  { what: 'the largest total', progress: '0.5', total: MAX },
  { what: 'a progress above the largest', progress: OVER, refused: 'invalid_field' },
  { what: 'a progress of 1e300', progress: '1e300', refused: 'invalid_field' },
  { what: 'a NaN progress', progress: 'NaN', refused: 'invalid_field' },
  { what: 'an infinite progress', progress: 'Infinity', refused: 'invalid_field' },
  { what: 'a progress of -infinity', progress: '-Infinity', refused: 'invalid_field' },
  { what: 'a total of -0.5', progress: '1', total: '-0.5', refused: 'invalid_field' },
  { what: 'a total of -2', progress: '1', total: '-2', refused: 'invalid_field' },
  { what: 'a total of -infinity', progress: '1', total: '-Infinity', refused: 'invalid_field' },
  { what: 'a total above the largest', progress: '1', total: OVER, refused: 'invalid_field' },
  { what: 'a NaN total', progress: '1', total: 'NaN', refused: 'invalid_field' },
  { what: 'the value those were refused with, taken', progress: '1', total: '10' },
  { what: 'no total', progress: '2' },
  { what: 'the largest progress', progress: MAX, total: MAX },
  { what: 'one up from the largest (progress omitted)', refused: 'non_monotonic', notInC: true },
];

/** What a client did with NUMBERS: each update's outcome, the values a gateway saw, the done's event. */
interface NumbersSeen {
  outcomes: string[];
  values: unknown[];
  done: unknown;
}

const TAKEN_VALUES = NUMBERS.filter((number) => number.refused === undefined).map((number) =>
  Number(number.progress),
);

describe('the Node, Python and C clients, given numbers the daemon refuses', () => {
  const bridge = useWatchedBridge();

  /** Each update's outcome: "taken", or the code it was refused with ("... by the daemon" when the client sent it). */
  async function throughDriven(
    prefix: string,
    start: (env: Record<string, string>, options: Record<string, unknown>) => DrivenWorker,
    options: Record<string, unknown>,
  ): Promise<NumbersSeen> {
    const token = await bridge.watched(prefix);
    const worker = start({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket }, { token, ...options });
    const reported = () => worker.events.filter((event) => event.event === 'error');
    await worker.next((event) => event.event === 'ready', 'ready');
    const outcomes: string[] = [];
    for (const number of NUMBERS) {
      const update: Record<string, string> = {};
      if (number.progress !== undefined) update.progress = number.progress;
      if (number.total !== undefined) update.total = number.total;
      const before = reported().length;
      worker.send({ updateParsed: update });
      if (number.refused !== undefined) {
        const [error] = await eventually(
          () => (reported().length > before ? reported().slice(before) : undefined),
          60_000,
          `${prefix}: the refusal of ${number.what}`,
        );
        const fromDaemon = /daemon refused/.test(String(error?.message));
        outcomes.push(`${String(error?.code)}${fromDaemon ? ' by the daemon' : ''}`);
        continue;
      }
      // Taken when a gateway sees it; else what the worker reported instead (its update was lost).
      const value = Number(number.progress);
      const outcome = await eventually(
        () => {
          const [error] = reported().slice(before);
          if (error !== undefined) return `${String(error.code)}: ${String(error.message)}`;
          const seen = bridge.progressOf(token).some((params) => params.progress === value);
          return seen ? 'taken' : undefined;
        },
        60_000,
        `${prefix}: ${number.what}`,
      );
      outcomes.push(outcome);
    }
    worker.send({ done: 'ok' });
    const done = await worker.next((event) => event.event === 'done', 'done');
    await endedAs(bridge, token);
    return { outcomes, values: bridge.progressOf(token).map((params) => params.progress), done };
  }

  async function throughC(): Promise<NumbersSeen> {
    const token = await bridge.watched('c');
    const steps = tempDir();
    const inC = NUMBERS.filter((number) => number.notInC === undefined);
    const lines = inC.map((number) => `${number.progress} ${number.total ?? '-1'}`);
    writeFileSync(join(steps, 'updates'), `${lines.join('\n')}\n`);
    const { child, output } = startC('numbers', 0, steps, bridge.daemon.info.socket, token);
    expect(await waitForExit(child)).toBe(0);
    const done = await waitForEvent(output, 'done');
    await endedAs(bridge, token);
    // A failed call's p.error, a line each, in order: the update's own numbers are refused (the C
    // client has no code for it: the case's is shown), or else what the daemon said.
    const errors = output.stderr().split('\n').filter(Boolean);
    const outcomes = events(output)
      .filter((event) => event.event === 'update')
      .map((event, index) => {
        if (event.connected !== true) return 'disconnected';
        if (event.failed !== true) return 'taken';
        const error = errors.shift() ?? '';
        const own = /^update ignored: (progress|total) must be/.test(error);
        return own ? String(inC[index]?.refused) : error;
      });
    return { outcomes, values: bridge.progressOf(token).map((params) => params.progress), done };
  }

  it('refuse what the daemon refuses themselves, with its code, and send what it takes', async () => {
    const [node, python, c] = await Promise.all([
      throughDriven('node', nodeWorker, { intervalMs: 0 }),
      throughDriven('python', pythonWorker, { interval: 0, warn_every: true }),
      throughC(),
    ]);
    const done = expect.objectContaining({ delivered: true });
    const expected = {
      outcomes: NUMBERS.map((number) => number.refused ?? 'taken'),
      values: TAKEN_VALUES,
      done,
    };
    const expectedC = {
      outcomes: NUMBERS.filter((number) => number.notInC === undefined).map(
        (number) => number.refused ?? 'taken',
      ),
      values: TAKEN_VALUES,
      done,
    };
    expect({ node, python, c }).toEqual({ node: expected, python: expected, c: expectedC });
    expect(await framesRejected(bridge)).toEqual({});
  });
});

type Client = 'n' | 'p' | 'c';
const MAX_SAFE = Number(MAX);

/**
 * Tokens, made distinct for each client by its letter: the daemon takes a string of 1 to 1024
 * UTF-8 bytes with no lone surrogate (for C: every byte part of a valid UTF-8 character), or an
 * integer within ±(2^53 - 1) (Node and Python; C's token is a string). As in UPDATES, a lone
 * surrogate U+DC80..U+DCFF stands for the byte it was decoded from: Node and Python are given the
 * string, C the bytes.
 */
const TOKENS: Array<{
  what: string;
  token: (client: Client) => string | number;
  taken: boolean;
  notInC?: true;
}> = [
  { what: '1024 bytes', token: (c) => `${c}${'x'.repeat(1023)}`, taken: true },
  { what: '1025 bytes', token: (c) => `${c}${'x'.repeat(1024)}`, taken: false },
  { what: '1024 bytes, 2-byte characters', token: (c) => `${c}x${'é'.repeat(511)}`, taken: true },
  { what: '1025 bytes, 2-byte characters', token: (c) => `${c}${'é'.repeat(512)}`, taken: false },
  {
    what: '1024 bytes ending in a 4-byte character',
    token: (c) => `${c}xxx${'😀'.repeat(255)}`,
    taken: true,
  },
  {
    what: 'a 4-byte character past 1024 bytes',
    token: (c) => `${c}xxxx${'😀'.repeat(255)}`,
    taken: false,
  },
  { what: 'a byte that is not UTF-8', token: (c) => `${c}-job-\udcff`, taken: false },
  { what: 'an encoded surrogate', token: (c) => `${c}-\udced\udca0\udc80`, taken: false },
  { what: 'an overlong form', token: (c) => `${c}-\udcc0\udcaf`, taken: false },
  {
    what: 'the largest integer',
    token: (c) => (c === 'n' ? MAX_SAFE : -MAX_SAFE),
    taken: true,
    notInC: true,
  },
  {
    what: 'an integer past the largest',
    token: (c) => (c === 'n' ? MAX_SAFE + 1 : -(MAX_SAFE + 1)),
    taken: false,
    notInC: true,
  },
  { what: 'a fraction', token: (c) => (c === 'n' ? 1.5 : -1.5), taken: false, notInC: true },
];

/** How a done status the daemon refuses (an update's token is fine) is sent: as "error", said so. */
const STATUSES = [
  { what: 'an unknown status', status: 'failed' },
  { what: 'a status that is not UTF-8', status: 'fail\udcff' },
];

describe('the Node, Python and C clients, given tokens and statuses the daemon refuses', () => {
  const bridge = useWatchedBridge();

  async function subscribed(token: string | number): Promise<void> {
    const reply = await bridge.gateway.request('progress/subscribe', {
      progressToken: token,
      minIntervalMs: 0,
    });
    if (reply.error) throw new Error(`subscribe ${String(token)}: ${reply.error.message}`);
  }

  /** "taken" (value 1 and the done arrived), else the code the worker reported and whether its progress was off. */
  async function tokenThroughDriven(
    token: string | number,
    taken: boolean,
    start: (env: Record<string, string>, options: Record<string, unknown>) => DrivenWorker,
  ): Promise<string> {
    if (taken) await subscribed(token);
    const worker = start(
      { MCP_PROGRESS_SOCKET: bridge.daemon.info.socket },
      { token, doneTimeoutMs: 3000, done_timeout: 3 },
    );
    const ready = await worker.next((event) => event.event === 'ready', 'ready');
    worker.send({ update: { progress: 1 } });
    worker.send({ done: 'ok' });
    const done = await worker.next((event) => event.event === 'done', 'done');
    worker.send({ exit: 0 });
    if (done.delivered === true) {
      await bridge.doneOf(token);
      return bridge.progressOf(token).some((params) => params.progress === 1)
        ? 'taken'
        : 'done without value 1';
    }
    const error = worker.events.find((event) => event.event === 'error');
    return `${String(error?.code)}${ready.enabled === false ? ', progress off' : ', sent'}`;
  }

  async function tokenThroughC(token: string, taken: boolean): Promise<string> {
    if (taken) await subscribed(token);
    const steps = tempDir();
    writeFileSync(join(steps, 'token'), surrogateEscapedBytes(token));
    const { child, output } = startC('once', 1, steps, bridge.daemon.info.socket);
    expect(await waitForExit(child)).toBe(0);
    const done = await waitForEvent(output, 'done');
    if (done.delivered === true) {
      await bridge.doneOf(token);
      return bridge.progressOf(token).some((params) => params.progress === 1)
        ? 'taken'
        : 'done without value 1';
    }
    // Refused at open: p.error names the token's problem, and p connects no more.
    const [firstError] = output.stderr().split('\n');
    const opened = (await waitForEvent(output, 'ready')).connected === true;
    if (!opened && /^the token .*; progress is off$/.test(firstError ?? ''))
      return 'invalid_token, progress off';
    return `${String(done.code)}, sent (${output.stderr().trim()})`;
  }

  async function statusThroughDriven(
    prefix: string,
    status: string,
    start: (env: Record<string, string>, options: Record<string, unknown>) => DrivenWorker,
  ): Promise<string> {
    const token = await bridge.watched(prefix);
    const worker = start({ MCP_PROGRESS_SOCKET: bridge.daemon.info.socket }, { token });
    await worker.next((event) => event.event === 'ready', 'ready');
    worker.send({ update: { progress: 1 } });
    worker.send({ done: status, message: 'the result' });
    await worker.next((event) => event.event === 'done', 'done');
    worker.send({ exit: 0 });
    const error = worker.events.find((event) => event.event === 'error');
    return `${await endedAs(bridge, token)}; ${String(error?.code)}`;
  }

  async function statusThroughC(status: string): Promise<string> {
    const token = await bridge.watched('c');
    const steps = tempDir();
    writeFileSync(join(steps, 'status'), surrogateEscapedBytes(status));
    const { child, output } = startC('once', 1, steps, bridge.daemon.info.socket, token);
    expect(await waitForExit(child)).toBe(0);
    await waitForEvent(output, 'done');
    const said =
      /^done status must be ok, error or cancelled, got ".*"; the stream was ended with error instead$/;
    const refused = said.test(output.stderr().trim()) ? 'invalid_field' : output.stderr().trim();
    return `${await endedAs(bridge, token)}; ${refused}`;
  }

  it('refuse a token the daemon refuses themselves (invalid_token: progress is off), and take every one it takes', async () => {
    const throughAll = async (client: Client): Promise<string[]> => {
      const outcomes: string[] = [];
      for (const { token, taken, notInC } of TOKENS) {
        const given = token(client);
        if (client === 'n') outcomes.push(await tokenThroughDriven(given, taken, nodeWorker));
        else if (client === 'p')
          outcomes.push(await tokenThroughDriven(given, taken, pythonWorker));
        else if (notInC === undefined) outcomes.push(await tokenThroughC(String(given), taken));
      }
      return outcomes;
    };
    const [node, python, c] = await Promise.all([
      throughAll('n'),
      throughAll('p'),
      throughAll('c'),
    ]);
    const outcome = ({ taken }: { taken: boolean }) =>
      taken ? 'taken' : 'invalid_token, progress off';
    const expected = TOKENS.map(outcome);
    const expectedC = TOKENS.filter((token) => token.notInC === undefined).map(outcome);
    expect({ node, python, c }).toEqual({ node: expected, python: expected, c: expectedC });
    expect(await framesRejected(bridge)).toEqual({});
  });

  it('end the stream as error, saying so (invalid_field), given a done status the daemon refuses', async () => {
    const throughAll = (each: (status: string) => Promise<string>) => async () => {
      const outcomes: string[] = [];
      for (const { status } of STATUSES) outcomes.push(await each(status));
      return outcomes;
    };
    const [node, python, c] = await Promise.all([
      throughAll((status) => statusThroughDriven('node', status, nodeWorker))(),
      throughAll((status) => statusThroughDriven('python', status, pythonWorker))(),
      throughAll(statusThroughC)(),
    ]);
    const expected = STATUSES.map(() => 'error; invalid_field');
    expect({ node, python, c }).toEqual({ node: expected, python: expected, c: expected });
    expect(await framesRejected(bridge)).toEqual({});
  });
});
