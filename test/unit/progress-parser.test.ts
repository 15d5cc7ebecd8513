/** `run --parse`: the output shapes it understands, and the ones it must leave alone. */
import { describe, expect, it } from 'vitest';
import {
  GenericReader,
  MAX_BAR_LEVELS,
  MAX_LINE_CHARS,
  OutputProgress,
  OutputScanner,
  type ParsedProgress,
  ProgressCombiner,
  parseProgressLine,
  type Reading,
} from '../../src/cli/progress-parser.js';

describe('parseProgressLine', () => {
  it('reads a tqdm bar with a total, and its description as the message', () => {
    expect(parseProgressLine(' 45%|████▌     | 45/100 [00:04<00:05,  9.87it/s]')).toEqual({
      progress: 45,
      total: 100,
    });
    expect(
      parseProgressLine('epoch 3:  45%|████▌     | 45/100 [00:04<00:05,  9.87it/s, loss=0.3]'),
    ).toEqual({
      progress: 45,
      total: 100,
      message: 'epoch 3',
    });
  });

  it('reads tqdm unit-scaled counts', () => {
    expect(
      parseProgressLine('download:  12%|█▏        | 1.2M/10.0M [00:01<00:08, 1.1MB/s]'),
    ).toEqual({
      progress: 1_200_000,
      total: 10_000_000,
      message: 'download',
    });
  });

  it('reads a tqdm counter without a total', () => {
    expect(parseProgressLine('1234it [00:02, 617.00it/s]')).toEqual({ progress: 1234 });
    expect(parseProgressLine('frames: 17 frames [01:02:03, 0.5 frames/s]')).toBeUndefined();
    expect(parseProgressLine('frames: 17frames [01:02:03, 0.5frames/s]')).toEqual({
      progress: 17,
      message: 'frames',
    });
  });

  it('reads n/total anywhere in a line, with the line as the message', () => {
    expect(parseProgressLine('Rendering frame 12/240')).toEqual({
      progress: 12,
      total: 240,
      message: 'Rendering frame 12/240',
    });
    expect(parseProgressLine('[3 / 10] compiling foo.c')).toEqual({
      progress: 3,
      total: 10,
      message: '[3 / 10] compiling foo.c',
    });
  });

  it('reads NN%', () => {
    expect(parseProgressLine('Encoding: 37.5% done')).toEqual({
      progress: 37.5,
      total: 100,
      message: 'Encoding: 37.5% done',
    });
  });

  it('takes a line at its total only after the same total was seen below it, or from a counter', () => {
    // Nothing counted up to it: "100%", "1/1" or "done 3/3" alone say nothing of work in progress.
    expect(parseProgressLine('100%')).toBeUndefined();
    expect(parseProgressLine('files 3/3')).toBeUndefined();
    const reader = new GenericReader();
    expect(reader.read('files 3/3')).toBeUndefined();
    expect(reader.read('files 1/3')?.progress.progress).toBe(1);
    expect(reader.read('files 3/3')?.progress).toEqual({
      progress: 3,
      total: 3,
      message: 'files 3/3',
    });
    // What it remembers is bounded: after 1024 other totals, 3 is forgotten.
    for (let total = 10; total < 10 + 1024; total++) reader.read(`files 1/${total}`);
    expect(reader.read('files 3/3')).toBeUndefined();
    // A build counter is a counter: ninja's one-step build.
    expect(parseProgressLine('[1/1] Linking app')).toEqual({
      progress: 1,
      total: 1,
      message: '[1/1] Linking app',
    });
  });

  it('refuses ratios after = or :, measurements, and percentages in statistics', () => {
    for (const line of [
      // The three false readings of ffmpeg's output in issue 30.
      '[libx264 @ 0x55618d13fbc0] using SAR=1/1',
      'video:95kB audio:0kB subtitle:0kB other streams:0kB global headers:0kB muxing overhead: 5.953105%',
      '[libx264 @ 0x55618d13fbc0] direct mvs  spatial:99.4% temporal:0.6%',
      // The same shapes without the library's prefix.
      'using SAR=1/1',
      'direct mvs spatial:99.4%',
      'muxing overhead: 5.95%',
      'time_base=1/30',
      'time base 1/30',
      'stream tb:1/30',
      'aspect 16/9',
      'mb I  I16..4: 45.0% 42.1% 12.9%',
      'CPU 45%',
      'memory usage: 12%',
      'accuracy 97.5%',
      'val_loss 12%',
    ]) {
      expect(parseProgressLine(line), line).toBeUndefined();
    }
  });

  it('strips terminal colour codes before reading', () => {
    expect(
      parseProgressLine('\x1b[32m 50%\x1b[0m|\x1b[34m█████     \x1b[0m| 5/10 [00:01<00:01]'),
    ).toEqual({
      progress: 5,
      total: 10,
    });
  });

  it('leaves dates, paths, times, ratios above one and plain numbers alone', () => {
    for (const line of [
      'built on 12/05/2024',
      'see src/1/2/file.c',
      'elapsed 00:01/00:10',
      'ratio 7/3',
      'value 0/0',
      'exit status 3',
      'rate 250% of baseline',
      'version 1.2.3',
      '',
    ]) {
      expect(parseProgressLine(line), line).toBeUndefined();
    }
  });
});

