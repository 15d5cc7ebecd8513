/** The stdio transport's send without a promise per message (src/mcp/stdio.ts). */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { HANDED_ON } from '../../src/mcp/progress-sends.js';
import { sendWithoutPromises } from '../../src/mcp/stdio.js';

const progress = (value: number) => ({
  jsonrpc: '2.0' as const,
  method: 'notifications/progress',
  params: { progressToken: 't', progress: value },
});

/** A stream that holds each write until `release` is called (as a pipe nobody reads), then takes all. */
function heldStream(highWaterMark: number) {
  const written: string[] = [];
  let holding = true;
  let held: (() => void) | undefined;
  const stream = new Writable({
    highWaterMark,
    write(chunk: Buffer, _encoding, done) {
      written.push(String(chunk));
      if (holding) held = done;
      else done();
    },
  });
  const release = () => {
    holding = false;
    held?.();
  };
  return { stream, written, release };
}

describe('sendWithoutPromises', () => {
  it('hands on at once, and the messages of one turn leave in one write: the same lines the SDK writes', async () => {
    const writes: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        writes.push(String(chunk));
        done();
      },
      writev(chunks, done) {
        writes.push(chunks.map(({ chunk }) => String(chunk)).join(''));
        done();
      },
    });
    const send = sendWithoutPromises(stream);
    const line = (value: number) => `${JSON.stringify(progress(value))}\n`;
    for (let value = 1; value <= 3; value++) expect(send(progress(value))).toBe(HANDED_ON);
    expect(writes).toEqual([]);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toEqual([line(1) + line(2) + line(3)]);
    expect(send(progress(4))).toBe(HANDED_ON);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toEqual([line(1) + line(2) + line(3), line(4)]);
  });

  it('holds the sender until drain once the stream is full, and keeps the order', async () => {
    const { stream, written, release } = heldStream(1);
    const send = sendWithoutPromises(stream);
    const first = send(progress(1));
    expect(first).not.toBe(HANDED_ON);
    let settled = false;
    void first.then(() => {
      settled = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    // A caller that does not wait is still written in order, after the first.
    void send(progress(2));
    release();
    await first;
    expect(written.map((line) => JSON.parse(line).params.progress)).toEqual([1, 2]);
  });
});
