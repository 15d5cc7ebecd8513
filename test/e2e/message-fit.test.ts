/**
 * The three worker clients fit a message by one rule (docs/CLIENTS.md, "Messages are bounded"):
 * what is not Unicode becomes U+FFFD, and then a message over 4096 UTF-8 bytes is cut to 4093,
 * never inside a character, and "..." added. The Node client (fitMessage), the Python client
 * (_fit_message) and the C client (mcpp_fit_message) each publish the same messages, in updates
 * and in a done, to a real daemon, and a gateway subscribed to each stream must see the text the
 * rule gives, the same from all three.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildCWorker, cc } from '../helpers/c-client.js';
import { cleanupAll, collectOutput, eventually, tempDir } from '../helpers/daemon.js';
import {
  type DrivenWorker,
  killWorkers,
  nodeWorker,
  pythonWorker,
} from '../helpers/driven-worker.js';
import { useWatchedBridge } from '../helpers/gateway.js';
import { stepThrough, waitForEvent } from '../helpers/stepped-worker.js';

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

describe('the Node, Python and C clients, given the same messages', () => {
  const bridge = useWatchedBridge();
  let cWorker: string;
  beforeAll(() => {
    cc.require();
    cWorker = buildCWorker('cc', tempDir());
  });

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
