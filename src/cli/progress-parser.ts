/**
 * Reads progress out of a program's output for `run --parse`: tqdm bars
 * (`NN%|...| n/total`, and `n it [..]` without a total), `n/total` and
 * `NN%`. Pure: text in, values out; no I/O, no clock.
 */

export interface ParsedProgress {
  readonly progress: number;
  readonly total?: number;
  readonly message?: string;
}

/** Longest message taken from a line of output. */
const MAX_MESSAGE_CHARS = 200;

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const ANSI = /\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
const NUMBER = String.raw`(\d+(?:\.\d+)?)([kMGTPEZY]?)`;
const TQDM_TOTAL = new RegExp(String.raw`^(.*?)(\d{1,3}(?:\.\d+)?)%\|.*?\|\s*${NUMBER}\/${NUMBER}`);
const TQDM_COUNT = new RegExp(
  String.raw`^(?:(.*?):\s*)?${NUMBER}[a-zA-Z/]* \[\d+:\d\d(?::\d\d)?[,\]]`,
);
const FRACTION = /(?<![\w./:-])(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)(?![\w./:])/;
const PERCENT = /(?<![\w.])(\d{1,3}(?:\.\d+)?)\s?%/;

const SI: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Z: 1e21,
  Y: 1e24,
};

function scaled(digits: string | undefined, suffix: string | undefined): number {
  return Number(digits) * (SI[suffix ?? ''] ?? 1);
}

function messageOf(text: string): string | undefined {
  const trimmed = text.trim().replace(/\s+/g, ' ');
  if (trimmed === '') return undefined;
  return trimmed.length > MAX_MESSAGE_CHARS
    ? `${trimmed.slice(0, MAX_MESSAGE_CHARS - 1)}…`
    : trimmed;
}

function withMessage(
  progress: number,
  total: number | undefined,
  message: string | undefined,
): ParsedProgress {
  const parsed: { progress: number; total?: number; message?: string } = { progress };
  if (total !== undefined) parsed.total = total;
  if (message !== undefined) parsed.message = message;
  return parsed;
}

/** The progress a line of output shows, if any; the first shape that matches wins. */
export function parseProgressLine(raw: string): ParsedProgress | undefined {
  return readProgressLine(raw)?.progress;
}

/**
 * What a line shows, and whether it is a tqdm bar (whose message is the
 * bar's description, the same on every redraw) or a line of text (whose
 * message is the whole line).
 */
function readProgressLine(raw: string): { progress: ParsedProgress; bar: boolean } | undefined {
  const line = raw.replace(ANSI, '');
  const tqdm = TQDM_TOTAL.exec(line);
  if (tqdm !== null) {
    const [, desc, , n, nSuffix, total, totalSuffix] = tqdm;
    const progress = withMessage(
      scaled(n, nSuffix),
      scaled(total, totalSuffix),
      messageOf((desc ?? '').replace(/:\s*$/, '')),
    );
    return { progress, bar: true };
  }
  const count = TQDM_COUNT.exec(line);
  if (count !== null) {
    const [, desc, n, suffix] = count;
    return {
      progress: withMessage(scaled(n, suffix), undefined, messageOf(desc ?? '')),
      bar: true,
    };
  }
  const fraction = FRACTION.exec(line);
  if (fraction !== null) {
    const n = Number(fraction[1]);
    const total = Number(fraction[2]);
    if (total > 0 && n <= total)
      return { progress: withMessage(n, total, messageOf(line)), bar: false };
  }
  const percent = PERCENT.exec(line);
  if (percent !== null) {
    const value = Number(percent[1]);
    if (value <= 100) return { progress: withMessage(value, 100, messageOf(line)), bar: false };
  }
  return undefined;
}

/** The most of a line that is kept and read: its last this many characters. */
export const MAX_LINE_CHARS = 4096;

const LINE_BREAK = /\r\n|\r|\n/g;

/** The last `max` characters of `text`; a line longer than that is read by its end, where a bar's counts are. */
function tail(text: string, max: number): string {
  return text.length > max ? text.slice(text.length - max) : text;
}

