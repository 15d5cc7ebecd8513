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
  readonly streamId: StreamId;
  readonly message: JSONRPCMessage;
  readonly bytes: number;
}

export class BoundedEventStore implements EventStore {
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #events = new Map<EventId, Kept>();
  /** The ids of #events in the order they were stored, the oldest at #head: evicting is no iteration. */
  #order: EventId[] = [];
  #head = 0;
  #bytes = 0;
  #next = 0;

  constructor(maxEvents: number, maxBytes: number) {
    this.#maxEvents = maxEvents;
    this.#maxBytes = maxBytes;
  }

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    return this.keep(streamId, message, JSON.stringify(message).length);
  }

  /** storeEvent at once, for a caller that has the message's JSON already (`bytes`: its length). */
  keep(streamId: StreamId, message: JSONRPCMessage, bytes: number): EventId {
    const id = `${streamId}:${++this.#next}`;
    this.#events.set(id, { streamId, message, bytes });
    this.#order.push(id);
    this.#bytes += bytes;
    // The newest stays, whatever its size.
    while (
      (this.#events.size > this.#maxEvents || this.#bytes > this.#maxBytes) &&
      this.#head < this.#order.length - 1
    ) {
      const oldest = this.#order[this.#head++] as EventId;
      this.#bytes -= this.#events.get(oldest)?.bytes ?? 0;
      this.#events.delete(oldest);
    }
    if (this.#head > this.#maxEvents) {
      this.#order = this.#order.slice(this.#head);
      this.#head = 0;
    }
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.#events.get(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const last = this.#events.get(lastEventId);
    if (last === undefined) {
      throw new BridgeError(
        'event_not_kept',
        `event ${lastEventId} is not kept (the daemon keeps the last ${this.#maxEvents} events of a session): send the request again`,
      );
    }
    let after = false;
    // The Map keeps insertion order: the order they were stored.
    for (const [id, kept] of this.#events) {
      if (id === lastEventId) after = true;
      // A priming event carries no message: nothing to send again.
      else if (after && kept.streamId === last.streamId && Object.keys(kept.message).length > 0)
        await send(id, kept.message);
    }
    return last.streamId;
  }
}
