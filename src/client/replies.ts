/**
 * The daemon's replies on the worker socket, checked without zod (the worker
 * client must stay light): each reader returns the typed reply, or undefined
 * when the data does not match its schema in src/protocol/frames.ts
 * (ackSchema, rejectedSchema, cancelSchema). Fields a newer daemon may add
 * are ignored; the fields this client reads must have their types.
 */
import type { Ack, Cancel, ProgressToken, Rejected } from '../protocol/frames.js';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isSeq(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isToken(value: unknown): value is ProgressToken {
  return (
    (typeof value === 'string' && value.length > 0) ||
    (typeof value === 'number' && Number.isSafeInteger(value))
  );
}

export function readAck(data: unknown): Ack | undefined {
  return isRecord(data) && isSeq(data.seq) ? { seq: data.seq } : undefined;
}

export function readRejected(data: unknown): Rejected | undefined {
  if (!isRecord(data) || typeof data.code !== 'string' || typeof data.message !== 'string')
    return undefined;
  if (data.seq !== undefined && !isSeq(data.seq)) return undefined;
  if (data.progressToken !== undefined && !isToken(data.progressToken)) return undefined;
  const rejected: Rejected = { code: data.code, message: data.message };
  if (data.seq !== undefined) rejected.seq = data.seq;
  if (data.progressToken !== undefined) rejected.progressToken = data.progressToken;
  return rejected;
}

export function readCancel(data: unknown): Cancel | undefined {
  if (!isRecord(data) || !isToken(data.progressToken)) return undefined;
  if (data.reason !== undefined && typeof data.reason !== 'string') return undefined;
  return data.reason === undefined
    ? { progressToken: data.progressToken }
    : { progressToken: data.progressToken, reason: data.reason };
}
