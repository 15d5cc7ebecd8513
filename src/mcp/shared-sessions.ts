/**
 * The progress sessions of one task listen, shared by the follows of its tasks: a session holds
 * many subscriptions (one per stream), so the listen's follows subscribe on as few sessions as
 * the daemon's --max-subscriptions allows (one, under its default of 10000), not one each.
 * Over stdio each session is a connection to the daemon and a place under its --max-sessions,
 * which every client shares; over /mcp, a member of the listen's place in the session hub.
 */
import type { ProgressToken } from '../protocol/frames.js';
import { BridgeError } from '../shared/errors.js';
import type { ProgressSession, ProgressSource, ProgressSubscription } from './progress-source.js';

/** One session of the pool and the streams subscribed on it (or being subscribed). */
interface Pooled {
  readonly session: Promise<ProgressSession>;
  readonly tokens: Set<ProgressToken>;
  /** It refused a subscription at the daemon's cap: none is asked of it until one ends. */
  full: boolean;
}

/**
 * Hands out views of a few shared sessions of `source`: each view's subscriptions go to the
 * first session with room for its stream (a session holds one subscription per stream, so two
 * tasks of one stream go to two sessions), and a session the daemon refused one at its
 * --max-subscriptions is left for a new one. Closing a view ends its subscriptions; a session
 * closes once no view holds a subscription on it.
 */
export class SharedSessions implements Pick<ProgressSource, 'openSession'> {
  readonly #source: Pick<ProgressSource, 'openSession'>;
  readonly #pool: Pooled[] = [];

  constructor(source: Pick<ProgressSource, 'openSession'>) {
    this.#source = source;
  }

  /** Sessions open or being opened. */
  get size(): number {
    return this.#pool.length;
  }

  /** A view: nothing is opened before its first subscribe, which fails as opening would. */
  async openSession(): Promise<ProgressSession> {
    const held = new Set<ProgressSubscription>();
    let closed = false;
    return {
      subscribe: async (params, handler, onError) => {
        if (closed) throw new BridgeError('closed', 'the progress session was closed');
        const subscription = await this.#subscribe(params.progressToken, (session) =>
          session.subscribe(params, handler, onError),
        );
        const own: ProgressSubscription = {
          unsubscribe: async () => {
            if (held.delete(own)) await subscription.unsubscribe();
          },
        };
        held.add(own);
        // Closed while it subscribed: it ends at once.
        if (closed) await own.unsubscribe();
        return own;
      },
      close: async () => {
        closed = true;
        await Promise.all([...held].map((one) => one.unsubscribe()));
      },
    };
  }

  async #subscribe(
    token: ProgressToken,
    subscribe: (session: ProgressSession) => Promise<ProgressSubscription>,
  ): Promise<ProgressSubscription> {
    for (;;) {
      const pooled = this.#place(token);
      let subscription: ProgressSubscription;
      try {
        subscription = await subscribe(await pooled.session);
      } catch (error) {
        const others = pooled.tokens.size > 1;
        await this.#release(pooled, token);
        // At the daemon's cap with others on it: this one goes on a session of its own.
        if (isCapRefusal(error) && others && this.#pool.includes(pooled)) {
          pooled.full = true;
          continue;
        }
        throw error;
      }
      return {
        unsubscribe: async () => {
          await subscription.unsubscribe();
          await this.#release(pooled, token);
        },
      };
    }
  }

  /** The session `token` goes on, its place taken there before anything is awaited. */
  #place(token: ProgressToken): Pooled {
    let pooled = this.#pool.find((one) => !one.full && !one.tokens.has(token));
    if (pooled === undefined) {
      const opening: Pooled = {
        session: this.#source.openSession(),
        tokens: new Set(),
        full: false,
      };
      // A session that could not be opened is left for the next subscribe to open anew.
      opening.session.catch(() => this.#drop(opening));
      this.#pool.push(opening);
      pooled = opening;
    }
    pooled.tokens.add(token);
    return pooled;
  }

  /** `token` left `pooled`: it has room again, and it closes once it holds none. */
  async #release(pooled: Pooled, token: ProgressToken): Promise<void> {
    if (!pooled.tokens.delete(token)) return;
    pooled.full = false;
    if (pooled.tokens.size > 0) return;
    if (!this.#drop(pooled)) return;
    const session = await pooled.session.catch(() => undefined);
    await session?.close();
  }

  #drop(pooled: Pooled): boolean {
    const at = this.#pool.indexOf(pooled);
    if (at < 0) return false;
    this.#pool.splice(at, 1);
    return true;
  }
}

/** The daemon refused a subscription because the session holds --max-subscriptions already. */
function isCapRefusal(error: unknown): boolean {
  return error instanceof BridgeError && error.code === 'too_many_subscriptions';
}
