/**
 * Protocol v1 schemas: the single place where a field is named. Types are
 * inferred from these schemas, and schemas/*.json is generated from them.
 */
import * as z from 'zod';
import { REJECT_CODES, type RejectCode } from './errors.js';
import {
  fitsUtf8Bytes,
  MAX_LIST_LIMIT,
  MAX_MESSAGE_BYTES,
  MAX_META_DEPTH,
  MAX_MIN_INTERVAL_MS,
  MAX_REASON_BYTES,
  MAX_TOKEN_BYTES,
  PROTOCOL_VERSION,
} from './limits.js';

const tokenString = z
  .string()
  .min(1)
  .max(MAX_TOKEN_BYTES)
  .refine((token) => fitsUtf8Bytes(token, MAX_TOKEN_BYTES), {
    message: `at most ${MAX_TOKEN_BYTES} UTF-8 bytes`,
  });

/** A progressToken: "7" and 7 are different tokens, and the type survives end to end. */
export const progressTokenSchema = z.union([tokenString, z.int()]).meta({
  description: `A non-empty string of at most ${MAX_TOKEN_BYTES} UTF-8 bytes, or a safe integer. "7" and 7 are different tokens.`,
});

const messageText = z
  .string()
  .max(MAX_MESSAGE_BYTES)
  .refine((text) => fitsUtf8Bytes(text, MAX_MESSAGE_BYTES), {
    message: `at most ${MAX_MESSAGE_BYTES} UTF-8 bytes`,
  })
  .meta({ description: `Human-readable text, at most ${MAX_MESSAGE_BYTES} UTF-8 bytes.` });

const versionField = z.literal(PROTOCOL_VERSION).meta({ description: 'Protocol version: 1.' });

const seqField = z.int().min(0).meta({
  description:
    'Optional sequence number; the daemon answers `ack` {seq} when it accepts the frame.',
});

const metaField = z
  .record(z.string(), z.unknown())
  .refine((meta) => nestedWithin(meta, MAX_META_DEPTH), {
    message: `nested at most ${MAX_META_DEPTH} levels deep`,
  })
  .meta({
    description: `Forwarded unchanged as the notification params \`_meta\`. Objects and arrays nest at most ${MAX_META_DEPTH} levels deep.`,
  });

/** Whether objects and arrays in `value` nest at most `limit` levels; iterative, so any depth is safe to check. */
export function nestedWithin(value: unknown, limit: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (next.value === null || typeof next.value !== 'object') continue;
    if (next.depth > limit) return false;
    for (const child of Object.values(next.value))
      pending.push({ value: child, depth: next.depth + 1 });
  }
  return true;
}

export const doneStatusSchema = z.enum(['ok', 'error', 'cancelled']);

/** Data of a worker's `progress` frame. */
export const progressFrameSchema = z
  .strictObject({
    v: versionField,
    progressToken: progressTokenSchema,
    progress: z.number().meta({
      description: 'Finite number; must exceed the last accepted progress. Omitted: last + 1.',
    }),
    total: z.number().min(0).meta({ description: 'Finite number >= 0.' }),
    message: messageText,
    _meta: metaField,
    seq: seqField,
  })
  .partial({ progress: true, total: true, message: true, _meta: true, seq: true })
  .meta({ title: 'progress frame data (v1)' });

/** Data of a worker's `done` frame. */
export const doneFrameSchema = z
  .strictObject({
    v: versionField,
    progressToken: progressTokenSchema,
    status: doneStatusSchema.meta({ description: 'How the job ended. Omitted: "ok".' }),
    message: messageText,
    seq: seqField,
  })
  .partial({ status: true, message: true, seq: true })
  .meta({ title: 'done frame data (v1)' });

/**
 * Data of a worker's `claim` frame: this connection works for the token, so a
 * cancel for it reaches this connection even before (or without) any progress.
 */
export const claimFrameSchema = z
  .strictObject({
    v: versionField,
    progressToken: progressTokenSchema,
    seq: seqField,
  })
  .partial({ seq: true })
  .meta({ title: 'claim frame data (v1)' });

