/**
 * The gateway protocol (JSON-RPC 2.0, subprotocol mcp-progress.v1), apart
 * from any transport: text in, reply text out. One session's bad message
 * gets an error and never affects another session.
 */
import type * as z from 'zod';
import {
  cancelParamsSchema,
  type GetResult,
  getParamsSchema,
  type ListResult,
  listParamsSchema,
  MAX_LIST_LIMIT,
  noParamsSchema,
  type ProgressToken,
  RPC_ERRORS,
  type RpcErrorCode,
  type StreamSummary,
  type SubscribeAllParams,
  type SubscribeParams,
  subscribeAllParamsSchema,
  subscribeParamsSchema,
  type TaskCreateParams,
  type TaskListResult,
  type TaskRecord,
  taskCancelParamsSchema,
  taskCreateParamsSchema,
  taskGetParamsSchema,
  taskListParamsSchema,
  unsubscribeParamsSchema,
} from '../protocol/index.js';
import { utf8ByteLength } from '../protocol/limits.js';
import { describe, isPlainObject } from '../protocol/validate.js';
import { cursorPosition, listCursor, taskCursor, taskCursorPosition } from './list-cursor.js';
import type { Outcome, StreamPage, SubscribeRefusal } from './router.js';
import type { TaskPage } from './task-table.js';

export type SessionId = number;

/** What the daemon offers a gateway session. */
export interface GatewayBackend {
  subscribe(session: SessionId, params: SubscribeParams): Outcome<SubscribeRefusal>;
  unsubscribe(session: SessionId, token: ProgressToken): void;
  subscribeAll(session: SessionId, params: SubscribeAllParams): Outcome<'too_many_subscriptions'>;
  unsubscribeAll(session: SessionId): void;
  /**
   * Streams after position `after` (undefined: from the start), at most `limit`, and past the
   * first at most `maxBytes` of summaries (each with its comma).
   */
  list(after: number | undefined, limit: number, maxBytes: number): StreamPage;
  /** The most bytes a progress/list or task/list reply may have (the whole JSON-RPC message). */
  listReplyBytes(): number;
  /** Random per daemon run: a list cursor names it, so a cursor of another run or daemon is refused. */
  readonly listEpoch: string;
  /** Stream-table positions handed out so far: a cursor's position is below this. */
  positionsIssued(): number;
  get(token: ProgressToken): StreamSummary | undefined;
  /** Sends `cancel` to the workers of the stream; returns how many were told. */
  cancel(token: ProgressToken, reason: string | undefined): number;
  status(): object;
  /** A task watching the stream of `params.progressToken` (the daemon's task table). */
  createTask(params: TaskCreateParams): Outcome<'too_many_tasks'> & { task?: TaskRecord };
  getTask(taskId: string): TaskRecord | undefined;
  /** Cancels a working task and tells its stream's workers; returns how many were told. */
  cancelTask(
    taskId: string,
    reason: string | undefined,
  ): { task: TaskRecord | undefined; workers: number };
  /**
   * Tasks after creation order `after`, at most `limit`, and past the first at most `maxBytes` of
   * tasks (each with its comma).
   */
  listTasks(after: number | undefined, limit: number, maxBytes: number): TaskPage;
}

/**
 * A request's id as it is echoed. A number that JavaScript cannot hold exactly (`1e999`, a
 * 30-digit integer) keeps its text, so the reply carries the very id the client sent.
 */
type RpcId = string | number | null | { readonly numberText: string };

interface Method<S extends z.ZodType> {
  readonly params: S;
  readonly usage: string;
  run(
    backend: GatewayBackend,
    session: SessionId,
    params: z.infer<S>,
    id: RpcId,
  ): { result: object } | { error: RpcErrorCode; message: string };
}

function method<S extends z.ZodType>(definition: Method<S>): Method<S> {
  return definition;
}

