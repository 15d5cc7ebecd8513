/**
 * Protocol v1 schemas: the single place where a field is named. Types are
 * inferred from these schemas, and schemas/*.json is generated from them.
 */
import * as z from 'zod';
import {
  HTTP_REFUSALS,
  type HttpRefusalCode,
  REJECT_CODES,
  type RejectCode,
  RPC_ERRORS,
  type RpcErrorCode,
} from './errors.js';
import {
  fitsUtf8Bytes,
  isWellFormedText,
  MAX_HOST_NAME_BYTES,
  MAX_LIST_LIMIT,
  MAX_MESSAGE_BYTES,
  MAX_META_DEPTH,
  MAX_MIN_INTERVAL_MS,
  MAX_REASON_BYTES,
  MAX_SAFE_NUMBER,
  MAX_TOKEN_BYTES,
  MAX_TYPE_BYTES,
  PROTOCOL_VERSION,
} from './limits.js';
import { metaProblem } from './meta.js';

export { metaProblem, nestedWithin } from './meta.js';

/**
 * JSON Schema has no keyword for a length in UTF-8 bytes: `maxLength` (code points) is
 * only an upper bound, and this annotation, with the description, states the real rule.
 */
export const UTF8_BYTES_KEYWORD = 'x-maxUtf8Bytes';

/**
 * The rules a validator must apply that JSON Schema cannot state, by name. docs/PROTOCOL.md
 * (section "Rules beyond JSON Schema") lists them; each schema node they apply to names them
 * in the annotation `x-rules`.
 */
export const RULES_KEYWORD = 'x-rules';
export const RULES_BEYOND_SCHEMA = {
  'utf8-bytes': 'a length limit in UTF-8 bytes (x-maxUtf8Bytes); maxLength is only an upper bound',
  'well-formed-text':
    'no lone surrogate (an unpaired \\uD800-\\uDFFF) in a string or an object key',
  'progress-increases':
    "greater than the stream's last accepted progress, across every connection; omitted: last + 1",
  'meta-bounds': `objects and arrays nest at most ${MAX_META_DEPTH} levels (_meta is level 1); every number within ±${MAX_SAFE_NUMBER}`,
} as const;
export type RuleBeyondSchema = keyof typeof RULES_BEYOND_SCHEMA;

function rules(...names: RuleBeyondSchema[]): { [RULES_KEYWORD]: RuleBeyondSchema[] } {
  return { [RULES_KEYWORD]: names };
}

/** A string of at most `maxBytes` UTF-8 bytes, and well-formed Unicode (no lone surrogate). */
export function utf8Text(maxBytes: number, description: string, minLength = 0) {
  const text = minLength > 0 ? z.string().min(minLength) : z.string();
  const rule = `at most ${maxBytes} UTF-8 bytes, with no lone surrogate`;
  return (
    text
      // The limit is in bytes: maxLength is only its upper bound, and says so in bytes too.
      .max(maxBytes, { message: rule })
      // One refinement, not two: this runs for every message on the hot path.
      .refine((text) => fitsUtf8Bytes(text, maxBytes) && isWellFormedText(text), {
        message: rule,
      })
      .meta({
        description,
        [UTF8_BYTES_KEYWORD]: maxBytes,
        ...rules('utf8-bytes', 'well-formed-text'),
      })
  );
}

/** A host's name on a NATS backplane, as the daemon reports it. */
function hostName(description: string) {
  return utf8Text(
    MAX_HOST_NAME_BYTES,
    `${description}, at most ${MAX_HOST_NAME_BYTES} UTF-8 bytes.`,
    1,
  );
}

const tokenString = utf8Text(
  MAX_TOKEN_BYTES,
  `Non-empty, at most ${MAX_TOKEN_BYTES} UTF-8 bytes (maxLength is only an upper bound), no lone surrogate.`,
  1,
);

/** A progressToken: "7" and 7 are different tokens, and the type survives end to end. */
export const progressTokenSchema = z.union([tokenString, z.int()]).meta({
  description: `A non-empty string of at most ${MAX_TOKEN_BYTES} UTF-8 bytes, or a safe integer. "7" and 7 are different tokens; an integer token is compared by value (7.0 is 7).`,
});

export const messageText = utf8Text(
  MAX_MESSAGE_BYTES,
  `Human-readable text, at most ${MAX_MESSAGE_BYTES} UTF-8 bytes (maxLength is only an upper bound), no lone surrogate.`,
);

export const versionField = z
  .literal(PROTOCOL_VERSION)
  .meta({ description: 'Protocol version: 1.' });

const seqField = z.int().min(0).meta({
  description:
    'Optional sequence number; the daemon answers `ack` {seq} when it accepts the frame.',
});

