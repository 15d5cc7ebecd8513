/** The worker client's reply readers and its verdict on a done's answer, without a daemon. */
import { describe, expect, it } from 'vitest';
import { doneData, judgeDoneAnswer, notConnectedFailure } from '../../src/client/done-answers.js';
import { readAck, readCancel, readRejected } from '../../src/client/replies.js';
import { ackSchema, cancelSchema, rejectedSchema } from '../../src/protocol/frames.js';

const samples: unknown[] = [
  undefined,
  null,
  7,
  'ack',
  [],
  {},
  { seq: 3 },
  { seq: -1 },
  { seq: 1.5 },
  { seq: '3' },
  { code: 'non_monotonic', message: 'no' },
  { code: 'non_monotonic', message: 'no', seq: 2, progressToken: 'a' },
  { code: 'x', message: 7 },
  { code: 'x', message: 'm', progressToken: '' },
  { code: 'x', message: 'm', seq: 'one' },
  { progressToken: 'job' },
  { progressToken: 7, reason: 'stop' },
  { progressToken: 7.5 },
  { progressToken: 'job', reason: 3 },
];

describe('worker client reply readers', () => {
  // Fields a newer daemon may add are ignored, so the schemas are compared without their strictness.
  it('accept exactly what the protocol schemas accept, extra fields aside', () => {
    for (const data of samples) {
      expect(readAck(data) !== undefined, `ack ${JSON.stringify(data)}`).toBe(
        ackSchema.loose().safeParse(data).success,
      );
      expect(readRejected(data) !== undefined, `rejected ${JSON.stringify(data)}`).toBe(
        rejectedSchema.loose().safeParse(data).success,
      );
      expect(readCancel(data) !== undefined, `cancel ${JSON.stringify(data)}`).toBe(
        cancelSchema.loose().safeParse(data).success,
      );
    }
  });

  it('return the fields typed', () => {
    expect(readAck({ seq: 4 })).toEqual({ seq: 4 });
    expect(readRejected({ code: 'c', message: 'm', seq: 1 })).toEqual({
      code: 'c',
      message: 'm',
      seq: 1,
    });
    expect(readCancel({ progressToken: 1, reason: 'r' })).toEqual({
      progressToken: 1,
      reason: 'r',
    });
  });
});

describe('the verdict on a done answer', () => {
  const done = { token: 'job', timeoutMs: 300, socketPath: '/tmp/x.sock' };
  const free = { retried: false, closed: false };
  it('ack is delivered; a dropped connection retries; a timeout is pending', () => {
    expect(judgeDoneAnswer({ type: 'ack' }, done, free)).toEqual({ delivered: true });
    expect(judgeDoneAnswer('closed', done, free)).toBe('retry');
    expect(judgeDoneAnswer('closed', done, { retried: false, closed: true })).toMatchObject({
      delivered: false,
      pending: false,
      failure: { code: 'closed' },
    });
    expect(judgeDoneAnswer('timeout', done, free)).toMatchObject({
      delivered: false,
      pending: true,
      failure: { code: 'daemon_timeout' },
    });
  });

  it('stream_closed after a resend means the first one was delivered; otherwise the daemon’s code', () => {
    const closedStream = {
      type: 'rejected' as const,
      rejection: { code: 'stream_closed', message: 'already done' },
    };
    expect(judgeDoneAnswer(closedStream, done, { retried: true, closed: false })).toEqual({
      delivered: true,
    });
    expect(judgeDoneAnswer(closedStream, done, free)).toMatchObject({
      delivered: false,
      failure: { code: 'stream_closed', message: expect.stringContaining('already done') },
    });
    expect(
      judgeDoneAnswer(
        { type: 'rejected', rejection: { code: 'brand_new', message: 'm' } },
        done,
        free,
      ),
    ).toMatchObject({ failure: { code: 'bad_reply' } });
  });

  it('names why done could not be sent', () => {
    expect(notConnectedFailure(done, true, true).code).toBe('closed');
    expect(notConnectedFailure(done, false, true).message).toContain('went away');
    expect(notConnectedFailure(done, false, false).message).toContain('no daemon has answered');
    expect(doneData('job', 'ok', undefined, 3)).toEqual({
      v: 1,
      progressToken: 'job',
      status: 'ok',
      seq: 3,
    });
  });
});
