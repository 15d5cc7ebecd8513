/** `mcp-progress tail`'s logic without a daemon: its command line, and which streams it follows. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import { Following, planTail } from '../../src/cli/tail-command.js';
import type { StreamSummary } from '../../src/protocol/frames.js';

function stream(
  progressToken: string | number,
  state: StreamSummary['state'],
  startedAt: number,
): StreamSummary {
  return { progressToken, state, subscribers: 0, startedAt, updatedAt: startedAt };
}

describe('planTail', () => {
  it('picks the mode from --json and the terminal, and the default interval by mode', () => {
    expect(planTail(['a', '--token-json', '7'], true)).toEqual({
      named: ['a', 7],
      mode: 'screen',
      minIntervalMs: 100,
      runtimeDir: undefined,
    });
    expect(planTail([], false)).toMatchObject({ mode: 'lines', minIntervalMs: 1000 });
    expect(planTail(['--json', '--min-interval-ms', '0', '--runtime-dir', '/r'], false)).toEqual({
      named: [],
      mode: 'json',
      minIntervalMs: 0,
      runtimeDir: '/r',
    });
    expect(planTail(['-h'], false)).toBe('help');
  });

  it('refuses an empty token, a token that is not a string or integer, and a bad number', () => {
    expect(() => planTail([''], false)).toThrow(UsageError);
    expect(() => planTail(['--token-json', '1.5'], false)).toThrow(/a JSON string or integer/);
    expect(() => planTail(['--token-json', 'x'], false)).toThrow(/expected JSON/);
    expect(() => planTail(['--min-interval-ms', '0x10'], false)).toThrow(
      /expected an integer from 0 to 60000, got "0x10"/,
    );
  });
});

/** A review that follows nothing and restamps one stream. */
const restampedOnly = (token: string, startedAt: number) => ({
  follow: [],
  restamp: [{ token, startedAt }],
});

describe('Following', () => {
  it('follows each active or done stream once, and never a waiting one', () => {
    const following = new Following([]);
    const first = following.review([stream('a', 'active', 1), stream('w', 'waiting', 1)]);
    expect(first).toEqual({ follow: [{ token: 'a', startedAt: 1 }], restamp: [] });
    following.started('a', 1);
    // While the subscription lives, the same stream is restamped, never followed twice.
    expect(following.review([stream('a', 'active', 1)])).toEqual(restampedOnly('a', 1));
  });

  it('takes a new startedAt of a live subscription as the same stream (a daemon restart)', () => {
    const following = new Following([]);
    following.started('a', 1);
    expect(following.review([stream('a', 'active', 50)])).toEqual(restampedOnly('a', 50));
  });

  it('after a done, the listed done stream is the same one; a new stream under the token is followed', () => {
    const following = new Following([]);
    following.started('a', 1);
    following.done('a');
    // Done arrived before the list showed the stream's startedAt: settled by the list.
    expect(following.review([stream('a', 'done', 1)]).follow).toEqual([]);
    expect(following.review([stream('a', 'done', 1)]).follow).toEqual([]);
    // A new stream under the same token, started later: followed.
    expect(following.review([stream('a', 'active', 9)]).follow).toEqual([
      { token: 'a', startedAt: 9 },
    ]);
  });

  it('a failed subscription is followed again on the next review', () => {
    const following = new Following([]);
    following.started('a', undefined);
    following.failed('a');
    expect(following.review([stream('a', 'active', 3)]).follow).toEqual([
      { token: 'a', startedAt: 3 },
    ]);
  });

  it('says when the last named token is done, once, and never without named tokens', () => {
    const named = new Following(['a', 7]);
    named.started('a', undefined);
    named.started(7, undefined);
    expect(named.done('a')).toBe(false);
    expect(named.done(7)).toBe(true);
    expect(named.done(7)).toBe(false);
    const all = new Following([]);
    all.started('x', 1);
    expect(all.done('x')).toBe(false);
  });
});
