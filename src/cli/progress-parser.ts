/**
 * Reads progress out of a program's output for `run --parse`. The generic
 * reader here takes tqdm bars and their look-alikes (rich, Keras), build
 * counters (`[n/total]`), `n/total` and `NN%` in a line of text, and leaves
 * alone what only looks like progress (ratios after `=` or `:`, dates,
 * percentages in statistics, a first value that is already 100%). The tools'
 * own profiles are in progress-profiles.ts. Pure: text in, values out; no
 * I/O, no clock.
 */
import { StringDecoder } from 'node:string_decoder';

export interface ParsedProgress {
  readonly progress: number;
  readonly total?: number;
  readonly message?: string;
}

/** What a reader found in one line of output. */
export interface Reading {
  readonly progress: ParsedProgress;
  /**
   * A bar redrawn in place (tqdm, rich, Keras, a download), known by its
   * message and total: nested and sequential bars combine (ProgressCombiner).
   * Anything else is a line of text, taken when it exceeds the last value.
   */
  readonly bar: boolean;
  /** What a bar counts ("it", "B", "%"): a bar after a finished one counts on from it only in the same unit. */
  readonly unit?: string;
  /** What tells the bar from others when its message changes with its numbers (a file's name); default: the message. */
  readonly key?: string;
}

/** Where a line came from: CMD's stdout or stderr, or the progress pipe run added (fd 3). */
export type OutputSource = 'stdout' | 'stderr' | 'progress';

/** Reads lines of one command's output, in order; may remember what earlier lines said. */
export interface LineReader {
  read(line: string, source: OutputSource): Reading | undefined;
}

/** How many totals the generic reader remembers having seen a line below (its evidence for 100%). */
const MAX_COUNTING_TOTALS = 1024;

/**
 * The most bars the combiner holds nested at once; a new bar deeper than that takes the innermost
 * one's place. Only the outer two make the value, and tqdm's nesting is rarely deeper than three,
 * but output of many unfinished bars must not cost work per line in their number.
 */
export const MAX_BAR_LEVELS = 8;

/** Longest message taken from a line of output. */
const MAX_MESSAGE_CHARS = 200;

/**
 * Cursor up (CSI n A) in a line: it was drawn below another line and the cursor went back up to
 * it, as tqdm draws a bar at position 1 or more (nested bars) and returns to the outer one.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const CURSOR_UP = /\x1b\[\d*A/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const ANSI = /\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
const NUMBER = String.raw`(\d+(?:\.\d+)?)([kMGTPEZY]?)`;
const TQDM_TOTAL = new RegExp(
  String.raw`^(.*?)(\d{1,3}(?:\.\d+)?)%\|.*?\|\s*${NUMBER}\/${NUMBER}(?:\s*\[([^\]]*)\]?)?`,
);
const TQDM_COUNT = new RegExp(
  String.raw`^(?:(.*?):\s*)?${NUMBER}([a-zA-Z/]*) \[\d+:\d\d(?::\d\d)?[,\]]`,
);
/** rich's bar (━ with ╸ or ╺ at the edge), then `n/total UNIT` (pip) or `NN%` (rich's default columns). */
const RICH =
  /^(.*?)\s*[━╸╺]+\s+(?:(\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)\s*([kMGT]?i?B|it)?\b|(\d{1,3}(?:\.\d+)?)%)/;