describe('OutputScanner', () => {
  function scanner() {
    const found: ParsedProgress[] = [];
    const reader = new GenericReader();
    return {
      found,
      scanner: new OutputScanner((line) => {
        const reading = reader.read(line);
        if (reading !== undefined) found.push(reading.progress);
      }),
    };
  }

  it('splits at carriage returns as tqdm redraws, and at newlines, across chunks', () => {
    const { found, scanner: s } = scanner();
    s.push('\r 10%|█    | 1/10 [00:00<?]\r 20%|██   | 2/1');
    s.push('0 [00:00<?]\rdone 3/10\n');
    expect(found.map((f) => f.progress)).toEqual([1, 2, 3]);
  });

  it('reads an unfinished line only when told the output went quiet, and again once it is finished', () => {
    const { found, scanner: s } = scanner();
    s.push('step 4/1');
    expect(found).toEqual([]);
    expect(s.hasPending).toBe(true);
    s.quiet();
    // Half-written, "4/1" is more than its total and so no progress: nothing yet.
    expect(found).toEqual([]);
    s.push('0\n');
    expect(found).toEqual([{ progress: 4, total: 10, message: 'step 4/10' }]);
    s.push('step 5/10');
    s.quiet();
    expect(found.at(-1)).toEqual({ progress: 5, total: 10, message: 'step 5/10' });
  });

  it('keeps at most MAX_LINE_CHARS of an unfinished line, however much output has no line break', () => {
    const { found, scanner: s } = scanner();
    for (let i = 0; i < 100; i++) {
      s.push('\0'.repeat(64 * 1024));
      expect(s.pendingLength).toBeLessThanOrEqual(MAX_LINE_CHARS);
    }
    s.push('step 7/9');
    expect(s.pendingLength).toBe(MAX_LINE_CHARS);
    s.quiet();
    expect(found.map((f) => [f.progress, f.total])).toEqual([[7, 9]]);
    s.push(`${'x'.repeat(3 * MAX_LINE_CHARS)}\n`);
    expect(s.pendingLength).toBe(0);
  });

  it('reads a long line by its end, whether it came in one chunk or many', () => {
    const line = `${'=> '.repeat(10_000)} 3/8`;
    const { found, scanner: s } = scanner();
    s.push(`${line}\nnext`);
    for (const piece of line.match(/[\s\S]{1,1000}/g) ?? []) s.push(piece);
    s.push('\r');
    expect(found.map((f) => [f.progress, f.total])).toEqual([
      [3, 8],
      [3, 8],
    ]);
  });

  it('takes chunks too large to join without throwing, and reads on afterwards', () => {
    // Joined, two of these exceed the longest string V8 can make (the old scanner threw RangeError).
    const huge = 'x'.repeat(2 ** 28);
    const { found, scanner: s } = scanner();
    expect(() => {
      s.push(huge);
      s.push(huge);
    }).not.toThrow();
    expect(s.pendingLength).toBe(MAX_LINE_CHARS);
    s.push('\rstep 2/5\n');
    expect(found).toEqual([{ progress: 2, total: 5, message: 'step 2/5' }]);
  });

  it('never throws into the caller when the callback does, and reads the lines after it', () => {
    const seen: string[] = [];
    const s = new OutputScanner((line) => {
      seen.push(line);
      throw new Error('callback failed');
    });
    expect(() => s.push('1/4\n2/4\n3/4')).not.toThrow();
    expect(() => s.quiet()).not.toThrow();
    expect(seen).toEqual(['1/4', '2/4', '3/4']);
  });
});