/** A number every strict client reads exactly: finite, and within ±(2^53 - 1). */
export const safeNumber = z.number().min(-MAX_SAFE_NUMBER).max(MAX_SAFE_NUMBER);

export const metaField = z
  .record(z.string(), z.unknown())
  .refine((meta) => metaProblem(meta) === undefined, {
    message: `nested at most ${MAX_META_DEPTH} levels deep, numbers within ±${MAX_SAFE_NUMBER}, no lone surrogate`,
  })
  .meta({
    description: `Forwarded unchanged as the notification params \`_meta\`. Objects and arrays nest at most ${MAX_META_DEPTH} levels deep (\`_meta\` itself is level 1); every number is within ±${MAX_SAFE_NUMBER} (send larger ones as strings); strings and keys are well-formed Unicode.`,
    ...rules('meta-bounds', 'well-formed-text'),
  });

export const doneStatusSchema = z.enum(['ok', 'error', 'cancelled']);

/** Data of a worker's `progress` frame. */
export const progressFrameSchema = z
  .strictObject({
    v: versionField,
    progressToken: progressTokenSchema,
    progress: safeNumber.meta({
      description: `Finite number within ±${MAX_SAFE_NUMBER}; must exceed the stream's last accepted progress (the first one may be any such number). Omitted: last + 1. Not compared with total.`,
      ...rules('progress-increases'),
    }),
    total: safeNumber.min(0).meta({ description: `Finite number, 0 to ${MAX_SAFE_NUMBER}.` }),
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

/** Data of `ping` and `status` requests when present: an empty object. */
export const emptyDataSchema = z.strictObject({}).meta({
  title: 'ping / status frame data (v1)',
  description:
    'The data of a ping or status frame: {} or absent (an envelope without data). Anything else is refused: unknown_field for an object with fields, invalid_frame otherwise.',
});

/** Data of `ping` and `status` requests: nothing, or an empty object. */
export const emptyRequestSchema = z.union([emptyDataSchema, z.undefined()]);

/** The envelope of every frame, both directions: `type` names the event, `data` its data. */
export const envelopeSchema = z
  .looseObject({
    type: z
      .string()
      .min(1)
      .max(MAX_TYPE_BYTES, { message: `at most ${MAX_TYPE_BYTES} UTF-8 bytes` })
      .refine((type) => fitsUtf8Bytes(type, MAX_TYPE_BYTES), {
        message: `at most ${MAX_TYPE_BYTES} UTF-8 bytes`,
      })
      .meta({
        description: `The event: non-empty, at most ${MAX_TYPE_BYTES} UTF-8 bytes (maxLength is only an upper bound); not a node-ipc reserved name (start, connect, disconnect, destroy, close, socket.disconnected, error, data) nor an Object.prototype property name.`,
        [UTF8_BYTES_KEYWORD]: MAX_TYPE_BYTES,
        ...rules('utf8-bytes'),
      }),
    data: z
      .unknown()
      .meta({ description: "The event's data; see the schema of each event. May be absent." })
      .optional(),
  })
  .meta({
    title: 'frame envelope (v1)',
    description:
      'One frame: this JSON object as UTF-8 (no BOM), at most 65536 bytes, followed by one form feed (0x0C). Other keys are ignored.',
  });

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
    reason: z
      .string()
      .meta({ description: `At most ${MAX_REASON_BYTES} UTF-8 bytes, as the gateway sent it.` })
      .optional(),
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

/** progress/subscribeAll: every active stream, and every one that starts later. */
export const subscribeAllObjectSchema = z
  .strictObject({
    minIntervalMs: z
      .int()
      .min(0)
      .max(MAX_MIN_INTERVAL_MS)
      .meta({
        description: 'Coalescing interval of each stream; 0 turns coalescing off. Default 100.',
      })
      .optional(),
  })
  .meta({ title: 'progress/subscribeAll params' });

/** progress/subscribeAll also takes no params at all: the default interval. */
export const subscribeAllParamsSchema = z.union([subscribeAllObjectSchema, z.undefined()]);

export const unsubscribeParamsSchema = z
  .strictObject({ progressToken: progressTokenSchema })
  .meta({ title: 'progress/unsubscribe params' });

export const cancelParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    reason: utf8Text(
      MAX_REASON_BYTES,
      `Why, for the worker: at most ${MAX_REASON_BYTES} UTF-8 bytes (maxLength is only an upper bound), no lone surrogate.`,
    ).optional(),
  })
  .meta({ title: 'progress/cancel params' });

/** Params of methods that take none (progress/status): nothing, or an empty object. */
export const noParamsSchema = z
  .union([z.strictObject({}), z.undefined()])
  .meta({ title: 'progress/status params' });