/** Keras: `12/100 [==>....] - ETA: 3s` (Keras 2) or `12/100 ━━━━━━━ 3s 20ms/step` (Keras 3). */
const KERAS = /^\s*(\d+)\/(\d+)\s+(?:\[[=>.]*\]|[━]+)/;
const KERAS_EPOCH = /^Epoch (\d+)\/(\d+)\s*$/;
/** `[12/240]` at the start of a line: a build tool's step counter (ninja, cmake, meson, ...). */
const COUNTER = /^\s*\[\s*(\d+)\s*\/\s*(\d+)\s*\]/;
const FRACTION = /(?<![\w./:=-])(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)(?![\w./:])/;
const PERCENT = /(?<![\w.:=])(\d{1,3}(?:\.\d{1,2})?)\s?%/;
const PERCENTS = /\d\s?%/g;
/** A library's log line, `[libx264 @ 0x55618d13fbc0] ...`: statistics and settings, never progress. */
const LIBRARY_LOG = /^\s*\[[\w. -]+ @ (?:0x)?[0-9a-f]+\]/;
/** Words before a number that make it a measurement, not progress ("CPU 45%", "time base 1/30"). */
const MEASUREMENT =
  /(?<![a-z])(?:acc(?:uracy)?|loss|overhead|cpu|gpu|mem(?:ory)?|usage|util(?:i[sz]ation)?|ratio|efficiency|hits?|miss(?:es)?|cache|load|error|compression|aspect|sar|dar|time ?base|tbn?|fps|rate|battery|disk|swap)\b[\s:=]*$/i;

const SI: Record<string, number> = {
  '': 1,
  k: 1e3,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Z: 1e21,
  Y: 1e24,
};

export function scaled(digits: string | undefined, suffix: string | undefined): number {
  return Number(digits) * (SI[suffix ?? ''] ?? 1);
}

/** A line without its terminal colour and cursor codes. */
export function plainText(line: string): string {
  return line.replace(ANSI, '');
}

export function messageOf(text: string): string | undefined {
  const trimmed = text.trim().replace(/\s+/g, ' ');
  if (trimmed === '') return undefined;
  return trimmed.length > MAX_MESSAGE_CHARS
    ? `${trimmed.slice(0, MAX_MESSAGE_CHARS - 1)}…`
    : trimmed;
}

export function withMessage(
  progress: number,
  total: number | undefined,
  message: string | undefined,
): ParsedProgress {
  const parsed: { progress: number; total?: number; message?: string } = { progress };
  if (total !== undefined) parsed.total = total;
  if (message !== undefined) parsed.message = message;
  return parsed;
}

function bar(progress: ParsedProgress, unit: string | undefined): Reading {
  return unit === undefined ? { progress, bar: true } : { progress, bar: true, unit };
}

/** The unit of a tqdm rate ("9.87it/s", "1.1MB/s", "2.5s/it", "?it/s"), without its SI prefix. */
function tqdmUnit(stats: string | undefined): string {
  const rate = /(?:[\d.]+|\?)\s?([kMGTPEZY]?)([A-Za-z]+)\/s\b/.exec(stats ?? '');
  if (rate !== null) return rate[1] !== '' && rate[2] === 'B' ? 'B' : `${rate[1]}${rate[2]}`;
  const slow = /[\d.]+\s?s\/([A-Za-z]+)/.exec(stats ?? '');
  return slow?.[1] ?? 'it';
}

/**
 * A progress bar in the line: tqdm (`NN%|...| n/total [..]`, `n it [..]`),
 * rich (`━━━━ n/total MB`, `━━━━ NN%`), Keras (`n/total [===>...]`,
 * `Epoch n/total`). The line is plain text (no ANSI codes).
 */
export function readBar(line: string): Reading | undefined {
  const tqdm = TQDM_TOTAL.exec(line);
  if (tqdm !== null) {
    const [, desc, , n, nSuffix, total, totalSuffix, stats] = tqdm;
    const progress = withMessage(
      scaled(n, nSuffix),
      scaled(total, totalSuffix),
      messageOf((desc ?? '').replace(/:\s*$/, '')),
    );
    return bar(progress, tqdmUnit(stats));
  }
  const count = TQDM_COUNT.exec(line);
  if (count !== null) {
    const [, desc, n, suffix, unit] = count;
    return bar(withMessage(scaled(n, suffix), undefined, messageOf(desc ?? '')), unit || 'it');
  }
  const rich = RICH.exec(line);
  if (rich !== null) {
    const [, desc, n, total, unit, percent] = rich;
    const message = messageOf(desc ?? '');
    if (percent !== undefined) return bar(withMessage(Number(percent), 100, message), '%');
    const bytes = unit?.endsWith('B') === true;
    const factor = bytes ? (SI[(unit ?? '').slice(0, 1)] ?? 1) : 1;
    return bar(
      withMessage(Number(n) * factor, Number(total) * factor, message),
      bytes ? 'B' : (unit ?? 'it'),
    );
  }
  const keras = KERAS.exec(line);
  if (keras !== null) return bar(withMessage(Number(keras[1]), Number(keras[2]), 'step'), 'step');
  const epoch = KERAS_EPOCH.exec(line);
  // "Epoch 2/3" starts the second epoch: one of three is done.
  if (epoch !== null)
    return bar(withMessage(Number(epoch[1]) - 1, Number(epoch[2]), 'epoch'), 'epoch');
  return undefined;
}

