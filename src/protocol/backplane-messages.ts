/**
 * What daemons publish for each other on the NATS backplane (docs/BACKPLANE.md). Apart from
 * frames.ts, whose fields these reuse, so that only a daemon started with --nats builds them:
 * zod builds a schema when its module loads, and these cost every other process about 5 ms.
 */
import * as z from 'zod';
import {
  cancelParamsSchema,
  messageText,
  metaField,
  progressTokenSchema,
  safeNumber,
  streamEndStatusSchema,
  versionField,
} from './frames.js';

/** A value on the backplane: the accepting daemon's notification params, progress always given. */
const backplaneProgressParamsSchema = z
  .strictObject({
    progressToken: progressTokenSchema,
    progress: safeNumber.meta({
      description:
        'Always present: the publishing daemon already applied the omitted-progress rule.',
    }),
    total: safeNumber.min(0),
    message: messageText,
    _meta: metaField,
  })
  .partial({ total: true, message: true, _meta: true });

const backplaneDoneParamsSchema = z.strictObject({
  progressToken: progressTokenSchema,
  status: streamEndStatusSchema,
  message: messageText.optional(),
});

/** On <prefix>.s.<host>.<token>: every value and the end of one stream, in order. */
export const backplaneStreamMessageSchema = z
  .discriminatedUnion('kind', [
    z.strictObject({
      v: versionField,
      kind: z.literal('progress'),
      params: backplaneProgressParamsSchema,
    }),
    z.strictObject({
      v: versionField,
      kind: z.literal('done'),
      params: backplaneDoneParamsSchema,
      last: backplaneProgressParamsSchema.optional().meta({
        description:
          'The last value before done, if any: the store keeps one message per subject, so a late joiner learns it from here.',
      }),
    }),
  ])
  .meta({ title: 'backplane stream message (daemon to daemons)' });

/** On <prefix>.c.<host>: a cancel for a stream whose worker is on that host. */
export const backplaneCancelSchema = z
  .strictObject({ v: versionField, ...cancelParamsSchema.shape })
  .meta({ title: 'backplane cancel (daemon to the daemon of the stream)' });

/** A daemon's instance id: random at each start, so two live daemons under one name differ. */
const backplaneInstanceField = z
  .string()
  .regex(/^[0-9a-f]{8,32}$/)
  .meta({
    description:
      'This daemon process: random lower-case hex made at start. Two live daemons with one --nats-name have two instances, and the second is refused (docs/BACKPLANE.md).',
  });

/** On <prefix>.h.<host>: the host says it is alive (up) or leaving (down). */
export const backplaneHeartbeatSchema = z
  .strictObject({
    v: versionField,
    state: z.enum(['up', 'down']),
    instance: backplaneInstanceField.optional(),
  })
  .meta({ title: 'backplane heartbeat (daemon to daemons)' });

/**
 * On <prefix>.n.<host>, a request (reply subject set): a daemon about to join as <host> asks
 * whether a live daemon has that name already; the daemon of that name answers with this.
 */
export const backplaneNameClaimSchema = z
  .strictObject({
    v: versionField,
    instance: backplaneInstanceField,
    since: z.int().min(0).meta({
      description: 'When that daemon joined the backplane: integer milliseconds since the epoch.',
    }),
  })
  .meta({ title: 'backplane name check (request and answer, daemon to daemon)' });

export type BackplaneStreamMessage = z.infer<typeof backplaneStreamMessageSchema>;
export type BackplaneCancel = z.infer<typeof backplaneCancelSchema>;
export type BackplaneHeartbeat = z.infer<typeof backplaneHeartbeatSchema>;
export type BackplaneNameClaim = z.infer<typeof backplaneNameClaimSchema>;

/** A parser answering undefined for what is not a message of `schema`: bad input is ignored, never thrown. */
function parserOf<S extends z.ZodType>(schema: S): (value: unknown) => z.infer<S> | undefined {
  const compiled = z.compile(schema);
  return (value) => {
    const result = compiled.safeParse(value);
    return result.success ? result.data : undefined;
  };
}

export const parseBackplaneStream: (value: unknown) => BackplaneStreamMessage | undefined =
  parserOf(backplaneStreamMessageSchema);
export const parseBackplaneCancel: (value: unknown) => BackplaneCancel | undefined =
  parserOf(backplaneCancelSchema);
export const parseBackplaneHeartbeat: (value: unknown) => BackplaneHeartbeat | undefined =
  parserOf(backplaneHeartbeatSchema);
export const parseBackplaneNameClaim: (value: unknown) => BackplaneNameClaim | undefined =
  parserOf(backplaneNameClaimSchema);
