/**
 * The JSON-RPC notifications the router delivers. Built once per update and
 * shared by every subscriber that sees the same params, so egress can
 * serialise each one once.
 */
import type { DoneParams, ProgressFrame, ProgressParams, ProgressToken } from './frames.js';

export const PROGRESS_METHOD = 'notifications/progress';
export const DONE_METHOD = 'notifications/progress/done';

export interface ProgressNotification {
  readonly jsonrpc: '2.0';
  readonly method: typeof PROGRESS_METHOD;
  readonly params: ProgressParams;
}

export interface DoneNotification {
  readonly jsonrpc: '2.0';
  readonly method: typeof DONE_METHOD;
  readonly params: DoneParams;
}

export type Notification = ProgressNotification | DoneNotification;

/** The worker's fields without `v` and `seq`; `progress` is the accepted value. */
export function progressNotification(frame: ProgressFrame, progress: number): ProgressNotification {
  const params: ProgressParams = { progressToken: frame.progressToken, progress };
  if (frame.total !== undefined) params.total = frame.total;
  if (frame.message !== undefined) params.message = frame.message;
  if (frame._meta !== undefined) params._meta = frame._meta;
  return { jsonrpc: '2.0', method: PROGRESS_METHOD, params };
}

export function doneNotification(params: DoneParams): DoneNotification {
  return { jsonrpc: '2.0', method: DONE_METHOD, params };
}

/** The same notification under another token, for a subscription made with `as`. */
export function relabel<N extends Notification>(notification: N, token: ProgressToken): N {
  return { ...notification, params: { ...notification.params, progressToken: token } };
}

/** What a subscriber is called with, once per delivered notification. */
export type NotificationHandler = (notification: Notification) => void;