/**
 * The generic reader of `run --parse`: bars (readBar), build counters, and
 * `n/total` or `NN%` in a line of text, unless the number is a measurement:
 * after `=` or `:` or inside a word (`SAR=1/1`, `spatial:99.4%`), a date, a
 * percentage with more than two decimals or beside another one (statistics),
 * after a word such as CPU, memory, overhead, loss, accuracy, ratio, fps or
 * time base, or in a library's log line (`[libx264 @ 0x...]`). A line of text
 * that would be at its total at once (`1/1`, `100%`) is taken only after the
 * same total was seen below it: without a bar or a counter, nothing says that
 * work was counted.
 */
export class GenericReader implements LineReader {
  /** Totals a line of text was seen below. */
  readonly #counting = new Set<number>();

  read(line: string): Reading | undefined {
    const found = readBar(line);
    if (found !== undefined) return found;
    if (LIBRARY_LOG.test(line)) return undefined;
    const counter = COUNTER.exec(line);
    if (counter !== null) {
      const n = Number(counter[1]);
      const total = Number(counter[2]);
      if (total > 0 && n <= total) return this.#text(n, total, line, true);
    }
    const fraction = FRACTION.exec(line);
    if (fraction !== null && !MEASUREMENT.test(line.slice(0, fraction.index))) {
      const n = Number(fraction[1]);
      const total = Number(fraction[2]);
      if (total > 0 && n <= total) return this.#text(n, total, line, false);
    }
    const percent = PERCENT.exec(line);
    if (
      percent !== null &&
      (line.match(PERCENTS)?.length ?? 0) === 1 &&
      !MEASUREMENT.test(line.slice(0, percent.index))
    ) {
      const value = Number(percent[1]);
      if (value <= 100) return this.#text(value, 100, line, false);
    }
    return undefined;
  }

  #text(n: number, total: number, line: string, counter: boolean): Reading | undefined {
    if (n < total) {
      this.#counting.add(total);
      // Bounded whatever the output: the oldest total is forgotten first.
      if (this.#counting.size > MAX_COUNTING_TOTALS)
        this.#counting.delete(this.#counting.values().next().value as number);
    } else if (!counter && !this.#counting.has(total)) return undefined;
    return { progress: withMessage(n, total, messageOf(line)), bar: false };
  }
}

/** What one line shows to a new generic reader (no earlier lines). */
export function parseProgressLine(raw: string): ParsedProgress | undefined {
  return new GenericReader().read(plainText(raw))?.progress;
}

/** The most of a line that is kept and read: its last this many characters. */
export const MAX_LINE_CHARS = 4096;

const LINE_BREAK = /\r\n|\r|\n/g;

/** The last `max` characters of `text`; a line longer than that is read by its end, where a bar's counts are. */
function tail(text: string, max: number): string {
  return text.length > max ? text.slice(text.length - max) : text;
}

/**
 * Splits output into lines at \n and \r (tqdm redraws with \r) and hands on
 * each complete one. The unfinished last line is handed on
 * only when the caller says the output has gone quiet, so that a bar is
 * never read half-written.
 *
 * Work and memory are linear in the output and bounded per line: only new
 * text is searched for line breaks, and of any line (the unfinished one
 * included) only the last MAX_LINE_CHARS characters are kept and read. No
 * method throws, whatever the output or the callback does: it runs inside a
 * stream's data handler, and the command must go on.
 */
export class OutputScanner {
  #pending = '';
  readonly #line: (line: string) => void;