/** The published form of progress/unsubscribeAll params (no params at all is accepted too). */
export const unsubscribeAllObjectSchema = z
  .strictObject({})
  .meta({ title: 'progress/unsubscribeAll params' });

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
  startedAt: z.int().min(0).meta({ description: 'Integer milliseconds since the epoch.' }),
  updatedAt: z.int().min(0).meta({ description: 'Integer milliseconds since the epoch.' }),
  rate: z
    .number()
    .min(0)
    .nullable()
    .meta({
      description:
        "An active stream's rate, in progress units per second, smoothed over about 15 s and falling while a value is overdue; null until it has two values at different times. Absent for waiting and done streams.",
    })
    .optional(),
  etaMs: z
    .int()
    .min(0)
    .nullable()
    .meta({
      description:
        "An active stream's estimated milliseconds until progress reaches total, at `rate`; 0 once reached; null without a total or a rate above 0. Absent for waiting and done streams.",
    })
    .optional(),
  host: hostName(
    'With a NATS backplane: the name of the host whose worker publishes the stream (docs/BACKPLANE.md)',
  ).optional(),
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

/** The result of progress/subscribe, progress/unsubscribe and their All forms. */
export const emptyResultSchema = z
  .strictObject({})
  .meta({ title: 'progress/subscribe, unsubscribe, subscribeAll and unsubscribeAll result' });

export type SubscribeParams = z.infer<typeof subscribeParamsSchema>;
export type UnsubscribeParams = z.infer<typeof unsubscribeParamsSchema>;
export type SubscribeAllParams = z.infer<typeof subscribeAllParamsSchema>;
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
    uptimeMs: count.meta({ description: 'Integer milliseconds.' }),
    socket: z.string(),
    url: z.string(),
    connections: count.meta({ description: 'Worker connections, the asking one excluded.' }),
    sessions: count.meta({
      description: 'Gateway sessions of every kind: WebSocket, /mcp, in-process, page.',
    }),
    pageSessions: count.meta({
      description: 'Of the sessions, streams of the live page (GET /events): one per browser tab.',
    }),
    localLinkSessions: count.meta({
      description:
        "Of the sessions, WebSocket sessions on the gateway's Unix socket (the local link, daemon.json's gatewaySocket).",
    }),
    streams: z.strictObject({ waiting: count, active: count, done: count }),
    subscriptions: count,
    subscribedToAll: count.meta({
      description: 'Sessions that follow every stream (progress/subscribeAll).',
    }),
    claims: count,
    tasks: count.meta({
      description:
        'MCP tasks the daemon holds (task/create): working ones, and terminal ones until their TTL passes (then released within a second, asked or not).',
    }),
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
      unreadRepliesClosed: count.meta({
        description:
          'Worker connections closed for leaving more than --max-pending-reply-bytes of replies unread.',
      }),
      slowSessionsClosed: count,
      pendingConnectionsEvicted: count.meta({
        description:
          'Unauthenticated gateway connections closed to make room for a newer one of the same local user (--max-pending-connections per user).',
      }),
      handshakeTimeouts: count.meta({
        description:
          'Gateway connections closed for not authenticating within --handshake-timeout-ms.',
      }),
      keepaliveTimeouts: count.meta({
        description: 'WebSocket sessions closed for not answering a ping within --pong-timeout-ms.',
      }),
    }),
    journal: z
      .strictObject({
        failing: z.boolean().meta({
          description:
            'The last write to dones.jsonl failed: dones are refused with journal_failed (and not applied) until a write succeeds.',
        }),
        lastError: z
          .string()
          .meta({ description: 'Why the last failed write failed, while failing.' })
          .optional(),
        bytes: count.meta({ description: 'The size of dones.jsonl.' }),
        dones: count.meta({ description: 'Dones in it within the retention window.' }),
        recovered: count.meta({ description: 'Dones replayed from it at start.' }),
        refusedLines: count.meta({
          description: 'Lines refused at start (invalid, too long, dated in the future).',
        }),
        writeFailures: count.meta({ description: 'Dones refused with journal_failed.' }),
      })
      .meta({ description: 'The done journal (docs/RELIABILITY.md).' }),
    backplane: z
      .strictObject({
        name: hostName('This daemon on the backplane (--nats-name)'),
        instance: z.string().meta({
          description: 'This daemon process on the backplane (random at start, in its heartbeats).',
        }),
        connected: z.boolean().meta({
          description:
            'Whether it is connected to NATS now: false while cut off, and when NATS stopped answering for 3 heartbeats (stalled).',
        }),
        unconfirmed: count.meta({
          description:
            'Stream messages kept until NATS confirms them, or made while cut off, to be sent again at the reconnect (capped, docs/BACKPLANE.md).',
        }),
        unconfirmedBytes: count.meta({
          description:
            "Their size in bytes, subjects and bodies (capped too): past either cap they are dropped, and the reconnect sends each stream's newest value or end.",
        }),
        refused: z.string().optional().meta({
          description:
            'Why this daemon did not join: another live daemon has its --nats-name (that daemon named). It runs locally.',
        }),
        hosts: z
          .array(
            z.strictObject({
              name: hostName('Its --nats-name'),
              state: z.enum(['up', 'lost']).meta({
                description:
                  'lost: no heartbeat for 3 intervals, or it said it stopped; its active streams end as abandoned after the grace unless it comes back.',
              }),
              activeStreams: count,
              instance: z.string().optional().meta({
                description: 'The instance its last heartbeat carried.',
              }),
            }),
          )
          .meta({ description: 'The other daemons this one has heard of.' }),
        invalidMessages: count.meta({
          description:
            'Messages on the backplane subjects that failed validation and were ignored.',
        }),
      })
      .optional()
      .meta({ description: 'With --nats only (docs/BACKPLANE.md).' }),
  })
  .meta({ title: 'status reply data and progress/status result' });