const METHODS: Record<string, Method<z.ZodType>> = {
  'progress/subscribe': method({
    params: subscribeParamsSchema,
    usage:
      '{"progressToken": string | integer, "as"?: string | integer, "minIntervalMs"?: integer 0..60000}',
    run(backend, session, params) {
      const outcome = backend.subscribe(session, params);
      return outcome.ok ? { result: {} } : { error: outcome.code, message: outcome.message };
    },
  }),
  'progress/unsubscribe': method({
    params: unsubscribeParamsSchema,
    usage: '{"progressToken": string | integer}',
    run(backend, session, params) {
      backend.unsubscribe(session, params.progressToken);
      return { result: {} };
    },
  }),
  'progress/subscribeAll': method({
    params: subscribeAllParamsSchema,
    usage: '{"minIntervalMs"?: integer 0..60000}, or no params',
    run(backend, session, params) {
      const outcome = backend.subscribeAll(session, params);
      return outcome.ok ? { result: {} } : { error: outcome.code, message: outcome.message };
    },
  }),
  'progress/unsubscribeAll': method({
    params: noParamsSchema,
    usage: '{} or no params',
    run(backend, session) {
      backend.unsubscribeAll(session);
      return { result: {} };
    },
  }),
  'progress/list': method({
    params: listParamsSchema,
    usage: `{"cursor"?: string (a nextCursor), "limit"?: integer 1..${MAX_LIST_LIMIT}} or no params`,
    run(backend, _session, params, id) {
      const after = cursorPosition(params?.cursor, backend);
      if (typeof after === 'string') {
        return {
          error: 'invalid_params',
          message: `progress/list: params.cursor: ${after} (got ${JSON.stringify(params?.cursor)}); pass the nextCursor of the previous page, or no cursor to start again from the first page`,
        };
      }
      const page = backend.list(
        after,
        params?.limit ?? MAX_LIST_LIMIT,
        backend.listReplyBytes() -
          envelopeBytes(id, {
            streams: [],
            nextCursor: listCursor(backend.listEpoch, Number.MAX_SAFE_INTEGER),
          }),
      );
      const result: ListResult = { streams: page.streams };
      if (page.next !== undefined) result.nextCursor = listCursor(backend.listEpoch, page.next);
      return { result };
    },
  }),
  'progress/get': method({
    params: getParamsSchema,
    usage: '{"progressToken": string | integer}',
    run(backend, _session, params) {
      const stream = backend.get(params.progressToken);
      const result: GetResult = stream === undefined ? {} : { stream };
      return { result };
    },
  }),
  'progress/cancel': method({
    params: cancelParamsSchema,
    usage: '{"progressToken": string | integer, "reason"?: string}',
    run: (backend, _session, params) => ({
      result: { workers: backend.cancel(params.progressToken, params.reason) },
    }),
  }),
  'progress/status': method({
    params: noParamsSchema,
    usage: '{} or no params',
    run: (backend) => ({ result: backend.status() }),
  }),
  'task/create': method({
    params: taskCreateParamsSchema,
    usage: '{"progressToken": string | integer, "ttlMs"?: integer >= 1}',
    run(backend, _session, params) {
      const outcome = backend.createTask(params);
      return outcome.ok && outcome.task !== undefined
        ? { result: { task: outcome.task } }
        : {
            error: outcome.ok ? 'internal_error' : outcome.code,
            message: outcome.ok ? 'no task' : outcome.message,
          };
    },
  }),
  'task/get': method({
    params: taskGetParamsSchema,
    usage: '{"taskId": string}',
    run(backend, _session, params) {
      const task = backend.getTask(params.taskId);
      return { result: task === undefined ? {} : { task } };
    },
  }),
  'task/cancel': method({
    params: taskCancelParamsSchema,
    usage: '{"taskId": string, "reason"?: string}',
    run(backend, _session, params) {
      const { task, workers } = backend.cancelTask(params.taskId, params.reason);
      return { result: task === undefined ? { workers } : { task, workers } };
    },
  }),
  'task/list': method({
    params: taskListParamsSchema,
    usage: `{"cursor"?: string (a nextCursor), "limit"?: integer 1..${MAX_LIST_LIMIT}} or no params`,
    run(backend, _session, params, id) {
      const after = params?.cursor === undefined ? undefined : taskCursorPosition(params.cursor);
      if (after === null) {
        return {
          error: 'invalid_params',
          message: `task/list: params.cursor: not a cursor of task/list (got ${JSON.stringify(params?.cursor)}); pass the nextCursor of the previous page, or no cursor for the first page`,
        };
      }
      const page = backend.listTasks(
        after,
        params?.limit ?? MAX_LIST_LIMIT,
        backend.listReplyBytes() -
          envelopeBytes(id, { tasks: [], nextCursor: taskCursor(Number.MAX_SAFE_INTEGER) }),
      );
      const result: TaskListResult = { tasks: page.tasks };
      if (page.next !== undefined) result.nextCursor = taskCursor(page.next);
      return { result };
    },
  }),
} as Record<string, Method<z.ZodType>>;

export const RPC_METHODS = Object.keys(METHODS);

/**
 * The bytes of a list reply other than its items and their commas: `empty`, the result with no
 * items and the longest cursor. A page whose items fit `listReplyBytes` minus this fits whole.
 */
function envelopeBytes(id: RpcId, empty: object): number {
  return utf8ByteLength(reply(id, empty));
}

function reply(id: RpcId, result: object): string {
  return `{"jsonrpc":"2.0","id":${idText(id)},"result":${JSON.stringify(result)}}`;
}