  /** `line` is told each line (the unfinished one when the output goes quiet). */
  constructor(line: (line: string) => void) {
    this.#line = line;
  }

  push(text: string): void {
    try {
      this.#push(text);
    } catch {
      // Whatever went wrong, the output still passes through; the line is forgotten.
      this.#pending = '';
    }
  }

  /**
   * The output paused: hand on the unfinished line as it stands. It is kept,
   * so that if it goes on, the finished line is read again (a repeated value
   * is not an increase, and the combiner skips it).
   */
  quiet(): void {
    this.#scan(this.#pending);
  }

  get hasPending(): boolean {
    return this.#pending !== '';
  }

  /** How many characters of the unfinished line are kept (at most MAX_LINE_CHARS). */
  get pendingLength(): number {
    return this.#pending.length;
  }

  #push(text: string): void {
    let start = 0;
    let first = true;
    // matchAll works on its own copy of the pattern, so a callback that pushes again cannot disturb it.
    for (const match of text.matchAll(LINE_BREAK)) {
      const piece = text.slice(Math.max(start, match.index - MAX_LINE_CHARS), match.index);
      const line = first ? tail(this.#pending + piece, MAX_LINE_CHARS) : piece;
      if (first) this.#pending = '';
      first = false;
      start = match.index + match[0].length;
      this.#scan(line);
    }
    const rest = text.slice(Math.max(start, text.length - MAX_LINE_CHARS));
    this.#pending = first ? tail(this.#pending + rest, MAX_LINE_CHARS) : rest;
  }

  #scan(line: string): void {
    if (line === '') return;
    try {
      this.#line(line);
    } catch {
      // A line that cannot be read, or a callback that fails, costs that line only.
    }
  }
}

interface Bar {
  readonly key: string;
  n: number;
  readonly total: number | undefined;
  readonly message: string | undefined;
}

/**
 * Makes one monotonic progress out of the readings of several bars, the way
 * the Python tqdm adapter does: the outermost bar counts, the one inside it
 * adds a fraction of a step (epoch 1 of 3 with batch 10 of 20 is 1.5 of 3).
 * A bar that appears while the innermost one is unfinished is nested in it
 * (MAX_BAR_LEVELS deep at most), and so is a count (no total) drawn below a
 * count (tqdm's nested bars; the outer count alone is then the value); one
 * that appears after it finished, or another count after a count, takes its
 * place (a count bar per file), and at the outermost
 * level starts a new segment that counts on from the last value, so that
 * bars that follow each other keep counting up. A segment counts in its
 * bar's own numbers when it has the unit of the one before (3 epochs, then 5
 * evaluation steps: 8); a bar of another unit (3 steps after 2 MB) is never
 * added to it: it weighs as much as the segment before, so the total is two
 * halves, not 2,000,003, and its message says its own count. Only values
 * that exceed the last one are returned: an outer bar catching up with what
 * its inner bar already reported is skipped, never published backwards.
 * Pure: no I/O.
 */
export class ProgressCombiner {
  /** Open bars, outermost first. */
  readonly #bars: Bar[] = [];
  /** Bars closed at their total, newest last: drawn again at it, they are a redraw, not a new bar. */
  readonly #finishedKeys = new Set<string>();
  /** Where the current segment starts, what it counts, and how much of the total one of its counts is. */
  #base = 0;
  #unit: string | undefined;
  #scale = 1;
  /** The previous segment's unit, scale and share of the total, for the next one to follow. */
  #previous: { unit: string | undefined; scale: number; span: number | undefined } | undefined;
  #last: number | undefined;

