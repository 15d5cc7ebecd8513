/** Where load generators connect, for each kind of system under test. */
import type { LatencySummary } from './stats.ts';

/** Worker side: the bridge's framing on a Unix socket, or NATS's protocol on TCP. */
export type WorkerTarget = { kind: 'unix'; path: string } | { kind: 'nats'; port: number };

/** Subscriber side: the bridge's JSON-RPC gateway, a relay's plain WebSocket, or NATS. */
export type SubscriberTarget =
  | { kind: 'bridge'; url: string; secret: string }
  | { kind: 'relay'; url: string }
  | { kind: 'nats'; port: number };

export interface PublisherConfig {
  target: WorkerTarget;
  /** One connection per token. */
  tokens: string[];
  /**
   * flood: as fast as the socket accepts; window: the same, but at most
   * `window` frames ahead of what subscribers received; paced: `ratePerSecond`
   * frames a second in total, each stamped with the host clock.
   */
  mode: 'flood' | 'window' | 'paced';
  /** Stops by itself after this long, unless the harness sends `stop` first. */
  durationMs: number;
  framesPerChunk: number;
  ratePerSecond?: number;
  /**
   * paced only. aligned (the default): every connection's frame falls due on the same tick, so
   * the frames of all tokens arrive together; staggered: connection k of N is offset by k/N of
   * its period, as independent workers are.
   */
  phases?: 'aligned' | 'staggered';
  window?: number;
}

export interface PublisherDone {
  type: 'done';
  sent: number;
  /** The last progress value written for each token. */
  lastProgress: Record<string, number>;
  /** `rejected` replies or protocol errors the server sent back. */
  rejected: number;
  errors: string[];
}

export interface SubscriberConfig {
  target: SubscriberTarget;
  sessions: number;
  /** Every session subscribes to every token. */
  tokens: string[];
  minIntervalMs: number;
  /** count: count messages, parse only the last; parse: parse each (latency, coalescing). */
  mode: 'count' | 'parse';
  reportEveryMs: number;
}

export interface SessionResult {
  count: number;
  /** The last progress seen for each token (parse mode; the last message's token in count mode). */
  lastProgress: Record<string, number>;
  /** Progress values that did not increase, per the bridge's guarantee. */
  outOfOrder: number;
  firstAtMs: number;
  lastAtMs: number;
}

export interface SubscriberResult {
  type: 'result';
  sessions: SessionResult[];
  complete: boolean;
  latency?: LatencySummary;
  /** The `record-early` window's, when one was asked for. */
  earlyLatency?: LatencySummary;
  errors: string[];
}

export interface ConnectorConfig {
  workers: { target: WorkerTarget; count: number; concurrency: number };
  sessions: { target: SubscriberTarget; count: number; concurrency: number } | undefined;
}

export interface ConnectResult {
  type: 'connected';
  count: number;
  failures: number;
  elapsedMs: number;
  p50Ms: number;
  p99Ms: number;
  errors: string[];
}