describe('ProgressCombiner', () => {
  const bar = (progress: number, total: number | undefined, message: string): ParsedProgress =>
    total === undefined ? { progress, message } : { progress, total, message };
  function combine(readings: Array<[ParsedProgress, boolean, string?]>) {
    const combiner = new ProgressCombiner();
    return readings
      .map(([progress, isBar, unit]) =>
        combiner.push(
          (unit === undefined
            ? { progress, bar: isBar }
            : { progress, bar: isBar, unit }) as Reading,
        ),
      )
      .filter((value) => value !== undefined);
  }

  it('counts nested bars as the outer position plus the inner fraction, every epoch', () => {
    const readings: Array<[ParsedProgress, boolean]> = [];
    for (let epoch = 0; epoch < 3; epoch++) {
      readings.push([bar(epoch, 3, 'epochs'), true]);
      for (let batch = 0; batch <= 4; batch++) readings.push([bar(batch, 4, 'batch'), true]);
    }
    readings.push([bar(3, 3, 'epochs'), true]);
    const values = combine(readings);
    expect(values.map((v) => v.progress)).toEqual([
      0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75, 3,
    ]);
    expect(values.every((v) => v.total === 3)).toBe(true);
    expect(values[1]).toEqual({ progress: 0.25, total: 3, message: 'epochs 0/3 · batch 1/4' });
    // The last batch counted up to 3 (the outer bar's own 3/3 adds nothing), and says so: never
    // "epochs 2/3" at 3 of 3.
    expect(values.at(-1)).toEqual({ progress: 3, total: 3, message: 'epochs 3/3' });
    expect(values.find((v) => v.progress === 2)?.message).toBe('epochs 2/3');
  });

  it('starts a new segment for a bar after a finished one, so the value keeps increasing', () => {
    const values = combine([
      [bar(0, 10, 'download'), true],
      [bar(10, 10, 'download'), true],
      [bar(0, 4, 'unpack'), true],
      [bar(2, 4, 'unpack'), true],
      [bar(4, 4, 'unpack'), true],
      // The same bar again from 0: a new run of it, counted on as well.
      [bar(0, 4, 'unpack'), true],
      [bar(1, 4, 'unpack'), true],
    ]);
    expect(values).toEqual([
      { progress: 0, total: 10, message: 'download' },
      { progress: 10, total: 10, message: 'download' },
      { progress: 12, total: 14, message: 'unpack' },
      { progress: 14, total: 14, message: 'unpack' },
      { progress: 15, total: 18, message: 'unpack' },
    ]);
  });

  it('never adds a bar of another unit to the one before: 2 MB, then 3 steps, is two halves (issue 29: 2000003)', () => {
    const values = combine([
      [bar(0, 2_000_000, 'download'), true, 'B'],
      [bar(1_000_000, 2_000_000, 'download'), true, 'B'],
      [bar(2_000_000, 2_000_000, 'download'), true, 'B'],
      [bar(0, 3, 'unpack'), true, 'it'],
      [bar(1, 3, 'unpack'), true, 'it'],
      [bar(3, 3, 'unpack'), true, 'it'],
      // Then a bar of the same unit as the one before counts on in its scale.
      [bar(0, 3, 'verify'), true, 'it'],
      [bar(3, 3, 'verify'), true, 'it'],
    ]);
    expect(values.map((v) => [v.progress, v.total, v.message])).toEqual([
      [0, 2_000_000, 'download'],
      [1_000_000, 2_000_000, 'download'],
      [2_000_000, 2_000_000, 'download'],
      [2_666_666.66667, 4_000_000, 'unpack 1/3'],
      [4_000_000, 4_000_000, 'unpack 3/3'],
      [6_000_000, 6_000_000, 'verify 3/3'],
    ]);
    expect(values.some((v) => v.total === 2_000_003)).toBe(false);
  });

  it('an inner bar that starts again waits for the outer one to move, never going back', () => {
    const values = combine([
      [bar(0, 2, 'outer'), true],
      [bar(3, 4, 'inner'), true],
      // The outer bar was not redrawn (tqdm's mininterval) before the next inner run.
      [bar(0, 4, 'inner'), true],
      [bar(1, 4, 'inner'), true],
      [bar(1, 2, 'outer'), true],
      [bar(2, 4, 'inner'), true],
    ]);
    expect(values.map((v) => v.progress)).toEqual([0, 0.75, 1, 1.5]);
  });

  it('follows a bar whose description changes only in its numbers', () => {
    const values = combine([
      [bar(0, 3, 'epoch 1'), true],
      [bar(1, 3, 'epoch 2'), true],
      [bar(2, 3, 'epoch 3'), true],
    ]);
    expect(values.map((v) => [v.progress, v.total, v.message])).toEqual([
      [0, 3, 'epoch 1'],
      [1, 3, 'epoch 2'],
      [2, 3, 'epoch 3'],
    ]);
  });

  it('takes a line of text as it is, only when it exceeds what was published', () => {
    const values = combine([
      [bar(10, 10, 'train'), true],
      [{ progress: 3, total: 4, message: 'frame 3/4 written' }, false],
      [{ progress: 50, total: 100, message: '50%' }, false],
    ]);
    expect(values).toEqual([
      { progress: 10, total: 10, message: 'train' },
      { progress: 50, total: 100, message: '50%' },
    ]);
  });

  /** A name without digits (a bar's key ignores its digits): a, b, ..., z, ba, bb, ... */
  const nameOf = (i: number): string =>
    [...i.toString(26)].map((d) => String.fromCharCode(97 + Number.parseInt(d, 26))).join('');

  /** Feeds LINES through the generic reader; the values published and the most bars held at once. */
  function feed(lines: Iterable<string>) {
    const reader = new GenericReader();
    const combiner = new ProgressCombiner();
    const values: ParsedProgress[] = [];
    let depth = 0;
    for (const line of lines) {
      const reading = reader.read(line);
      if (reading === undefined) continue;
      const value = combiner.push(reading);
      if (value !== undefined) values.push(value);
      depth = Math.max(depth, combiner.depth);
      // Unbounded, 20,000 lines would take minutes; stop at the first sign of it.
      if (depth > MAX_BAR_LEVELS) break;
    }
    return { values, depth };
  }

  it('holds a bounded number of bars for 20,000 count bars of as many descriptions, each counting on', () => {
    const lines = function* () {
      for (let i = 0; i < 20_000; i++) yield `file_${nameOf(i)}: 5it [00:01, 3.2it/s]`;
    };
    const { values, depth } = feed(lines());
    expect(depth).toBeLessThanOrEqual(MAX_BAR_LEVELS);
    // A bar without a total after another one follows it: nothing is nested in a count.
    expect(depth).toBe(1);
    expect(values.at(-1)).toEqual({ progress: 100_000, message: `file_${nameOf(19_999)}` });
  });

  it('holds at most MAX_BAR_LEVELS bars for 20,000 unfinished bars of as many descriptions', () => {
    const lines = function* () {
      for (let i = 0; i < 20_000; i++)
        yield `${nameOf(i)}:  50%|#####     | 5/10 [00:01<00:01, 3.2it/s]`;
    };
    const { values, depth } = feed(lines());
    expect(depth).toBe(MAX_BAR_LEVELS);
    // The outermost bar and the one inside it make the value, as they did.
    expect(values.map((v) => v.progress)).toEqual([5, 5.5]);
  });

  it('keeps count bars of new descriptions nested in an outer bar with a total, one at a time', () => {
    const { values, depth } = feed([
      'epochs:   0%|          | 0/2 [00:00<?, ?it/s]',
      'file_a: 3it [00:01, 3.2it/s]',
      'file_b: 4it [00:01, 3.2it/s]',
      'epochs:  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]',
      'file_c: 2it [00:01, 3.2it/s]',
      'epochs: 100%|##########| 2/2 [00:02<00:00, 1.0it/s]',
    ]);
    // file_b follows file_a inside the epoch: the epoch bar, and one count bar in it.
    expect(depth).toBe(2);
    // A count adds no fraction of a step: the epochs make the value.
    expect(values).toEqual([
      { progress: 0, total: 2, message: 'epochs' },
      { progress: 1, total: 2, message: 'epochs' },
      { progress: 2, total: 2, message: 'epochs' },
    ]);
  });

  it('reads real tqdm output of nested bars through the scanner', () => {
    // What tqdm 4.64 writes for a 2-epoch loop with an inner leave=False bar of 2 batches.
    const output = [
      '\repochs:   0%|          | 0/2 [00:00<?, ?it/s]\n',
      '\rbatch:   0%|          | 0/2 [00:00<?, ?it/s]\x1b[A\n',
      '\rbatch:  50%|█████     | 1/2 [00:00<00:00, 9.5it/s]\x1b[A\n',
      '\rbatch: 100%|██████████| 2/2 [00:00<00:00, 9.5it/s]\x1b[A\n',
      '\r                                                  \x1b[A',
      '\repochs:  50%|█████     | 1/2 [00:00<00:00, 4.7it/s]\n',
      '\rbatch:   0%|          | 0/2 [00:00<?, ?it/s]\x1b[A\n',
      '\rbatch:  50%|█████     | 1/2 [00:00<00:00, 9.5it/s]\x1b[A\n',
      '\rbatch: 100%|██████████| 2/2 [00:00<00:00, 9.5it/s]\x1b[A\n',
      '\r                                                  \x1b[A',
      '\repochs: 100%|██████████| 2/2 [00:00<00:00, 4.7it/s]\n',
    ].join('');
    const values: ParsedProgress[] = [];
    const output$ = new OutputProgress(new GenericReader(), (value) => values.push(value));
    output$.stream('stderr').write(output);
    expect(values.map((v) => [v.progress, v.total])).toEqual([
      [0, 2],
      [0.5, 2],
      [1, 2],
      [1.5, 2],
      [2, 2],
    ]);
  });

  it('nests a count bar drawn below a count bar (cursor up after it); one that follows a count counts on', () => {
    const read = (output: string) => {
      const values: ParsedProgress[] = [];
      new OutputProgress(new GenericReader(), (value) => values.push(value))
        .stream('stderr')
        .write(output);
      return values;
    };
    // What tqdm 4.64 writes for 2 epochs of a generator, each with an inner leave=False bar of 2 batches.
    const nested = [
      '\repoch: 0it [00:00, ?it/s]\n',
      '\rbatch: 0it [00:00, ?it/s]\x1b[A\n',
      '\rbatch: 1it [00:00, 19.9it/s]\x1b[A\n',
      '\rbatch: 2it [00:00, 19.9it/s]\x1b[A\n',
      '\r                              \x1b[A',
      '\repoch: 1it [00:00, 9.9it/s]\n',
      '\rbatch: 0it [00:00, ?it/s]\x1b[A\n',
      '\rbatch: 2it [00:00, 19.9it/s]\x1b[A\n',
      '\r                              \x1b[A',
      '\repoch: 2it [00:00, 9.9it/s]\n',
    ].join('');
    expect(read(nested)).toEqual([
      { progress: 0, message: 'epoch' },
      { progress: 1, message: 'epoch' },
      { progress: 2, message: 'epoch' },
    ]);
    // Two count bars one after the other, at the same place: the second counts on from the first.
    const following = [
      '\rfile a: 0it [00:00, ?it/s]\rfile a: 3it [00:00, 98.2it/s]\n',
      '\rfile b: 0it [00:00, ?it/s]\rfile b: 3it [00:00, 96.7it/s]\n',
    ].join('');
    expect(read(following).map((v) => v.progress)).toEqual([0, 3, 6]);
  });
});
