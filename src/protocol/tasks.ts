/**
 * The gateway methods of the daemon's task table (task/create, task/get, task/cancel, task/list):
 * a task watches one stream and keeps its outcome for its TTL, whichever MCP process asks.
 */
import * as z from 'zod';
import { progressTokenSchema, streamSummarySchema, utf8Text } from './frames.js';
import { MAX_LIST_LIMIT, MAX_REASON_BYTES } from './limits.js';

/** A task id: the daemon's, random and unguessable (22 base64url characters). */
export const MAX_TASK_ID_LENGTH = 64;

const taskIdSchema = z
  .string()
  .min(1)
  .max(MAX_TASK_ID_LENGTH)
  .meta({ description: 'The id task/create returned.' });

/** MCP's task statuses (2025-11-25): the daemon never uses input_required. */
export const taskStatusSchema = z.enum(['working', 'completed', 'failed', 'cancelled']);

export const TERMINAL_TASK_STATUSES: ReadonlySet<TaskStatus> = new Set([
  'completed',
  'failed',
  'cancelled',
]);

export const taskRecordSchema = z.strictObject({
  taskId: taskIdSchema,
  progressToken: progressTokenSchema,
  status: taskStatusSchema,
  reason: z
    .string()
    .meta({
      description:
        'failed: the done message or why the stream was abandoned; cancelled: the cancel reason. Absent otherwise.',
    })
    .optional(),
  createdAt: z.int().min(0).meta({ description: 'Integer milliseconds since the epoch.' }),
  updatedAt: z
    .int()
    .min(0)
    .meta({ description: 'When the status last changed: integer milliseconds since the epoch.' }),
  ttlMs: z.int().min(1).meta({
    description:
      'The task is kept at least this long after createdAt: the requested TTL, and more while its job runs and once it ended (the TTL counts from its end; docs/PROTOCOL.md).',
  }),
  pollIntervalMs: z.int().min(1).meta({ description: 'How often a client should ask again.' }),
  stream: streamSummarySchema
    .meta({
      description:
        "The watched stream now: the daemon's summary while it holds the stream, or the summary kept when it ended. Absent while no worker has published to the token.",
    })
    .optional(),
});

export const taskCreateParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    ttlMs: z
      .int()
      .min(1)
      .meta({
        description:
          'Requested TTL: how long the task is kept after its creation while its job has not started, and after its end; the daemon caps it (docs/PROTOCOL.md).',
      })
      .optional(),
  })
  .meta({ title: 'task/create params' });

export const taskCreateResultSchema = z
  .strictObject({ task: taskRecordSchema })
  .meta({ title: 'task/create result' });

export const taskGetParamsSchema = z
  .strictObject({ taskId: taskIdSchema })
  .meta({ title: 'task/get params' });

export const taskGetResultSchema = z
  .strictObject({
    task: taskRecordSchema
      .meta({
        description: 'Omitted when the daemon has no such task (never created, or expired).',
      })
      .optional(),
  })
  .meta({ title: 'task/get result' });

export const taskCancelParamsSchema = z
  .strictObject({
    taskId: taskIdSchema,
    reason: utf8Text(
      MAX_REASON_BYTES,
      `Why, for the worker: at most ${MAX_REASON_BYTES} UTF-8 bytes, no lone surrogate.`,
    ).optional(),
  })
  .meta({ title: 'task/cancel params' });

export const taskCancelResultSchema = z
  .strictObject({
    task: taskRecordSchema
      .meta({ description: 'Omitted when the daemon has no such task.' })
      .optional(),
    workers: z
      .int()
      .min(0)
      .meta({ description: 'Workers told to cancel (0 when the task was already terminal).' }),
  })
  .meta({ title: 'task/cancel result' });

export const taskListPageParamsSchema = z
  .strictObject({
    cursor: z.string().max(64).meta({ description: 'A nextCursor of task/list.' }).optional(),
    limit: z.int().min(1).max(MAX_LIST_LIMIT).optional(),
  })
  .meta({ title: 'task/list params' });

/** task/list also takes no params at all: the first page. */
export const taskListParamsSchema = z.union([taskListPageParamsSchema, z.undefined()]);

export const taskListResultSchema = z
  .strictObject({
    tasks: z.array(taskRecordSchema),
    nextCursor: z
      .string()
      .meta({ description: 'Present when more tasks follow: pass it as `cursor`.' })
      .optional(),
  })
  .meta({ title: 'task/list result' });

export type TaskStatus = z.infer<typeof taskStatusSchema>;
export type TaskRecord = z.infer<typeof taskRecordSchema>;
export type TaskCreateParams = z.infer<typeof taskCreateParamsSchema>;
export type TaskListParams = z.infer<typeof taskListPageParamsSchema>;
export type TaskListResult = z.infer<typeof taskListResultSchema>;