/** Data of `ping` and `status` requests: nothing, or an empty object. */
export const emptyRequestSchema = z
  .union([z.strictObject({}), z.undefined()])
  .meta({ title: 'ping / status frame data (v1)' });

export type ProgressToken = z.infer<typeof progressTokenSchema>;
export type ProgressFrame = z.infer<typeof progressFrameSchema>;
export type DoneFrame = z.infer<typeof doneFrameSchema>;
export type ClaimFrame = z.infer<typeof claimFrameSchema>;
export type DoneStatus = z.infer<typeof doneStatusSchema>;

/** The worker events and their data schemas. */
export const WORKER_EVENTS = {
  progress: progressFrameSchema,
  done: doneFrameSchema,
  claim: claimFrameSchema,
  ping: emptyRequestSchema,
  status: emptyRequestSchema,
} as const;

export type WorkerEvent = keyof typeof WORKER_EVENTS;

export function isWorkerEvent(type: string): type is WorkerEvent {
  return Object.hasOwn(WORKER_EVENTS, type);
}

// Daemon to worker.

export const rejectedSchema = z
  .strictObject({
    code: z.string(),
    message: z.string(),
    progressToken: progressTokenSchema.optional(),
    seq: z.int().min(0).optional(),
  })
  .meta({ title: 'rejected (daemon to worker)' });

export const ackSchema = z
  .strictObject({ seq: z.int().min(0) })
  .meta({ title: 'ack (daemon to worker)' });

export const cancelSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    reason: z.string().optional(),
  })
  .meta({ title: 'cancel (daemon to worker)' });

export const pongSchema = z
  .strictObject({ pid: z.int(), version: z.string(), protocol: z.literal(PROTOCOL_VERSION) })
  .meta({ title: 'pong (daemon to worker)' });

export type Rejected = z.infer<typeof rejectedSchema>;
export type Ack = z.infer<typeof ackSchema>;
export type Cancel = z.infer<typeof cancelSchema>;
export type Pong = z.infer<typeof pongSchema>;

// Daemon to MCP session: the params of the notifications.

/** MCP's ProgressNotificationParams: the worker's fields without `v` and `seq`. */
export const progressParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    progress: z.number(),
    total: z.number().min(0).optional(),
    message: z.string().optional(),
    _meta: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ title: 'notifications/progress params' });

export const streamEndStatusSchema = z.enum(['ok', 'error', 'cancelled', 'abandoned']);

export const doneParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    status: streamEndStatusSchema,
    message: z.string().optional(),
  })
  .meta({ title: 'notifications/progress/done params' });

export type ProgressParams = z.infer<typeof progressParamsSchema>;
export type StreamEndStatus = z.infer<typeof streamEndStatusSchema>;
export type DoneParams = z.infer<typeof doneParamsSchema>;

// WebSocket gateway protocol (JSON-RPC 2.0, subprotocol mcp-progress.v1).

export const subscribeParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    as: progressTokenSchema
      .meta({ description: 'Deliver under this token instead of the worker’s.' })
      .optional(),
    minIntervalMs: z
      .int()
      .min(0)
      .max(MAX_MIN_INTERVAL_MS)
      .meta({ description: 'Coalescing interval; 0 turns coalescing off. Default 100.' })
      .optional(),
  })
  .meta({ title: 'progress/subscribe params' });

export const unsubscribeParamsSchema = z
  .strictObject({ progressToken: progressTokenSchema })
  .meta({ title: 'progress/unsubscribe params' });

export const cancelParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    reason: z
      .string()
      .max(MAX_REASON_BYTES)
      .refine((text) => fitsUtf8Bytes(text, MAX_REASON_BYTES), {
        message: `at most ${MAX_REASON_BYTES} UTF-8 bytes`,
      })
      .optional(),
  })
  .meta({ title: 'progress/cancel params' });

