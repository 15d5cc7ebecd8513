/**
 * What the daemon's answers mean to the worker client: the done frame and the verdict on its
 * answer (delivered, send again, or why not), and which refusals condemn a frame for good.
 * Pure: the publisher (publisher.ts) waits for the answers and acts on these verdicts.
 */
import { CLOSING_REJECT_CODES, type RejectCode } from '../protocol/errors.js';
import type { DoneStatus, ProgressToken, Rejected } from '../protocol/frames.js';
import { MAX_FRAME_BYTES, PROTOCOL_VERSION } from '../protocol/limits.js';
import { answeredCode, type BridgeErrorCode } from '../shared/errors.js';

/** Why done was not delivered: a code and a message that says what to do. */
export interface DoneFailure {
  readonly code: BridgeErrorCode;
  readonly message: string;
}

export interface DoneContext {
  readonly token: ProgressToken;
  readonly timeoutMs: number;
  readonly socketPath: string;
}

/** The data of a done frame. */
export function doneData(
  token: ProgressToken,
  status: DoneStatus,
  message: string | undefined,
  seq: number,
): Record<string, unknown> {
  const data: Record<string, unknown> = { v: PROTOCOL_VERSION, progressToken: token, status, seq };
  if (message !== undefined) data.message = message;
  return data;
}

export function frameTooLarge(token: ProgressToken): [BridgeErrorCode, string] {
  return [
    'frame_too_large',
    `done for token ${JSON.stringify(token)} was not sent: its frame is larger than ${MAX_FRAME_BYTES} bytes`,
  ];
}

/** Why done could not even be sent: closed, or no daemon within the time it had. */
export function notConnectedFailure(
  done: DoneContext,
  closed: boolean,
  everConnected: boolean,
): DoneFailure {
  if (closed)
    return { code: 'closed', message: 'the publisher was closed before done was delivered' };
  return {
    code: 'daemon_unreachable',
    message: everConnected
      ? `done for token ${JSON.stringify(done.token)} was not delivered: the daemon on ${done.socketPath} went away and none answered within ${done.timeoutMs} ms`
      : `done for token ${JSON.stringify(done.token)} was not delivered: no daemon has answered on ${done.socketPath} since the publisher started`,
  };
}

/**
 * What the daemon's answer to a done frame means: delivered; send it again on
 * the next connection (this one dropped before the answer); or a failure,
 * `pending` when done was written but not answered in time.
 */
export function judgeDoneAnswer(
  answer: DoneAnswer,
  done: DoneContext,
  state: { retried: boolean; closed: boolean },
): 'retry' | { delivered: true } | { delivered: false; failure: DoneFailure; pending: boolean } {
  if (answer === 'closed' && !state.closed) return 'retry';
  if (answer === 'closed') {
    return {
      delivered: false,
      pending: false,
      failure: { code: 'closed', message: 'the publisher was closed before done was acknowledged' },
    };
  }
  if (answer === 'timeout') {
    return {
      delivered: false,
      pending: true,
      failure: {
        code: 'daemon_timeout',
        message: `the daemon did not acknowledge done for token ${JSON.stringify(done.token)} within ${done.timeoutMs} ms; it was written, so a daemon that is only stopped or overloaded still delivers it when it resumes`,
      },
    };
  }
  if (answer.type === 'ack') return { delivered: true };
  // A done resent after a dropped connection may find the stream it already ended.
  if (state.retried && answer.rejection.code === 'stream_closed') return { delivered: true };
  return {
    delivered: false,
    pending: false,
    failure: {
      code: answeredCode(answer.rejection.code),
      message: `the daemon refused done for token ${JSON.stringify(done.token)}: ${answer.rejection.message}`,
    },
  };
}

/** The daemon's answer to a done frame, as #finish waits for it. */
export type DoneAnswer =
  | { readonly type: 'ack' }
  | { readonly type: 'rejected'; readonly rejection: Rejected }
  | 'closed'
  | 'timeout';

/**
 * Framing errors that refuse what a frame holds: sent again it would be
 * refused again, so it is not. (A full daemon and a stalled partial frame
 * also close the connection, but say nothing against the frame.)
 */
export const REFUSED_FRAME_CODES: ReadonlySet<string> = new Set<RejectCode>(
  [...CLOSING_REJECT_CODES].filter(
    (code) => code !== 'too_many_connections' && code !== 'frame_timeout',
  ),
);
