import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkDoneFrame,
  checkProgressFrame,
  decodeEnvelope,
  doneFrameSchema,
  type Envelope,
  encodeFrame,
  explainClaimFrame,
  FrameDecoder,
  FrameError,
  isClaimFrame,
  isWellFormedText,
  MAX_MESSAGE_BYTES,
  MAX_TOKEN_BYTES,
  progressFrameSchema,
  shorten,
} from '../../src/protocol/index.js';

const ok = (data: unknown) => checkProgressFrame(data).ok;
const codeOf = (data: unknown) => {
  const check = checkProgressFrame(data);
  return check.ok ? 'ok' : check.rejection.code;
};

describe('progress frame validation', () => {
  it('refuses an integer beyond 2^53 - 1 without quoting the double it became as if it were sent', () => {
    // JSON.parse reads 9007199254740993 as 9007199254740992: the text sent is not known.
    const check = checkProgressFrame(
      JSON.parse('{"v":1,"progressToken":"a","progress":9007199254740993}'),
    );
    expect(check.ok).toBe(false);
    if (check.ok) return;
    expect(check.rejection.code).toBe('invalid_field');
    expect(check.rejection.message).toContain('beyond ±9007199254740991');
    expect(check.rejection.message).not.toContain('the number 9007199254740992');
  });

  it('accepts the minimal and the full frame', () => {
    expect(ok({ v: 1, progressToken: 'a' })).toBe(true);
    expect(
      ok({
        v: 1,
        progressToken: 7,
        progress: -1.5,
        total: 0,
        message: '',
        _meta: { a: { b: [] } },
        seq: 0,
      }),
    ).toBe(true);
  });

  it('returns the input object itself, so nothing is copied or normalised', () => {
    const data = { v: 1, progressToken: 'a', progress: 0.1 + 0.2, _meta: { k: 1 } };
    const check = checkProgressFrame(data);
    expect(check.ok && check.frame).toBe(data);
  });

  it.each([
    [{ v: 1, progressToken: 'x'.repeat(MAX_TOKEN_BYTES) }, 'ok'],
    [{ v: 1, progressToken: 'x'.repeat(MAX_TOKEN_BYTES + 1) }, 'invalid_token'],
    // 341 three-byte characters = 1023 bytes; 342 = 1026 bytes.
    [{ v: 1, progressToken: '€'.repeat(341) }, 'ok'],
    [{ v: 1, progressToken: '€'.repeat(342) }, 'invalid_token'],
    [{ v: 1, progressToken: Number.MAX_SAFE_INTEGER }, 'ok'],
    [{ v: 1, progressToken: Number.MAX_SAFE_INTEGER + 1 }, 'invalid_token'],
    [{ v: 1, progressToken: -3 }, 'ok'],
    [{ v: 1, progressToken: 0.5 }, 'invalid_token'],
    [{ v: 1, progressToken: '' }, 'invalid_token'],
    [{ v: 1, progressToken: null }, 'invalid_token'],
    [{ v: 1, progressToken: true }, 'invalid_token'],
    [{ v: 1, progressToken: ['a'] }, 'invalid_token'],
    [{ v: 1 }, 'invalid_token'],
  ])('token %j: %s', (data, expected) => {
    expect(codeOf(data)).toBe(expected);
  });

  it.each([
    [{ message: 'm'.repeat(MAX_MESSAGE_BYTES) }, 'ok'],
    [{ message: 'm'.repeat(MAX_MESSAGE_BYTES + 1) }, 'invalid_field'],
    [{ message: '€'.repeat(1365) }, 'ok'],
    [{ message: '€'.repeat(1366) }, 'invalid_field'],
    [{ message: 5 }, 'invalid_field'],
    [{ progress: Number.POSITIVE_INFINITY }, 'invalid_field'],
    [{ progress: Number.NaN }, 'invalid_field'],
    [{ progress: '1' }, 'invalid_field'],
    // Numbers are within ±(2^53 - 1), so every strict client reads them exactly.
    [{ progress: 1e308 }, 'invalid_field'],
    [{ progress: Number.MAX_SAFE_INTEGER }, 'ok'],
    [{ progress: -Number.MAX_SAFE_INTEGER }, 'ok'],
    [{ progress: 2 ** 53 }, 'invalid_field'],
    [{ total: 2 ** 53 }, 'invalid_field'],
    [{ progress: -0 }, 'ok'],
    [{ _meta: JSON.parse('{"big":12345678901234567890}') }, 'invalid_field'],
    [{ _meta: { deep: [{ n: -(2 ** 53) }] } }, 'invalid_field'],
    [{ _meta: { n: Number.MAX_SAFE_INTEGER, f: 0.1 } }, 'ok'],
    [{ _meta: { s: '\ud83d' } }, 'invalid_field'],
    [{ _meta: { '\ude00': 1 } }, 'invalid_field'],
    [{ _meta: { s: '\ud83d\ude00' } }, 'ok'],
    [{ message: 'a\ud83d' }, 'invalid_field'],
    [{ message: '😀'.repeat(1024) }, 'ok'],
    [{ message: '😀'.repeat(1025) }, 'invalid_field'],
    [{ progress: 5e-324 }, 'ok'],
    [{ total: -0.0001 }, 'invalid_field'],
    [{ total: 0 }, 'ok'],
    [{ total: Number.NEGATIVE_INFINITY }, 'invalid_field'],
    [{ _meta: [] }, 'invalid_field'],
    [{ _meta: null }, 'invalid_field'],
    [{ _meta: 'x' }, 'invalid_field'],
    [{ seq: -1 }, 'invalid_field'],
    [{ seq: 1.5 }, 'invalid_field'],
    [{ seq: Number.MAX_SAFE_INTEGER }, 'ok'],
    [{ status: 'ok' }, 'unknown_field'],
    [{ extra: 1 }, 'unknown_field'],
    [{ v: 2 }, 'unsupported_version'],
    [{ v: '1' }, 'unsupported_version'],
    [{ v: undefined }, 'unsupported_version'],
  ])('field %j: %s', (fields, expected) => {
    expect(codeOf({ v: 1, progressToken: 't', ...fields })).toBe(expected);
  });

  it('refuses __proto__ and constructor keys as unknown fields', () => {
    expect(codeOf(JSON.parse('{"v":1,"progressToken":"t","__proto__":{"polluted":true}}'))).toBe(
      'unknown_field',
    );
    expect(codeOf(JSON.parse('{"v":1,"progressToken":"t","constructor":{}}'))).toBe(
      'unknown_field',
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('explains the most fundamental problem first: version, then token, then fields', () => {
    expect(codeOf({ progressToken: '', extra: 1, progress: 'x' })).toBe('unsupported_version');
    expect(codeOf({ v: 1, progressToken: '', extra: 1 })).toBe('invalid_token');
    expect(codeOf({ v: 1, progressToken: 'a', extra: 1, progress: 'x' })).toBe('unknown_field');
  });

  it('messages name the field, what was expected and what came', () => {
    const check = checkProgressFrame({ v: 1, progressToken: 'a', total: 'ten' });
    expect(check.ok).toBe(false);
    if (!check.ok) {
      expect(check.rejection.message).toBe(
        'field total: expected a finite number >= 0 and at most 9007199254740991, got the string "ten" (3 bytes)',
      );
    }
  });

  it('the compiled fast path agrees with the zod schema on arbitrary input', () => {
    const value = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.boolean(),
      fc.double(),
      fc.integer(),
      fc.string(),
      fc.constantFrom(
        1,
        2,
        '1',
        'ok',
        'error',
        'cancelled',
        'done',
        -1,
        0,
        Number.MAX_SAFE_INTEGER + 2,
      ),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
    );
    const frame = fc.record(
      {
        v: fc.oneof(fc.constant(1), value),
        progressToken: fc.oneof(fc.string({ minLength: 1 }), fc.integer(), value),
        progress: value,
        total: value,
        message: value,
        _meta: value,
        seq: value,
        status: value,
        other: value,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(frame, (data) => {
        expect(checkProgressFrame(data).ok).toBe(progressFrameSchema.safeParse(data).success);
        expect(checkDoneFrame(data).ok).toBe(doneFrameSchema.safeParse(data).success);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('done frame validation', () => {
  it.each([
    [{}, 'ok'],
    [{ status: 'ok' }, 'ok'],
    [{ status: 'error', message: 'boom' }, 'ok'],
    [{ status: 'cancelled' }, 'ok'],
    [{ status: 'abandoned' }, 'invalid_field'],
    [{ progress: 1 }, 'unknown_field'],
  ])('%j: %s', (fields, expected) => {
    const check = checkDoneFrame({ v: 1, progressToken: 'd', ...fields });
    expect(check.ok ? 'ok' : check.rejection.code).toBe(expected);
  });
});

describe('claim frame validation', () => {
  it.each([
    [{ v: 1, progressToken: 'c' }, true],
    [{ v: 1, progressToken: 7, seq: 1 }, true],
    [{ v: 1, progressToken: 'c', progress: 1 }, false],
    [{ v: 1 }, false],
    [{ progressToken: 'c' }, false],
  ])('%j: %s', (data, ok) => {
    expect(isClaimFrame(data)).toBe(ok);
  });

  it('explains a refused claim like any frame', () => {
    expect(explainClaimFrame({ v: 1, progressToken: 'c', progress: 1 })).toMatchObject({
      code: 'unknown_field',
      message:
        'unknown field "progress" in a claim frame: protocol v1 allows only v, progressToken, seq',
    });
  });
});

/**
 * The property's oracle: the decoder as it was, which joined each read to the whole tail and
 * scanned it all again (simple, and quadratic in a frame that comes a byte at a time).
 */
class JoiningDecoder {
  readonly #maxBytes: number;
  #tail = Buffer.alloc(0);

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  get pending(): number {
    return this.#tail.length;
  }

  get partial(): boolean {
    return trimmed(this.#tail).length > 0;
  }

  push(read: Buffer): Array<Envelope | string> {
    const joined = Buffer.concat([this.#tail, read]);
    const out: Array<Envelope | string> = [];
    let start = 0;
    for (let end = joined.indexOf(0x0c); end !== -1; end = joined.indexOf(0x0c, start)) {
      const frame = trimmed(joined.subarray(start, end));
      // Twice the limit between two form feeds, whitespace included, however the reads came.
      if (end - start > 2 * this.#maxBytes) out.push('frame_too_large');
      // One whole frame, decoded alone: what is compared here is how reads are split.
      else if (frame.length > 0)
        out.push(
          ...codes(new FrameDecoder(this.#maxBytes), Buffer.concat([frame, Buffer.from('\f')])),
        );
      start = end + 1;
    }
    const rest = joined.subarray(start);
    if (rest.length > 2 * this.#maxBytes || trimmed(rest).length > this.#maxBytes) {
      this.#tail = Buffer.alloc(0);
      out.push('frame_too_large');
    } else {
      this.#tail = Buffer.from(rest);
    }
    return out;
  }
}

/** The bytes without JSON's whitespace (space, tab, LF, CR) at either end. */
function trimmed(bytes: Buffer): Buffer {
  const space = (byte: number | undefined) =>
    byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
  let start = 0;
  let end = bytes.length;
  while (start < end && space(bytes[start])) start++;
  while (end > start && space(bytes[end - 1])) end--;
  return bytes.subarray(start, end);
}

/** A push's frames, bad ones as their codes. */
function codes(decoder: FrameDecoder, chunk: string | Uint8Array): Array<Envelope | string> {
  return decoder.push(chunk).map((e) => (e instanceof FrameError ? e.code : e));
}

describe('wire format', () => {
  it('encodes an envelope followed by one form feed', () => {
    expect(encodeFrame('progress', { v: 1, progressToken: 'a' })).toBe(
      '{"type":"progress","data":{"v":1,"progressToken":"a"}}\f',
    );
  });

  it('decodes frames split anywhere across reads', () => {
    const text = encodeFrame('ack', { seq: 1 }) + encodeFrame('cancel', { progressToken: 7 });
    for (let cut = 0; cut <= text.length; cut++) {
      const decoder = new FrameDecoder(1024);
      const out = [...decoder.push(text.slice(0, cut)), ...decoder.push(text.slice(cut))];
      expect(out).toEqual([
        { type: 'ack', data: { seq: 1 } },
        { type: 'cancel', data: { progressToken: 7 } },
      ]);
      expect(decoder.pending).toBe(0);
    }
  });

  it('splits reads as joining each read to the whole tail and scanning it again would (property)', () => {
    // Frames, bad frames, whitespace and floods of it, and unfinished tails, at a 24-byte limit.
    const piece = fc.constantFrom(
      encodeFrame('ack', { seq: 1 }),
      '{"type":"x"}\f',
      'nope\f',
      ' \r\n\t',
      ' '.repeat(30),
      '\f',
      '{"type":"€€"}',
      'x'.repeat(30),
      '{"type":"abcdefghijklmnopq"}\f',
    );
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 20 }),
        (pieces, sizes) => {
          const bytes = Buffer.from(pieces.join(''), 'utf8');
          const decoder = new FrameDecoder(24);
          const oracle = new JoiningDecoder(24);
          for (let at = 0, i = 0; at < bytes.length; i++) {
            const read = bytes.subarray(at, at + (sizes[i % sizes.length] as number));
            expect(codes(decoder, read)).toEqual(oracle.push(read));
            expect(decoder.pending).toBe(oracle.pending);
            expect(decoder.partial).toBe(oracle.partial);
            at += read.length;
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('counts the frame limit in UTF-8 bytes, for complete frames and the unread tail', () => {
    // 6 euro signs are 6 UTF-16 units but 18 bytes.
    const decoder = new FrameDecoder(16);
    const [tooLarge] = decoder.push(`"${'€'.repeat(6)}"\f`);
    expect(tooLarge).toBeInstanceOf(FrameError);
    expect((tooLarge as FrameError).code).toBe('frame_too_large');
    expect((decoder.push('€'.repeat(6))[0] as FrameError).code).toBe('frame_too_large');
    expect(decoder.pending).toBe(0);
    // Exactly at the limit is a frame.
    expect(new FrameDecoder(16).push('{"type":"€"}  \f')).toEqual([{ type: '€', data: undefined }]);
  });

  it('does not count the whitespace around a frame toward its limit, and bounds it', () => {
    // 16 bytes of frame: at the limit with a newline before and CR LF after, in one push or split.
    const exact = '{"type":"abcde"}';
    expect(Buffer.byteLength(exact)).toBe(16);
    for (const text of [`\n${exact}\r\n\f`, ` \t${exact}\f`, `${exact}\n\n\f`]) {
      expect(new FrameDecoder(16).push(text)).toEqual([{ type: 'abcde', data: undefined }]);
      const split = new FrameDecoder(16);
      const out = [...split.push(text.slice(0, -1)), ...split.push('\f')];
      expect(out).toEqual([{ type: 'abcde', data: undefined }]);
    }
    // One byte of frame more is too large, whitespace or not.
    const over = new FrameDecoder(16).push(`\n{"type":"abcdef"}\r\n\f`);
    expect((over[0] as FrameError).code).toBe('frame_too_large');
    // Whitespace waiting for a form feed is held up to twice the limit, no more.
    const flood = new FrameDecoder(16);
    expect(flood.push(' '.repeat(32))).toEqual([]);
    expect((flood.push(' ')[0] as FrameError).code).toBe('frame_too_large');
    expect(flood.pending).toBe(0);
  });

  it('bounds the bytes between two form feeds, whitespace included, however the reads split them', () => {
    const frame = '{"type":"abcde"}'; // 16 bytes: at the limit.
    for (const spaces of [16, 17, 40]) {
      const text = `${frame}${' '.repeat(spaces)}\f`;
      const splits = [
        [text],
        [text.slice(0, 16), text.slice(16)],
        [text.slice(0, -1), '\f'],
        [text.slice(0, 16), text.slice(16, -1), '\f'],
      ];
      for (const reads of splits) {
        const decoder = new FrameDecoder(16);
        const out = reads.flatMap((read) => decoder.push(read));
        if (spaces === 16) {
          // 32 bytes before the form feed: twice the limit, accepted.
          expect(out).toEqual([{ type: 'abcde', data: undefined }]);
          continue;
        }
        expect(out.length, `${spaces} spaces in ${reads.length} reads`).toBe(1);
        const refusal = out[0] as FrameError;
        expect(refusal.code).toBe('frame_too_large');
        // The frame itself fits: the advice is about the whitespace, not message or _meta.
        expect(refusal.message).toContain('whitespace');
        expect(refusal.message).not.toContain('shorten message');
      }
    }
    // Whitespace alone, past twice the limit before its form feed, is refused too, in one read or many.
    expect(codes(new FrameDecoder(16), `${' '.repeat(33)}\f`)).toEqual(['frame_too_large']);
    // A frame over the limit keeps its own advice.
    const over = new FrameDecoder(16).push(`{"type":"abcdef"}${' '.repeat(40)}\f`);
    expect((over[0] as FrameError).message).toContain('shorten message or _meta');
  });

  it('skips whitespace between frames, and says whether a frame has started', () => {
    const decoder = new FrameDecoder(1024);
    expect(decoder.push(`${encodeFrame('ack', { seq: 1 })}\r\n`)).toEqual([
      { type: 'ack', data: { seq: 1 } },
    ]);
    expect(decoder.partial).toBe(false);
    expect(decoder.push('\f \f{"ty')).toEqual([]);
    expect(decoder.partial).toBe(true);
    expect(decoder.push('pe":"x"}\f')).toEqual([{ type: 'x', data: undefined }]);
  });

  it('gives each bad frame a framing code', () => {
    const out = new FrameDecoder(1024).push('nope\f[]\f{"data":1}\f');
    expect(out.map((e) => (e instanceof FrameError ? e.code : e))).toEqual([
      'invalid_json',
      'invalid_envelope',
      'invalid_envelope',
    ]);
  });

  it('reports bad frames instead of throwing', () => {
    const decoder = new FrameDecoder(16);
    const out = decoder.push('nope\fnull\f{"data":1}\f');
    expect(out.map((e) => (e instanceof FrameError ? e.code : e))).toEqual([
      'invalid_json',
      'invalid_envelope',
      'invalid_envelope',
    ]);
    const tooLong = decoder.push('x'.repeat(17))[0];
    expect(tooLong instanceof FrameError && tooLong.code).toBe('frame_too_large');
  });

  it('counts bytes, not UTF-16 units, for the frame limit', () => {
    // {"type":"é"} is 13 bytes as UTF-8 and 12 UTF-16 units.
    expect(codes(new FrameDecoder(13), '{"type":"é"}\f')).toEqual([{ type: 'é', data: undefined }]);
    expect(codes(new FrameDecoder(12), '{"type":"é"}\f')).toEqual(['frame_too_large']);
    expect(codes(new FrameDecoder(12), Buffer.from('{"type":"é"}\f'))).toEqual(['frame_too_large']);
    // A complete frame over the limit, not only an unfinished one.
    expect(codes(new FrameDecoder(8), '{"type":"ping"}\f{"type":"a"}\f')).toEqual([
      'frame_too_large',
      'frame_too_large',
    ]);
  });

  it('refuses invalid UTF-8, a BOM, long and reserved types; skips whitespace-only frames', () => {
    const decoder = new FrameDecoder(1024);
    const bad = Buffer.concat([
      Buffer.from('{"type":"progress","data":{"v":1,"progressToken":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}\f'),
    ]);
    expect(codes(decoder, bad)).toEqual(['invalid_utf8']);
    // An encoded surrogate half (CESU-8) is not UTF-8 either.
    expect(codes(decoder, Buffer.from([0x22, 0xed, 0xa0, 0xbd, 0x22, 0x0c]))).toEqual([
      'invalid_utf8',
    ]);
    expect(
      codes(decoder, Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"type":"ping"}\f')])),
    ).toEqual(['invalid_json']);
    // An empty frame, or one of JSON whitespace only (a newline after a form feed), is skipped.
    expect(codes(decoder, '\f \n\r\t\f\n')).toEqual([]);
    expect(decoder.partial).toBe(false);
    expect(codes(decoder, Buffer.from('\f\n\f'))).toEqual([]);
    expect(codes(decoder, '\n{"ty')).toEqual([]);
    expect(decoder.partial).toBe(true);
    expect(codes(decoder, 'pe":"ping"}\f')).toEqual([{ type: 'ping', data: undefined }]);
    expect(decoder.partial).toBe(false);
    expect(codes(decoder, `{"type":"${'a'.repeat(256)}"}\f`)).toEqual([
      { type: 'a'.repeat(256), data: undefined },
    ]);
    expect(codes(decoder, `{"type":"${'a'.repeat(257)}"}\f`)).toEqual(['invalid_envelope']);
    // 64 emoji are 128 UTF-16 units and 256 bytes; 65 are 260 bytes.
    expect(codes(decoder, `{"type":"${'😀'.repeat(64)}"}\f`)).toHaveLength(1);
    expect(codes(decoder, `{"type":"${'😀'.repeat(65)}"}\f`)).toEqual(['invalid_envelope']);
    expect(codes(decoder, '{"type":"error"}\f{"type":"__proto__"}\f{"type":""}\f')).toEqual([
      'reserved_event',
      'invalid_envelope',
      'invalid_envelope',
    ]);
  });

  it('takes exactly the bytes a strict UTF-8 decoder takes, a real U+FFFD included (property)', () => {
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    // Random bytes, text, and the cases a lenient decoder gets wrong: U+FFFD itself, an encoded
    // surrogate, overlong forms, a code point past U+10FFFF, a cut sequence, a stray byte, a BOM.
    const part = fc.oneof(
      fc.uint8Array({ maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 8 }).map((text) => Buffer.from(text)),
      fc.constantFrom(
        [0xef, 0xbf, 0xbd],
        [0xed, 0xa0, 0x80],
        [0xed, 0xbf, 0xbf],
        [0xc0, 0x80],
        [0xe0, 0x80, 0x80],
        [0xf4, 0x90, 0x80, 0x80],
        [0xe2, 0x82],
        [0xff],
        [0xef, 0xbb, 0xbf],
      ),
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 4 }), (parts) => {
        const inner = Buffer.concat(parts.map((bytes) => Buffer.from(bytes))).filter(
          (byte) => byte !== 0x0c,
        );
        const frame = Buffer.concat([
          Buffer.from('{"type":"progress","data":"'),
          inner,
          Buffer.from('"}'),
        ]);
        // Only the strict decoding may throw: anything decodeEnvelope threw would fail the test.
        let expected: unknown = 'invalid_utf8';
        let text: string | undefined;
        try {
          text = strict.decode(frame);
        } catch {}
        if (text !== undefined) {
          const envelope = decodeEnvelope(text);
          expected = envelope instanceof FrameError ? envelope.code : envelope;
        }
        const got = codes(new FrameDecoder(1024), Buffer.concat([frame, Buffer.from([0x0c])]));
        expect(got).toEqual([expected]);
      }),
      { numRuns: 2000 },
    );
  });

  it('a split multi-byte character is decoded once its bytes arrive', () => {
    const bytes = Buffer.from('{"type":"ping","data":{"m":"😀"}}\f');
    for (let cut = 0; cut <= bytes.length; cut++) {
      const decoder = new FrameDecoder(1024);
      const out = [...decoder.push(bytes.subarray(0, cut)), ...decoder.push(bytes.subarray(cut))];
      expect(out).toEqual([{ type: 'ping', data: { m: '😀' } }]);
    }
  });
});

describe('shorten', () => {
  it('never ends in half a surrogate pair', () => {
    expect(shorten('ab😀', 3)).toBe('ab');
    expect(shorten('ab😀', 4)).toBe('ab😀');
    expect(shorten('abc', 2)).toBe('ab');
    for (let n = 1; n < 20; n++) expect(isWellFormedText(shorten('😀'.repeat(10), n))).toBe(true);
  });
});
