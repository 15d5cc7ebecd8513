/** /mcp's bounded store of SSE events for Last-Event-ID: what it keeps, lets go and replays. */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { BoundedEventStore } from '../../src/mcp/event-store.js';

const note = (n: number): JSONRPCMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: 't', progress: n },
});

async function replayed(store: BoundedEventStore, after: string): Promise<unknown[]> {
  const sent: unknown[] = [];
  await store.replayEventsAfter(after, {
    send: async (_id, message) => {
      sent.push((message as unknown as { params: { progress: number } }).params.progress);
    },
  });
  return sent;
}

describe('BoundedEventStore', () => {
  it('keeps the newest events up to the count, replays those after an id on its stream only', async () => {
    const store = new BoundedEventStore(3, 1 << 20);
    const ids: string[] = [];
    for (let n = 1; n <= 5; n++) ids.push(await store.storeEvent(n % 2 === 0 ? 'b' : 'a', note(n)));
    store.keep('a', note(6), JSON.stringify(note(6)).length);
    // Kept: 4 (b), 5 (a), 6 (a).
    expect(await store.getStreamIdForEventId(ids[2] as string)).toBeUndefined();
    expect(await store.getStreamIdForEventId(ids[3] as string)).toBe('b');
    expect(await replayed(store, ids[4] as string)).toEqual([6]);
    await expect(replayed(store, ids[0] as string)).rejects.toThrow(/is not kept/);
  });

  it('lets go of the oldest past the byte cap, never of the newest', async () => {
    const bytes = JSON.stringify(note(1)).length;
    const store = new BoundedEventStore(100, 2 * bytes);
    const ids: string[] = [];
    for (let n = 1; n <= 4; n++) ids.push(store.keep('a', note(n), bytes));
    expect(await store.getStreamIdForEventId(ids[1] as string)).toBeUndefined();
    expect(await replayed(store, ids[2] as string)).toEqual([4]);
    const big = store.keep('a', note(5), 10 * bytes);
    expect(await store.getStreamIdForEventId(big)).toBe('a');
    expect(await store.getStreamIdForEventId(ids[3] as string)).toBeUndefined();
  });

  it('stays bounded over many events', async () => {
    const store = new BoundedEventStore(4, 1 << 20);
    let last = '';
    for (let n = 1; n <= 10_000; n++) last = store.keep('a', note(n), 10);
    const first = `${last.slice(0, last.lastIndexOf(':'))}:9997`;
    expect(await replayed(store, first)).toEqual([9998, 9999, 10000]);
  });

  it('knows an id only with its own stream and number: another stream, a malformed or a future id is not kept', async () => {
    const store = new BoundedEventStore(4, 1 << 20);
    const id = store.keep('a', note(1), 10);
    const seq = id.slice(id.lastIndexOf(':') + 1);
    expect(await store.getStreamIdForEventId(id)).toBe('a');
    expect(await store.getStreamIdForEventId(`b:${seq}`)).toBeUndefined();
    expect(await store.getStreamIdForEventId('a:')).toBeUndefined();
    expect(await store.getStreamIdForEventId('a:2')).toBeUndefined();
    await expect(replayed(store, `b:${seq}`)).rejects.toThrow(/is not kept/);
  });
});