export function rpcError(id: RpcId, name: RpcErrorCode, message: string): string {
  const error = { code: RPC_ERRORS[name].code, message, data: { code: name } };
  return `{"jsonrpc":"2.0","id":${idText(id)},"error":${JSON.stringify(error)}}`;
}

function idText(id: RpcId): string {
  return typeof id === 'object' && id !== null ? id.numberText : JSON.stringify(id);
}

type SourceReviver = (
  this: unknown,
  key: string,
  value: unknown,
  context: { source?: string },
) => unknown;

/**
 * The text of a message's top-level numeric `id`, from JSON.parse's source access (Node 21+); read
 * only for the rare id that a double cannot hold. Undefined where the runtime does not give it.
 */
function numericIdText(text: string): string | undefined {
  const sources = new Map<unknown, string>();
  const reviver: SourceReviver = function (key, value, context) {
    if (key === 'id' && typeof value === 'number' && context?.source !== undefined)
      sources.set(this, context.source);
    return value;
  };
  const message = JSON.parse(text, reviver as Parameters<typeof JSON.parse>[1]) as unknown;
  return sources.get(message);
}

/**
 * Handles one text message; returns the reply, or undefined for a notification. A method that
 * throws (a bug) fails its request only: `failed` hears its message, and the reply is internal_error
 * with the request's id.
 */
export function handleRpcText(
  session: SessionId,
  text: string,
  backend: GatewayBackend,
  failed: (message: string) => void,
): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return rpcError(
      null,
      'parse_error',
      'the message is not valid JSON: send one JSON-RPC 2.0 request per WebSocket text message',
    );
  }
  if (Array.isArray(message)) {
    return rpcError(
      null,
      'invalid_request',
      'JSON-RPC batches are not supported: send one request per message',
    );
  }
  if (!isPlainObject(message)) {
    return rpcError(
      null,
      'invalid_request',
      `a request must be a JSON object, got ${describe(message)}`,
    );
  }
  const hasId = Object.hasOwn(message, 'id');
  const id = message.id;
  if (hasId && !(typeof id === 'string' || typeof id === 'number' || id === null)) {
    return rpcError(
      null,
      'invalid_request',
      `id must be a string, a number or null, got ${describe(id)}`,
    );
  }
  let rpcId = (hasId ? id : null) as RpcId;
  if (typeof id === 'number' && !Number.isSafeInteger(id)) {
    const numberText = numericIdText(text);
    if (numberText !== undefined && numberText !== JSON.stringify(id)) rpcId = { numberText };
  }
  try {
    return answer(session, message, hasId, rpcId, backend);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    failed(message);
    // JSON-RPC 2.0: the error carries the request's id, once read (§5); a notification gets none (§4.1).
    if (!hasId) return undefined;
    return rpcError(rpcId, 'internal_error', `the daemon failed on this request: ${message}`);
  }
}

/** The reply to a message whose id has been read: its checks, then its method's outcome. */
function answer(
  session: SessionId,
  message: Record<string, unknown>,
  hasId: boolean,
  rpcId: RpcId,
  backend: GatewayBackend,
): string | undefined {
  if (message.jsonrpc !== '2.0') {
    return rpcError(
      rpcId,
      'invalid_request',
      `jsonrpc must be "2.0", got ${describe(message.jsonrpc)}`,
    );
  }
  if (typeof message.method !== 'string') {
    return rpcError(
      rpcId,
      'invalid_request',
      `method must be a string, got ${describe(message.method)}`,
    );
  }
  const definition = Object.hasOwn(METHODS, message.method) ? METHODS[message.method] : undefined;
  if (definition === undefined) {
    if (!hasId) return undefined;
    return rpcError(
      rpcId,
      'method_not_found',
      `unknown method ${JSON.stringify(message.method)}: mcp-progress.v1 has ${RPC_METHODS.join(', ')}`,
    );
  }
  const parsed = definition.params.safeParse(message.params);
  // JSON-RPC 2.0 §4.1: a notification (no id) is never answered, not even with an error.
  if (!parsed.success && !hasId) return undefined;
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? `params.${issue.path.join('.')}` : 'params';
    const got =
      issue && issue.path.length > 0 ? valueAt(message.params, issue.path) : message.params;
    return rpcError(
      rpcId,
      'invalid_params',
      `${message.method}: ${where}: ${issue?.message ?? 'invalid'} (got ${describe(got)}); expected params ${definition.usage}`,
    );
  }
  const outcome = definition.run(backend, session, parsed.data, rpcId);
  if (!hasId) return undefined;
  return 'result' in outcome
    ? reply(rpcId, outcome.result)
    : rpcError(rpcId, outcome.error, outcome.message);
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let current = value;
  for (const key of path) {
    if (!isPlainObject(current)) return undefined;
    current = current[String(key)];
  }
  return current;
}
