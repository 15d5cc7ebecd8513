/**
 * The daemon in this process as a progress source for the MCP tools: its
 * backend and in-process sessions of its hub, with no socket in between.
 */

import type { ProgressSession, ProgressSource, TaskCancelled } from '../mcp/progress-source.js';
import type { ListParams, ListResult, ProgressToken, StreamSummary } from '../protocol/frames.js';
import { MAX_LIST_LIMIT } from '../protocol/limits.js';
import type {
  TaskCreateParams,
  TaskListParams,
  TaskListResult,
  TaskRecord,
} from '../protocol/tasks.js';
import { BridgeError } from '../shared/errors.js';
import { SubscriptionLabels } from '../shared/subscription-labels.js';
import { cursorPosition, listCursor, taskCursor, taskCursorPosition } from './list-cursor.js';
import type { GatewayBackend } from './rpc.js';
import type { LocalReceiver, LocalSession } from './sessions.js';

/** Adds a listener of the tasks cancelled in the daemon; returns how to remove it. */
export type TaskCancels = (listener: (task: TaskRecord) => void) => () => void;

/** The daemon in this process: its backend, and in-process sessions of its hub. */
export class LocalProgressSource implements ProgressSource {
  readonly #backend: GatewayBackend;
  readonly #open: (receive: LocalReceiver) => LocalSession;
  readonly #sessions = new Set<LocalSession>();
  readonly #taskCancels: TaskCancels | undefined;

  /** `taskCancels`: how to hear of each task cancelled in the daemon, by anyone. */
  constructor(
    backend: GatewayBackend,
    open: (receive: LocalReceiver) => LocalSession,
    taskCancels?: TaskCancels,
  ) {
    this.#backend = backend;
    this.#open = open;
    this.#taskCancels = taskCancels;
  }

  onTaskCancelled(listener: (task: TaskRecord) => void): () => void {
    return this.#taskCancels?.(listener) ?? (() => {});
  }

  async openSession(): Promise<ProgressSession> {
    const labels = new SubscriptionLabels();
    const session = this.#open((notification) => {
      labels.deliver(notification);
    });
    this.#sessions.add(session);
    return {
      subscribe: async (params, handler) => {
        const entry = labels.add(params, handler);
        const outcome = this.#backend.subscribe(session.id, params);
        if (!outcome.ok) {
          labels.remove(entry);
          throw new BridgeError(outcome.code, outcome.message);
        }
        return {
          unsubscribe: async () => {
            if (labels.remove(entry)) this.#backend.unsubscribe(session.id, params.progressToken);
          },
        };
      },
      close: async () => {
        labels.clear();
        this.#sessions.delete(session);
        session.close();
      },
    };
  }

  async list(params: ListParams = {}): Promise<ListResult> {
    const after = cursorPosition(params.cursor, this.#backend);
    if (typeof after === 'string') {
      throw new BridgeError(
        'invalid_option',
        `${after}: ${JSON.stringify(params.cursor)}; pass the nextCursor of the previous page, or none for the first page`,
      );
    }
    const page = this.#backend.list(
      after,
      params.limit ?? MAX_LIST_LIMIT,
      this.#backend.listReplyBytes(),
    );
    return page.next === undefined
      ? { streams: page.streams }
      : { streams: page.streams, nextCursor: listCursor(this.#backend.listEpoch, page.next) };
  }

  async get(token: ProgressToken): Promise<StreamSummary | undefined> {
    return this.#backend.get(token);
  }

  async cancel(token: ProgressToken, reason?: string): Promise<number> {
    return this.#backend.cancel(token, reason);
  }

  async createTask(params: TaskCreateParams): Promise<TaskRecord> {
    const outcome = this.#backend.createTask(params);
    if (!outcome.ok) throw new BridgeError(outcome.code, outcome.message);
    return outcome.task as TaskRecord;
  }

  async getTask(taskId: string): Promise<TaskRecord | undefined> {
    return this.#backend.getTask(taskId);
  }

  async cancelTask(taskId: string, reason?: string): Promise<TaskCancelled> {
    return this.#backend.cancelTask(taskId, reason);
  }

  async listTasks(params: TaskListParams = {}): Promise<TaskListResult> {
    const after = params.cursor === undefined ? undefined : taskCursorPosition(params.cursor);
    if (after === null) {
      throw new BridgeError(
        'invalid_option',
        `not a cursor of task/list: ${JSON.stringify(params.cursor)}; pass the nextCursor of the previous page, or none for the first page`,
      );
    }
    const page = this.#backend.listTasks(
      after,
      params.limit ?? MAX_LIST_LIMIT,
      this.#backend.listReplyBytes(),
    );
    return page.next === undefined
      ? { tasks: page.tasks }
      : { tasks: page.tasks, nextCursor: taskCursor(page.next) };
  }

  async close(): Promise<void> {
    for (const session of this.#sessions) session.close();
    this.#sessions.clear();
  }
}