export type DaemonStatus = z.infer<typeof daemonStatusSchema>;

// JSON-RPC errors and daemon.json.

/** A JSON-RPC error whose `data.code` is one of `names`: the shape of every coded error (errorReply). */
function errorReplySchema<Name extends string>(names: readonly [Name, ...Name[]]) {
  return z.strictObject({
    jsonrpc: z.literal('2.0'),
    id: z.union([z.string(), z.number(), z.null()]).meta({
      description:
        "The request's id when the message was a JSON object whose id is a string, a number or null; otherwise null.",
    }),
    error: z.strictObject({
      code: z.int().meta({ description: 'The JSON-RPC 2.0 numeric code.' }),
      message: z.string().meta({ description: 'What was wrong and how to fix it.' }),
      data: z.strictObject({
        code: z.enum(names).meta({ description: 'The stable name of the error.' }),
      }),
    }),
  });
}

/** Every JSON-RPC error reply the daemon sends on the WebSocket. */
export const rpcErrorSchema = errorReplySchema(
  Object.keys(RPC_ERRORS) as [RpcErrorCode, ...RpcErrorCode[]],
).meta({ title: 'JSON-RPC error reply (daemon to gateway)' });

/**
 * The body of every refusal on the gateway port (HTTP_REFUSALS): of a request, of a WebSocket
 * upgrade, of the live page's routes.
 */
export const httpRefusalSchema = errorReplySchema(
  Object.keys(HTTP_REFUSALS) as [HttpRefusalCode, ...HttpRefusalCode[]],
).meta({ title: 'HTTP refusal body (daemon to any HTTP client)' });

export type HttpRefusalBody = z.infer<typeof httpRefusalSchema>;

export type RpcErrorReply = z.infer<typeof rpcErrorSchema>;

/** The runtime directory's daemon.json, written when the daemon is ready. */
export const daemonInfoSchema = z
  .strictObject({
    pid: z.int().min(1),
    version: z.string(),
    socket: z.string().meta({ description: 'The worker socket path (a named pipe on Windows).' }),
    url: z.string().meta({ description: 'The WebSocket URL, for example ws://127.0.0.1:7717/ws.' }),
    secret: z.string().meta({ description: 'The gateway secret; changes at every start.' }),
    gatewaySocket: z
      .string()
      .meta({
        description:
          'The Unix socket (mode 0600, in the runtime directory) serving the same gateway as url, for processes of the same user (the local link). Absent on Windows.',
      })
      .optional(),
  })
  .meta({ title: 'daemon.json', description: 'Mode 0600, owned by the user the daemon runs as.' });

/**
 * One line of dones.jsonl in the runtime directory: a done the daemon acked, with what a
 * daemon restarted there needs to end the stream again as it was (its last value, its times).
 */
export const journalLineSchema = z
  .strictObject({
    v: versionField,
    at: z.int().min(0).meta({
      description:
        "When the done was accepted, integer milliseconds since the epoch; the retention counts from it. A line dated after the reading daemon's clock is refused.",
    }),
    startedAt: z.int().min(0).meta({
      description: 'When the stream started, integer milliseconds since the epoch; at most `at`.',
    }),
    progressToken: progressTokenSchema,
    status: doneStatusSchema,
    message: messageText.optional(),
    last: progressFrameSchema
      .omit({ v: true, seq: true, progressToken: true })
      .required({ progress: true })
      .meta({ description: "The stream's last value before the done, without its token." })
      .optional(),
  })
  .refine((line) => line.startedAt <= line.at, {
    message: 'startedAt is after at',
    path: ['startedAt'],
  })
  .meta({ title: 'dones.jsonl line (v1)' });

export type JournalLine = z.infer<typeof journalLineSchema>;