/**
 * Splits output into lines at \n and \r (tqdm redraws with \r) and reports
 * the progress of each complete one. The unfinished last line is parsed
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
  readonly #found: (progress: ParsedProgress, bar: boolean) => void;

  /** `found` is told each reading, and whether it came from a tqdm bar (see readProgressLine). */
  constructor(found: (progress: ParsedProgress, bar: boolean) => void) {
    this.#found = found;
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
   * The output paused: read the unfinished line as it stands. It is kept, so
   * that if it goes on, the finished line is read again (a repeated value is
   * not an increase, and the publisher skips it).
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
      const read = readProgressLine(line);
      if (read !== undefined) this.#found(read.progress, read.bar);
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
 * A bar that appears while the innermost one is unfinished is nested in it;
 * one that appears after it finished takes its place, and at the outermost
 * level starts a new segment that counts on from the last value, so that
 * bars that follow each other keep counting up. Only values that exceed the
 * last one are returned: an outer bar catching up with what its inner bar
 * already reported is skipped, never published backwards. Pure: no I/O.
 */
export class ProgressCombiner {
  /** Open bars, outermost first. */
  readonly #bars: Bar[] = [];
  /** Where the current segment starts. */
  #base = 0;
  #last: number | undefined;

  /** The combined progress after this reading, or undefined when it does not increase. */
  push(reading: ParsedProgress, bar = false): ParsedProgress | undefined {
    // A line of text ("frame 3/4") is taken as it is, and only when it exceeds what was published.
    if (!bar) return this.#increasing(reading);
    if (this.#bars.length === 0) this.#base = this.#last ?? 0;
    // A bar is known by its description and total; its numbers may change ("epoch 2" after "epoch 1").
    const key = `${(reading.message ?? '').replace(/\d+/g, '#')}:${reading.total ?? ''}`;
    const level = this.#levelOf(key);
    if (level === undefined) {
      const top = this.#bars.at(-1);
      if (top !== undefined && finished(top)) this.#replaceTop();
      this.#bars.push({ key, n: reading.progress, total: reading.total, message: reading.message });
    } else {
      const known = this.#bars[level] as Bar;
      // The outermost bar counting from below again is a new bar under the same name.
      if (level === 0 && reading.progress < known.n) this.#newSegment();
      // An outer bar that moved on: the bars inside it belonged to its previous step.
      if (reading.progress !== known.n) this.#bars.length = level;
      this.#bars[level] = { ...known, n: reading.progress, message: reading.message };
    }
    return this.#combined();
  }

  /** The level of the open bar this reading redraws. */
  #levelOf(key: string): number | undefined {
    for (let level = this.#bars.length - 1; level >= 0; level--) {
      if (this.#bars[level]?.key === key) return level;
    }
    return undefined;
  }

  #replaceTop(): void {
    if (this.#bars.length === 1) this.#newSegment();
    this.#bars.pop();
  }

  /** What follows counts on from the last value published. */
  #newSegment(): void {
    this.#base = this.#last ?? 0;
    this.#bars.length = 0;
  }

  #combined(): ParsedProgress | undefined {
    const [outer, inner] = this.#bars;
    if (outer === undefined) return undefined;
    let fraction = 0;
    if (inner?.total !== undefined && inner.total > 0)
      fraction = Math.min(1, inner.n / inner.total);
    const total = outer.total === undefined ? undefined : this.#base + outer.total;
    // The message says what the value says: once the inner bar is full, its step of the outer bar
    // is done (3 of 3 epochs, not "epochs 2/3" at 3/3), and the inner bar is not shown.
    const shown = fraction >= 1 ? [{ ...outer, n: outer.n + 1 }] : this.#bars;
    const message =
      this.#bars.length === 1
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
        this.#base + outer.n + fraction,
        total,
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

function finished(bar: Bar): boolean {
  return bar.total !== undefined && bar.n >= bar.total;
}