  /**
   * The combined progress after this reading, or undefined when it does not increase.
   * `drawnBelow`: the line was drawn below another one, the cursor then moved back up (tqdm's
   * bar at position 1 or more): a bar nested in the one above, never its successor.
   */
  push(reading: Reading, drawnBelow = false): ParsedProgress | undefined {
    // A line of text ("frame 3/4") is taken as it is, and only when it exceeds what was published.
    if (!reading.bar) return this.#increasing(reading.progress);
    const { progress } = reading;
    // A bar is known by its description and total; its numbers may change ("epoch 2" after "epoch 1").
    const key = `${reading.key ?? (progress.message ?? '').replace(/\d+/g, '#')}:${progress.total ?? ''}`;
    const level = this.#levelOf(key);
    if (level === undefined && this.#finishedKeys.has(key)) {
      // tqdm redraws a finished bar once more when it closes (an inner bar at the outer one's
      // place): no new bar, nothing to count on from. One that counts from below again is new.
      if (progress.total !== undefined && progress.progress >= progress.total) return undefined;
      this.#finishedKeys.delete(key);
    }
    if (this.#bars.length === 0) this.#startSegment(reading);
    if (level === undefined) {
      const top = this.#bars.at(-1);
      // A count (no total) never finishes, so a count after a count follows it (a count bar per
      // file), unless it is drawn below it: then it is nested, and the outer count alone is the
      // value (no total, so no fraction of a step is known). Nesting is bounded all the same.
      if (
        top !== undefined &&
        (finished(top) ||
          (top.total === undefined && progress.total === undefined && !drawnBelow) ||
          this.#bars.length >= MAX_BAR_LEVELS)
      )
        this.#replaceTop(reading);
      this.#bars.push({
        key,
        n: progress.progress,
        total: progress.total,
        message: progress.message,
      });
    } else {
      const known = this.#bars[level] as Bar;
      // The outermost bar counting from below again is a new bar under the same name.
      if (level === 0 && progress.progress < known.n) {
        this.#newSegment();
        this.#startSegment(reading);
      }
      // An outer bar that moved on: the bars inside it belonged to its previous step.
      if (progress.progress !== known.n) this.#drop(level);
      this.#bars[level] = { ...known, n: progress.progress, message: progress.message };
    }
    return this.#combined();
  }

  /** How many bars are open, nested (at most MAX_BAR_LEVELS). */
  get depth(): number {
    return this.#bars.length;
  }

  /** The level of the open bar this reading redraws. */
  #levelOf(key: string): number | undefined {
    for (let level = this.#bars.length - 1; level >= 0; level--) {
      if (this.#bars[level]?.key === key) return level;
    }
    return undefined;
  }

