/**
 * The events of one /mcp session's SSE streams, kept for a client that reconnects with
 * Last-Event-ID (MCP 2025-11-25, SEP-1699). With a store the SDK opens every POST stream with
 * a priming event (an id, the `retry` field, no data), so a client whose stream drops before
 * the result knows where to resume. Bounded: the newest MCP_REPLAY_EVENTS events and at most
 * MCP_REPLAY_BYTES per session; a client that resumes from an event already let go is told so.
 */
import type {
  EventId,
  EventStore,
  StreamId,
} from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BridgeError } from '../shared/errors.js';

interface Kept {
  readonly seq: number;
  readonly streamId: StreamId;
  readonly message: JSONRPCMessage;
  readonly bytes: number;
}

/** An event's id: its stream and its place in the session's sequence. */
function eventId(streamId: StreamId, seq: number): EventId {
  return `${streamId}:${seq}`;
}

/** The stream an event id (of this store, or a client's guess) names, whether kept or not. */
export function streamOfEventId(id: EventId): StreamId {
  return id.slice(0, Math.max(0, id.lastIndexOf(':')));
}

export class BoundedEventStore implements EventStore {
  readonly #maxBytes: number;
  /** The kept events by sequence number modulo its length: storing and evicting allocate nothing more. */
  readonly #ring: Array<Kept | undefined>;
  /** The sequence numbers of the oldest kept event and of the newest (0: none yet). */
  #oldest = 1;
  #newest = 0;
  #bytes = 0;

  constructor(maxEvents: number, maxBytes: number) {
    this.#maxBytes = maxBytes;
    this.#ring = new Array<Kept | undefined>(Math.max(1, maxEvents)).fill(undefined);
  }

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    return this.keep(streamId, message, JSON.stringify(message).length);
  }

  /** storeEvent at once, for a caller that has the message's JSON already (`bytes`: its length). */
  keep(streamId: StreamId, message: JSONRPCMessage, bytes: number): EventId {
    const seq = ++this.#newest;
    if (seq - this.#oldest >= this.#ring.length) this.#evictOldest();
    this.#ring[seq % this.#ring.length] = { seq, streamId, message, bytes };
    this.#bytes += bytes;
    // The newest stays, whatever its size.
    while (this.#bytes > this.#maxBytes && this.#oldest < seq) this.#evictOldest();
    return eventId(streamId, seq);
  }

  #evictOldest(): void {
    const slot = this.#oldest % this.#ring.length;
    this.#bytes -= this.#ring[slot]?.bytes ?? 0;
    this.#ring[slot] = undefined;
    this.#oldest++;
  }

  /** The kept event with this id, if it is still kept. */
  #find(id: EventId): Kept | undefined {
    const seq = Number(id.slice(id.lastIndexOf(':') + 1));
    if (!Number.isSafeInteger(seq) || seq < this.#oldest || seq > this.#newest) return undefined;
    const kept = this.#ring[seq % this.#ring.length];
    return kept !== undefined && eventId(kept.streamId, kept.seq) === id ? kept : undefined;
  }

  async getStreamIdForEventId(id: EventId): Promise<StreamId | undefined> {
    return this.#find(id)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const last = this.#find(lastEventId);
    if (last === undefined) {
      throw new BridgeError(
        'event_not_kept',
        `event ${lastEventId} is not kept (the daemon keeps the last ${this.#ring.length} events of a session): send the request again`,
      );
    }
    for (let seq = last.seq + 1; seq <= this.#newest; seq++) {
      const kept = this.#ring[seq % this.#ring.length];
      // A priming event carries no message: nothing to send again.
      if (
        kept?.seq === seq &&
        kept.streamId === last.streamId &&
        Object.keys(kept.message).length > 0
      )
        await send(eventId(kept.streamId, seq), kept.message);
    }
    return last.streamId;
  }
}