/** Params of methods that take none (progress/status): nothing, or an empty object. */
export const noParamsSchema = z
  .union([z.strictObject({}), z.undefined()])
  .meta({ title: 'progress/status params' });

/** Params of progress/list: a page of the stream table. */
export const listPageParamsSchema = z
  .strictObject({
    cursor: z
      .string()
      .max(64)
      .meta({ description: 'The nextCursor of the previous page; omitted: the first page.' })
      .optional(),
    limit: z
      .int()
      .min(1)
      .max(MAX_LIST_LIMIT)
      .meta({
        description: `At most this many streams in the page (1..${MAX_LIST_LIMIT}; default ${MAX_LIST_LIMIT}). A page is also cut to fit the reply budget.`,
      })
      .optional(),
  })
  .meta({ title: 'progress/list params' });

/** progress/list also takes no params at all: the first page. */
export const listParamsSchema = z.union([listPageParamsSchema, z.undefined()]);

export const getParamsSchema = z
  .strictObject({ progressToken: progressTokenSchema })
  .meta({ title: 'progress/get params' });

export const streamStateSchema = z.enum(['waiting', 'active', 'done']);

export const streamSummarySchema = z.strictObject({
  progressToken: progressTokenSchema,
  last: progressParamsSchema.optional(),
  state: streamStateSchema,
  status: streamEndStatusSchema.optional(),
  message: z.string().optional(),
  subscribers: z.int().min(0),
  startedAt: z.number(),
  updatedAt: z.number().meta({ description: 'Milliseconds since the epoch.' }),
});

export const listResultSchema = z
  .strictObject({
    streams: z.array(streamSummarySchema),
    nextCursor: z
      .string()
      .meta({
        description: 'Present when more streams follow: pass it as `cursor` for the next page.',
      })
      .optional(),
  })
  .meta({ title: 'progress/list result' });

export const getResultSchema = z
  .strictObject({
    stream: streamSummarySchema
      .meta({ description: 'Omitted when the daemon has no stream with this token.' })
      .optional(),
  })
  .meta({ title: 'progress/get result' });

export const cancelResultSchema = z
  .strictObject({ workers: z.int().min(0) })
  .meta({ title: 'progress/cancel result' });

/** The result of progress/subscribe and progress/unsubscribe. */
export const emptyResultSchema = z.strictObject({});

export type SubscribeParams = z.infer<typeof subscribeParamsSchema>;
export type UnsubscribeParams = z.infer<typeof unsubscribeParamsSchema>;
export type CancelParams = z.infer<typeof cancelParamsSchema>;
export type StreamState = z.infer<typeof streamStateSchema>;
export type StreamSummary = z.infer<typeof streamSummarySchema>;
export type ListParams = z.infer<typeof listPageParamsSchema>;
export type ListResult = z.infer<typeof listResultSchema>;
export type GetResult = z.infer<typeof getResultSchema>;

const count = z.int().min(0);

/** The daemon's figures: the `status` reply on the worker socket and the `progress/status` result. */
export const daemonStatusSchema = z
  .strictObject({
    pid: z.int(),
    version: z.string(),
    uptimeMs: z.number().min(0),
    socket: z.string(),
    url: z.string(),
    connections: count.meta({ description: 'Worker connections, the asking one excluded.' }),
    sessions: count.meta({
      description: 'Gateway sessions of every kind: WebSocket, /mcp, in-process.',
    }),
    streams: z.strictObject({ waiting: count, active: count, done: count }),
    subscriptions: count,
    claims: count,
    memory: z.strictObject({ rss: count, heapUsed: count }),
    counters: z.strictObject({
      framesAccepted: count,
      framesRejected: z.partialRecord(
        z.enum(Object.keys(REJECT_CODES) as [RejectCode, ...RejectCode[]]),
        count,
      ),
      notificationsSent: count,
      coalesced: count,
      connectionsRefused: count,
      slowSessionsClosed: count,
    }),
  })
  .meta({ title: 'status reply data and progress/status result' });

export type DaemonStatus = z.infer<typeof daemonStatusSchema>;