  #replaceTop(reading: Reading): void {
    if (this.#bars.length === 1) {
      this.#newSegment();
      this.#startSegment(reading);
    }
    this.#drop(this.#bars.length - 1);
  }

  /** Closes the bars from `level` in, remembering those that finished (MAX_BAR_LEVELS at most). */
  #drop(level: number): void {
    for (const bar of this.#bars.splice(Math.max(0, level))) {
      if (!finished(bar)) continue;
      this.#finishedKeys.delete(bar.key);
      this.#finishedKeys.add(bar.key);
      if (this.#finishedKeys.size > MAX_BAR_LEVELS)
        this.#finishedKeys.delete(this.#finishedKeys.values().next().value as string);
    }
  }

  /** What follows counts on from the last value published. */
  #newSegment(): void {
    const outer = this.#bars[0];
    this.#previous = {
      unit: this.#unit,
      scale: this.#scale,
      span: outer?.total === undefined ? undefined : outer.total * this.#scale,
    };
    this.#base = this.#last ?? 0;
    this.#drop(0);
  }

  /** The outermost bar of a segment: its unit, and how its counts add to what came before. */
  #startSegment(reading: Reading): void {
    this.#base = this.#last ?? 0;
    this.#unit = reading.unit;
    const previous = this.#previous;
    const total = reading.progress.total;
    if (previous === undefined || previous.unit === reading.unit)
      this.#scale = previous?.scale ?? 1;
    else if (previous.span !== undefined && total !== undefined && total > 0)
      this.#scale = previous.span / total;
    else this.#scale = 1;
  }

  #combined(): ParsedProgress | undefined {
    const [outer, inner] = this.#bars;
    if (outer === undefined) return undefined;
    let fraction = 0;
    if (inner?.total !== undefined && inner.total > 0)
      fraction = Math.min(1, inner.n / inner.total);
    const total = outer.total === undefined ? undefined : this.#base + outer.total * this.#scale;
    const counted = outer.n + fraction;
    // At its total exactly, so that a scaled segment ends at 100%, not a rounding below it.
    const progress =
      total !== undefined && outer.total !== undefined && counted >= outer.total
        ? total
        : this.#base + counted * this.#scale;
    // The message says what the value says: once the inner bar is full, its step of the outer bar
    // is done (3 of 3 epochs, not "epochs 2/3" at 3/3), and the inner bar is not shown. A scaled
    // bar's value is not its count, so its message gives the count.
    const shown = fraction >= 1 ? [{ ...outer, n: outer.n + 1 }] : this.#bars;
    const message =
      this.#bars.length === 1 && this.#scale === 1
        ? outer.message
        : shown
            .map((open) =>
              [open.message, open.total === undefined ? `${open.n}` : `${open.n}/${open.total}`]
                .filter((part) => part !== undefined)
                .join(' '),
            )
            .join(' · ');
    return this.#increasing(
      withMessage(
        rounded(progress),
        total === undefined ? undefined : rounded(total),
        message === undefined ? undefined : messageOf(message),
      ),
    );
  }

  #increasing(reading: ParsedProgress): ParsedProgress | undefined {
    if (this.#last !== undefined && !(reading.progress > this.#last)) return undefined;
    this.#last = reading.progress;
    return reading;
  }
}

/** Sums of scaled counts without binary noise (133.33, not 133.32999999999998). */
function rounded(value: number): number {
  return Number(value.toPrecision(12));
}

function finished(bar: Bar): boolean {
  return bar.total !== undefined && bar.n >= bar.total;
}

/**
 * The whole reading of a command's output: for each stream (stdout, stderr,
 * the progress pipe) its own decoder and line scanner, so that half lines
 * of two streams never join; one reader (a tool's profile or the generic
 * one) for the lines of all of them, in the order they came; one combiner;
 * and `publish` told each value that increases. Chunks may split a line,
 * or a UTF-8 character, anywhere. Pure apart from the callback.
 */
export class OutputProgress {
  readonly #reader: LineReader;
  readonly #combiner = new ProgressCombiner();
  readonly #publish: (progress: ParsedProgress) => void;
  #published = 0;
  #lines = 0;

  constructor(reader: LineReader, publish: (progress: ParsedProgress) => void) {
    this.#reader = reader;
    this.#publish = publish;
  }

  /** How many values were published, and how many lines were read. */
  get published(): number {
    return this.#published;
  }

  get lines(): number {
    return this.#lines;
  }

  /** The input side of one stream. */
  stream(source: OutputSource): OutputStream {
    const decoder = new StringDecoder('utf8');
    const scanner = new OutputScanner((line) => this.#read(line, source));
    return {
      write: (chunk) => scanner.push(typeof chunk === 'string' ? chunk : decoder.write(chunk)),
      quiet: () => scanner.quiet(),
      end: () => scanner.push(`${decoder.end()}\n`),
      get hasPending() {
        return scanner.hasPending;
      },
    };
  }

  #read(raw: string, source: OutputSource): void {
    const line = plainText(raw);
    if (line.trim() === '') return;
    this.#lines++;
    const reading = this.#reader.read(line, source);
    if (reading === undefined) return;
    const value = this.#combiner.push(reading, CURSOR_UP.test(raw));
    if (value === undefined) return;
    this.#published++;
    this.#publish(value);
  }
}

export interface OutputStream {
  /** Bytes as they come (decoded here as UTF-8), or text. */
  write(chunk: Buffer | string): void;
  /** The output paused: read the unfinished line as it stands. */
  quiet(): void;
  /** The stream ended: its last line is complete. */
  end(): void;
  readonly hasPending: boolean;
}
