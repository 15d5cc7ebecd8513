/** JSON Schema (draft 2020-12) generated from the zod schemas, for clients in other languages. */
import * as z from 'zod';
import {
  backplaneCancelSchema,
  backplaneHeartbeatSchema,
  backplaneNameClaimSchema,
  backplaneStreamMessageSchema,
} from './backplane-messages.js';
import {
  ackSchema,
  cancelParamsSchema,
  cancelResultSchema,
  cancelSchema,
  claimFrameSchema,
  daemonInfoSchema,
  daemonStatusSchema,
  doneFrameSchema,
  doneParamsSchema,
  emptyDataSchema,
  emptyResultSchema,
  envelopeSchema,
  getParamsSchema,
  getResultSchema,
  httpRefusalSchema,
  journalLineSchema,
  listPageParamsSchema,
  listResultSchema,
  pongSchema,
  progressFrameSchema,
  progressParamsSchema,
  rejectedSchema,
  rpcErrorSchema,
  subscribeAllObjectSchema,
  subscribeParamsSchema,
  unsubscribeAllObjectSchema,
  unsubscribeParamsSchema,
} from './frames.js';
import {
  taskCancelParamsSchema,
  taskCancelResultSchema,
  taskCreateParamsSchema,
  taskCreateResultSchema,
  taskGetParamsSchema,
  taskGetResultSchema,
  taskListPageParamsSchema,
  taskListResultSchema,
} from './tasks.js';

/** File name (without .json) -> schema. The names are part of the published contract. */
export const PUBLISHED_SCHEMAS = {
  'envelope.v1': envelopeSchema,
  'ping-frame.v1': emptyDataSchema,
  'status-frame.v1': emptyDataSchema,
  'progress-frame.v1': progressFrameSchema,
  'done-frame.v1': doneFrameSchema,
  'claim-frame.v1': claimFrameSchema,
  'rejected.v1': rejectedSchema,
  'ack.v1': ackSchema,
  'cancel.v1': cancelSchema,
  'pong.v1': pongSchema,
  'progress-notification-params.v1': progressParamsSchema,
  'done-notification-params.v1': doneParamsSchema,
  'subscribe-params.v1': subscribeParamsSchema,
  'subscribe-result.v1': emptyResultSchema,
  'unsubscribe-params.v1': unsubscribeParamsSchema,
  'unsubscribe-result.v1': emptyResultSchema,
  'subscribe-all-params.v1': subscribeAllObjectSchema,
  'subscribe-all-result.v1': emptyResultSchema,
  'unsubscribe-all-params.v1': unsubscribeAllObjectSchema,
  'unsubscribe-all-result.v1': emptyResultSchema,
  'cancel-params.v1': cancelParamsSchema,
  'cancel-result.v1': cancelResultSchema,
  'list-params.v1': listPageParamsSchema,
  'list-result.v1': listResultSchema,
  'get-params.v1': getParamsSchema,
  'get-result.v1': getResultSchema,
  'task-create-params.v1': taskCreateParamsSchema,
  'task-create-result.v1': taskCreateResultSchema,
  'task-get-params.v1': taskGetParamsSchema,
  'task-get-result.v1': taskGetResultSchema,
  'task-cancel-params.v1': taskCancelParamsSchema,
  'task-cancel-result.v1': taskCancelResultSchema,
  'task-list-params.v1': taskListPageParamsSchema,
  'task-list-result.v1': taskListResultSchema,
  'journal-line.v1': journalLineSchema,
  'status.v1': daemonStatusSchema,
  'jsonrpc-error.v1': rpcErrorSchema,
  'http-refusal.v1': httpRefusalSchema,
  'daemon-json.v1': daemonInfoSchema,
  'backplane-stream.v1': backplaneStreamMessageSchema,
  'backplane-cancel.v1': backplaneCancelSchema,
  'backplane-heartbeat.v1': backplaneHeartbeatSchema,
  'backplane-name-claim.v1': backplaneNameClaimSchema,
} as const;

export type SchemaName = keyof typeof PUBLISHED_SCHEMAS;

/** The published schema of each gateway method's result: every result has one. */
export const RESULT_SCHEMA_NAMES = {
  'progress/subscribe': 'subscribe-result.v1',
  'progress/unsubscribe': 'unsubscribe-result.v1',
  'progress/subscribeAll': 'subscribe-all-result.v1',
  'progress/unsubscribeAll': 'unsubscribe-all-result.v1',
  'progress/list': 'list-result.v1',
  'progress/get': 'get-result.v1',
  'progress/cancel': 'cancel-result.v1',
  'progress/status': 'status.v1',
  'task/create': 'task-create-result.v1',
  'task/get': 'task-get-result.v1',
  'task/cancel': 'task-cancel-result.v1',
  'task/list': 'task-list-result.v1',
} as const satisfies Record<string, SchemaName>;

export function jsonSchema(name: SchemaName): Record<string, unknown> {
  const generated = z.toJSONSchema(PUBLISHED_SCHEMAS[name], {
    target: 'draft-2020-12',
    io: 'input',
  });
  return { $id: `urn:mcp-progress-bridge:schema:${name}`, ...generated };
}

/** The text of schemas/<name>.json, byte for byte. */
export function jsonSchemaText(name: SchemaName): string {
  return `${JSON.stringify(jsonSchema(name), null, 2)}\n`;
}
