/**
 * The sessions a task listen's follows share (SharedSessions), over a source that stands in for
 * the daemon with a per-session subscription cap.
 */
import { describe, expect, it } from 'vitest';
import type { ProgressSession, ProgressSource } from '../../src/mcp/progress-source.js';
import { SharedSessions } from '../../src/mcp/shared-sessions.js';
import type { ProgressToken } from '../../src/protocol/frames.js';
import { BridgeError } from '../../src/shared/errors.js';

/** A daemon whose sessions hold at most `cap` subscriptions each, one per token. */
function daemon(cap: number) {
  const open = new Set<Set<ProgressToken>>();
  let opened = 0;
  const source: Pick<ProgressSource, 'openSession'> = {
    openSession: async (): Promise<ProgressSession> => {
      const tokens = new Set<ProgressToken>();
      open.add(tokens);
      opened++;
      return {
        subscribe: async ({ progressToken }) => {
          if (tokens.has(progressToken))
            throw new BridgeError('duplicate_subscription', 'already subscribed');
          if (tokens.size >= cap)
            throw new BridgeError('too_many_subscriptions', 'the cap (--max-subscriptions)');
          tokens.add(progressToken);
          return { unsubscribe: async () => void tokens.delete(progressToken) };
        },
        close: async () => void open.delete(tokens),
      };
    },
  };
  return { source, open, opened: () => opened };
}

async function follow(shared: SharedSessions, token: ProgressToken): Promise<ProgressSession> {
  const session = await shared.openSession();
  await session.subscribe({ progressToken: token }, () => {});
  return session;
}

describe('SharedSessions', () => {
  it('subscribes every stream on one session, closed once none is followed', async () => {
    const { source, open, opened } = daemon(10_000);
    const shared = new SharedSessions(source);
    const follows = await Promise.all(['a', 'b', 'c', 7].map((token) => follow(shared, token)));
    expect(opened()).toBe(1);
    await Promise.all(follows.slice(1).map((one) => one.close()));
    expect(open.size).toBe(1);
    await follows[0]?.close();
    expect(open.size).toBe(0);
  });

  it('opens one session per cap of subscriptions, and one more for a stream followed twice', async () => {
    const { source, opened } = daemon(2);
    const shared = new SharedSessions(source);
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((token) => follow(shared, token)));
    expect(opened()).toBe(3);
    const again = daemon(10_000);
    const twice = new SharedSessions(again.source);
    await Promise.all(['a', 'a', 'b'].map((token) => follow(twice, token)));
    expect(again.opened()).toBe(2);
  });

  it('fails a subscribe as opening its session failed', async () => {
    const refused = new BridgeError('gateway_refused', 'HTTP 503 (--max-sessions)');
    const shared = new SharedSessions({ openSession: () => Promise.reject(refused) });
    const session = await shared.openSession();
    await expect(session.subscribe({ progressToken: 'a' }, () => {})).rejects.toBe(refused);
    expect(shared.size).toBe(0);
  });
});
