/**
 * `run --parse` profiles: what each tool prints about its progress, read the
 * tool's way and said the tool's way ("frame 123, 4.1 s of 20 s"), chosen
 * with `--parse=NAME` or by the command's name. The generic reader
 * (progress-parser.ts) is the fallback. Pure: the command line and lines of
 * output in, readings out.
 */
import {
  GenericReader,
  type LineReader,
  type OutputSource,
  type ParsedProgress,
  type Reading,
  readBar,
  scaled,
  withMessage,
} from './progress-parser.js';

export interface ProgressProfile {
  readonly name: string;
  /** Command names (without directory or .exe) that choose this profile. */
  readonly commands: readonly string[];
  /** What it reads, for `run --help` and docs/CLIENTS.md. */
  readonly reads: string;
  /**
   * The arguments to run CMD with when the profile asks the tool for a
   * machine-readable progress stream on fd 3 (ffmpeg -progress pipe:3,
   * apt-get -o APT::Status-Fd=3); undefined when it does not, or the command
   * line already chose where that stream goes.
   */
  withProgressPipe?(args: readonly string[]): string[] | undefined;
  /** A reader for one run; `piped` says whether the progress pipe was added. */
  reader(args: readonly string[], piped: boolean): LineReader;
}

/** A reader that keeps no state across lines. */
function stateless(read: (line: string, source: OutputSource) => Reading | undefined): LineReader {
  return { read };
}

function text(progress: ParsedProgress): Reading {
  return { progress, bar: false };
}

/** A tool's own bar of `unit` (a download, a file's percentage), known by `key`, whatever its message says. */
function barOf(progress: ParsedProgress, unit: string, key: string): Reading {
  return { progress, bar: true, unit, key };
}

const SECONDS = /^(-?)(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/;

/** Seconds in `HH:MM:SS.cc` (ffmpeg), `MM:SS.cc`, or a number of seconds; undefined for N/A. */
export function secondsOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const clock = SECONDS.exec(value.trim());
  if (clock !== null) {
    const [, sign, hours, minutes, seconds] = clock;
    const total = Number(hours ?? 0) * 3600 + Number(minutes) * 60 + Number(seconds);
    return sign === '-' ? -total : total;
  }
  // ffmpeg's own duration syntax also takes 20, 20s, 1500ms, 2500000us.
  const plain = /^(\d+(?:\.\d+)?)(s|ms|us)?$/.exec(value.trim());
  if (plain === null) return undefined;
  const unit = plain[2] === 'ms' ? 1e-3 : plain[2] === 'us' ? 1e-6 : 1;
  return Number(plain[1]) * unit;
}

/** "4.1 s" under a minute, "2:03.4" or "1:02:03" above. */
export function formatSeconds(seconds: number): string {
  if (seconds < 60) return `${Number(seconds.toFixed(1))} s`;
  const whole = Math.floor(seconds);
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const s = whole % 60;
  const pad = (value: number) => String(value).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

/** The value after an option (`-t 5`) or in it (`--frame-start=5`). */
function optionValues(args: readonly string[], names: readonly string[]): Map<number, string> {
  const found = new Map<number, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    for (const name of names) {
      if (arg === name && i + 1 < args.length) found.set(i, args[i + 1] ?? '');
      else if (arg.startsWith(`${name}=`)) found.set(i, arg.slice(name.length + 1));
    }
  }
  return found;
}

function lastValue(args: readonly string[], names: readonly string[]): string | undefined {
  return [...optionValues(args, names).values()].at(-1);
}

// ---------------------------------------------------------------- ffmpeg

const FFMPEG_STATUS = /^(?:frame=\s*(\d+)\s.*?)?size=\s*\S+\s+time=\s*(-?[\d:.]+|N\/A)/;
const FFMPEG_INPUT = /^Input #(\d+),/;
const FFMPEG_DURATION = /^\s+Duration: ([\d:.]+|N\/A)/;
/** The summary ffmpeg prints after the last frame: the work is done. */
const FFMPEG_SUMMARY = /^video:\S+ audio:\S+ subtitle:/;

/** What ffmpeg's command line says of the length of its output. */
interface FfmpegPlan {
  /** Input lengths known from the command line (-t before -i, a lavfi source's duration=). */
  readonly inputs: Map<number, number>;
  /** -t or -to of the output, less its -ss. */
  readonly outputLimit: number | undefined;
  /** -frames:v / -vframes: the output counts frames. */
  readonly frames: number | undefined;
}

const LAVFI_DURATION = /(?:^|[:,=])(?:duration|d)=([^:,;]+)/;

function planFfmpeg(args: readonly string[]): FfmpegPlan {
  const inputs = new Map<number, number>();
  // Options before an -i are that input's: -t limits it, -ss starts it later, -f lavfi makes it a source.
  let pending: { t?: number | undefined; ss?: number | undefined; lavfi?: boolean } = {};
  let input = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const value = args[i + 1];
    if (arg === '-i' && value !== undefined) {
      let length = pending.t;
      if (length === undefined && pending.lavfi === true) {
        const source = LAVFI_DURATION.exec(value);
        length = source === null ? undefined : secondsOf(source[1]);
      }
      if (length !== undefined) inputs.set(input, Math.max(0, length - (pending.ss ?? 0)));
      input++;
      pending = {};
      i++;
    } else if (arg === '-f') pending.lavfi = value === 'lavfi';
    else if (arg === '-t') pending.t = secondsOf(value);
    else if (arg === '-ss') pending.ss = secondsOf(value);
  }
  // Options after the last -i are the output's.
  const lastInput = args.lastIndexOf('-i');
  const outputArgs = lastInput < 0 ? args : args.slice(lastInput + 2);
  const t = secondsOf(lastValue(outputArgs, ['-t']));
  const to = secondsOf(lastValue(outputArgs, ['-to']));
  const start = secondsOf(lastValue(outputArgs, ['-ss'])) ?? 0;
  const frames = Number(lastValue(outputArgs, ['-frames:v', '-frames', '-vframes', '-frames:v:0']));
  return {
    inputs,
    outputLimit: t ?? (to === undefined ? undefined : Math.max(0, to - start)),
    frames: Number.isFinite(frames) && frames > 0 ? frames : undefined,
  };
}

/**
 * ffmpeg: the output's time (`time=` on stderr, or `out_time_us=` of the
 * `-progress` stream run adds on fd 3) against the length of the output
 * (the input's `Duration:`, a lavfi source's `duration=`, capped by `-t` or
 * `-to`), or `frame=` against `-frames:v`. 100% only when ffmpeg says it
 * finished (`progress=end`, or the summary after the last frame).
 */
class FfmpegReader implements LineReader {
  readonly #plan: FfmpegPlan;
  readonly #piped: boolean;
  readonly #inputs: Map<number, number>;
  #input: number | undefined;
  #block = new Map<string, string>();
  #frame: number | undefined;
  #seconds: number | undefined;

  constructor(args: readonly string[], piped: boolean) {
    this.#plan = planFfmpeg(args);
    this.#piped = piped;
    this.#inputs = new Map(this.#plan.inputs);
  }

  read(line: string, source: OutputSource): Reading | undefined {
    if (source === 'progress') return this.#progressLine(line);
    const input = FFMPEG_INPUT.exec(line);
    if (input !== null) {
      this.#input = Number(input[1]);
      return undefined;
    }
    const duration = FFMPEG_DURATION.exec(line);
    if (duration !== null && this.#input !== undefined) {
      const seconds = secondsOf(duration[1]);
      if (seconds !== undefined && !this.#inputs.has(this.#input))
        this.#inputs.set(this.#input, seconds);
      return undefined;
    }
    // With the progress pipe, stderr's status line says the same later: the pipe alone counts.
    if (this.#piped) return undefined;
    if (FFMPEG_SUMMARY.test(line)) return this.#reading(true);
    const status = FFMPEG_STATUS.exec(line.trim());
    if (status === null) return undefined;
    if (status[1] !== undefined) this.#frame = Number(status[1]);
    const seconds = secondsOf(status[2]);
    if (seconds !== undefined) this.#seconds = Math.max(0, seconds);
    return this.#reading(false);
  }

  #progressLine(line: string): Reading | undefined {
    const equals = line.indexOf('=');
    if (equals < 0) return undefined;
    const key = line.slice(0, equals).trim();
    const value = line.slice(equals + 1).trim();
    if (key !== 'progress') {
      this.#block.set(key, value);
      return undefined;
    }
    const block = this.#block;
    this.#block = new Map();
    const frame = Number(block.get('frame'));
    if (Number.isFinite(frame)) this.#frame = frame;
    const micros = Number(block.get('out_time_us'));
    if (Number.isFinite(micros) && block.get('out_time_us') !== undefined)
      this.#seconds = Math.max(0, micros / 1e6);
    else {
      const seconds = secondsOf(block.get('out_time'));
      if (seconds !== undefined) this.#seconds = Math.max(0, seconds);
    }
    return this.#reading(value === 'end');
  }

  /** The length of the output in seconds, when anything says it. */
  #length(): number | undefined {
    const known = [...this.#inputs.values()];
    const longest = known.length === 0 ? undefined : Math.max(...known);
    const limit = this.#plan.outputLimit;
    if (longest === undefined) return limit;
    return limit === undefined ? longest : Math.min(longest, limit);
  }

  #reading(end: boolean): Reading | undefined {
    const frame = this.#frame;
    const seconds = this.#seconds;
    const framesTotal = this.#plan.frames;
    if (framesTotal !== undefined) {
      if (frame === undefined) return undefined;
      const done = end ? framesTotal : Math.min(frame, framesTotal - 0.5);
      const time = seconds === undefined ? '' : `, ${formatSeconds(seconds)}`;
      return text(
        withMessage(
          done,
          framesTotal,
          `frame ${end ? framesTotal : frame} of ${framesTotal}${time}`,
        ),
      );
    }
    const length = this.#length();
    if (seconds === undefined && !(end && length !== undefined)) return undefined;
    const at = end && length !== undefined ? length : (seconds ?? 0);
    const framePart = frame === undefined ? '' : `frame ${frame}, `;
    if (length === undefined)
      return text(withMessage(at, undefined, `${framePart}${formatSeconds(at)}`));
    // Never the whole length before ffmpeg says it finished: the last frame's time is a little short of it anyway.
    const progress = end ? length : Math.min(at, length * 0.999);
    return text(
      withMessage(
        progress,
        length,
        `${framePart}${formatSeconds(end ? length : Math.min(at, length))} of ${formatSeconds(length)}`,
      ),
    );
  }
}

// ---------------------------------------------------------------- build tools

const NINJA = /^\s*\[\s*(\d+)\s*\/\s*(\d+)\s*\]\s*(.*)$/;
const CMAKE = /^\s*\[\s*(\d{1,3})%\]\s*(.*)$/;
const CARGO = /^\s*Building \[[=> ]*\] (\d+)\/(\d+)(?::\s*(.*?))?\s*$/;

/** Build tools' step counters: ninja's `[12/240]`, cmake's Makefiles' `[ 45%]`, cargo's `Building [==> ] 3/5`. */
function readCounter(line: string): Reading | undefined {
  const ninja = NINJA.exec(line);
  if (ninja !== null) {
    const n = Number(ninja[1]);
    const total = Number(ninja[2]);
    if (total === 0 || n > total) return undefined;
    const what = ninja[3] === '' ? '' : `: ${ninja[3]}`;
    return text(withMessage(n, total, `step ${n} of ${total}${what}`));
  }
  const cmake = CMAKE.exec(line);
  if (cmake !== null) {
    const percent = Number(cmake[1]);
    if (percent > 100) return undefined;
    return text(withMessage(percent, 100, `${percent}%: ${cmake[2]}`));
  }
  const cargo = CARGO.exec(line);
  if (cargo !== null) {
    const n = Number(cargo[1]);
    const total = Number(cargo[2]);
    if (total === 0 || n > total) return undefined;
    const building = cargo[3] === undefined ? '' : `; building ${cargo[3]}`;
    return text(withMessage(n, total, `${n} of ${total} crates built${building}`));
  }
  return undefined;
}

// ---------------------------------------------------------------- Blender

const BLENDER_FRAME = /^Fra:(\d+)\s/;
const BLENDER_SAMPLE =
  /\|\s*(?:Sample (\d+)\/(\d+)|Rendering (\d+) \/ (\d+) samples|Path Tracing Sample (\d+)\/(\d+))/;
const BLENDER_SAVED = /^Saved: /;

/** How many frames Blender's command line renders: -s/-e/-j with -a, or the list of -f. */
function blenderFrames(args: readonly string[]): number | undefined {
  let start: number | undefined;
  let end: number | undefined;
  let jump = 1;
  let count: number | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const value = args[i + 1] ?? '';
    if (arg === '-s' || arg === '--frame-start') start = Number(value);
    else if (arg === '-e' || arg === '--frame-end') end = Number(value);
    else if (arg === '-j' || arg === '--frame-jump') jump = Number(value);
    else if (arg === '-a' || arg === '--render-anim')
      count =
        start !== undefined && end !== undefined && end >= start
          ? Math.floor((end - start) / jump) + 1
          : undefined;
    else if (arg === '-f' || arg === '--render-frame')
      count = value.split(',').reduce((sum, part) => {
        const range = /^(\d+)\.\.(\d+)$/.exec(part);
        return sum + (range === null ? 1 : Number(range[2]) - Number(range[1]) + 1);
      }, 0);
  }
  return count !== undefined && Number.isFinite(count) && count > 0 ? count : undefined;
}

/** Blender: frames done (`Saved:`) plus the samples of the frame being rendered (`Fra:N ... | Sample s/S`). */
class BlenderReader implements LineReader {
  readonly #frames: number | undefined;
  #done = 0;
  #frame: number | undefined;

  constructor(args: readonly string[]) {
    this.#frames = blenderFrames(args);
  }

  read(line: string): Reading | undefined {
    if (BLENDER_SAVED.test(line)) {
      this.#done++;
      const of = this.#frames === undefined ? '' : ` of ${this.#frames}`;
      const which = this.#frame === undefined ? '' : ` (frame ${this.#frame})`;
      return text(
        withMessage(this.#done, this.#frames, `${this.#done}${of} frames rendered${which}`),
      );
    }
    const frame = BLENDER_FRAME.exec(line);
    if (frame === null) return undefined;
    this.#frame = Number(frame[1]);
    const sample = BLENDER_SAMPLE.exec(line);
    if (sample === null) return undefined;
    const numbers = sample
      .slice(1)
      .filter((part) => part !== undefined)
      .map(Number);
    const [s = 0, total = 0] = numbers;
    if (total <= 0 || s > total) return undefined;
    // The frame is done when it is saved: its last sample is a little short of that.
    const fraction = Math.min(s / total, 0.999);
    const of = this.#frames === undefined ? '' : ` of ${this.#frames}`;
    return text(
      withMessage(
        this.#done + fraction,
        this.#frames,
        `frame ${this.#frame} (${this.#done + 1}${of}), sample ${s}/${total}`,
      ),
    );
  }
}

// ---------------------------------------------------------------- transfers

const RSYNC =
  /^\s*([\d,]+)\s+(\d{1,3})%\s+\S+\s+\S+(?:\s+\(xfr#(\d+), (?:to|ir)-chk=(\d+)\/(\d+)\))?/;

/** rsync: with --info=progress2 the whole transfer's percentage; else the files checked (`to-chk=R/T`). */
function rsyncReader(args: readonly string[]): LineReader {
  const overall = args.some((arg) => /^--info=.*progress2/.test(arg));
  return stateless((line) => {
    const found = RSYNC.exec(line);
    if (found === null) return undefined;
    const [, bytes, percent, , left, files] = found;
    const checked =
      left === undefined || files === undefined ? undefined : Number(files) - Number(left);
    if (overall) {
      const filesPart = checked === undefined ? '' : `, ${checked} of ${files} files`;
      return barOf(
        withMessage(Number(percent), 100, `${percent}%, ${bytes} bytes${filesPart}`),
        '%',
        'rsync',
      );
    }
    if (checked === undefined) return undefined;
    return text(withMessage(checked, Number(files), `${checked} of ${files} files`));
  });
}

const WGET_DOTS = /^\s*\d+K(?:\s+[.,]+)+\s+(\d{1,3})%/;
const WGET_BAR = /^(.*?)\s+(\d{1,3})%\[[=> ]*\]\s+([\d.,]+[KMGT]?)/;
const WGET_SAVING = /^Saving to: ['‘"]?(.*?)['’"]?$/;

/** wget: the percentage of its dots (`450K .......... 45%`) or of its bar (`file 45%[==> ] 3.31M`). */
class WgetReader implements LineReader {
  #file = '';

  read(line: string): Reading | undefined {
    const saving = WGET_SAVING.exec(line);
    if (saving !== null) {
      this.#file = saving[1] ?? '';
      return undefined;
    }
    const bar = WGET_BAR.exec(line);
    if (bar !== null) {
      const name = bar[1]?.trim() || this.#file;
      return barOf(withMessage(Number(bar[2]), 100, `${name}: ${bar[2]}% (${bar[3]})`), '%', name);
    }
    const dots = WGET_DOTS.exec(line);
    if (dots !== null)
      return barOf(
        withMessage(Number(dots[1]), 100, `${this.#file}: ${dots[1]}%`),
        '%',
        this.#file,
      );
    return undefined;
  }
}

const CURL_METER =
  /^\s*(\d{1,3})\s+([\d.]+[kMGTP]?)\s+(\d{1,3})\s+([\d.]+[kMGTP]?)\s+\d+\s+[\d.]+[kMGTP]?\s+[\d.]+[kMGTP]?\s+[\d.]+[kMGTP]?\s/;
const CURL_BAR = /^#*\s*(\d{1,3}(?:\.\d)?)%\s*$/;

/** curl: its meter's `% Total` column against the size, or the percentage of `-#`. */
const curlReader = stateless((line) => {
  const meter = CURL_METER.exec(line);
  if (meter !== null) {
    const [, percent, size, , received] = meter;
    // A size of 0 is one curl does not know yet.
    if (size === '0') return undefined;
    return barOf(
      withMessage(Number(percent), 100, `${percent}% of ${size} (${received})`),
      '%',
      'curl',
    );
  }
  const bar = CURL_BAR.exec(line);
  if (bar !== null) return barOf(withMessage(Number(bar[1]), 100, `${bar[1]}%`), '%', 'curl');
  return undefined;
});

const PIP_DOWNLOADING = /^\s*Downloading (\S+)/;

/** pip: its download bars (rich: `━━━━ 1.2/3.0 MB`), named after the file. */
class PipReader implements LineReader {
  #file: string | undefined;

  read(line: string): Reading | undefined {
    const downloading = PIP_DOWNLOADING.exec(line);
    if (downloading !== null) {
      this.#file = downloading[1]?.split('/').at(-1);
      return undefined;
    }
    const found = readBar(line);
    if (found === undefined || found.unit !== 'B' || found.progress.total === undefined)
      return undefined;
    const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
    const name = this.#file ?? 'download';
    return barOf(
      withMessage(
        found.progress.progress,
        found.progress.total,
        `Downloading ${name}: ${mb(found.progress.progress)} of ${mb(found.progress.total)} MB`,
      ),
      'B',
      name,
    );
  }
}

// ---------------------------------------------------------------- packages

const APT_STATUS = /^(dlstatus|pmstatus):[^:]*:(\d+(?:\.\d+)?):(.*)$/;
const APT_FANCY = /^Progress: \[\s*(\d{1,3})%\]/;

/**
 * apt and apt-get: the status lines of `-o APT::Status-Fd=3` (downloads, then
 * dpkg's work, each 0 to 100%), or `Progress: [ 45%]` of Dpkg::Progress-Fancy.
 */
const aptReader = stateless((line, source) => {
  if (source === 'progress') {
    const status = APT_STATUS.exec(line);
    if (status === null) return undefined;
    const [, kind, percent, what] = status;
    const value = Number(Number(percent).toFixed(2));
    const phase = kind === 'dlstatus' ? 'download' : 'install';
    return barOf(withMessage(value, 100, `${phase}: ${what} (${value}%)`), '%', phase);
  }
  const fancy = APT_FANCY.exec(line);
  if (fancy !== null) return text(withMessage(Number(fancy[1]), 100, `${fancy[1]}%`));
  return undefined;
});

const DPKG_STEP = /^(Unpacking|Setting up|Removing|Purging configuration files for) (\S+)/;

/** dpkg: its steps, unpacking and setting up each package (two steps for each .deb of the command line). */
class DpkgReader implements LineReader {
  readonly #steps: number | undefined;
  #done = 0;

  constructor(args: readonly string[]) {
    const debs = args.filter((arg) => arg.endsWith('.deb')).length;
    this.#steps =
      debs > 0 && !args.includes('-R') && !args.includes('--recursive') ? 2 * debs : undefined;
  }

  read(line: string): Reading | undefined {
    const step = DPKG_STEP.exec(line);
    if (step === null) return undefined;
    this.#done++;
    const of = this.#steps === undefined ? '' : ` of ${this.#steps}`;
    return text(
      withMessage(
        this.#done,
        this.#steps,
        `${(step[1] ?? '').toLowerCase()} ${step[2]} (step ${this.#done}${of})`,
      ),
    );
  }
}

const DOCKER_LAYER =
  /^([0-9a-f]{12}): (Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting|Pull complete|Already exists)(?:\s+(?:\[[=> ]*\]\s+)?([\d.]+[kMG]?B)\/([\d.]+[kMG]?B))?/;

function bytesOf(size: string | undefined): number {
  const found = /^([\d.]+)([kMG]?)B$/.exec(size ?? '');
  return found === null ? 0 : scaled(found[1], found[2] === 'k' ? 'k' : found[2]);
}

/** docker pull: each layer counts one, half for its download and half for its extraction. */
class DockerPullReader implements LineReader {
  readonly #layers = new Map<string, number>();

  read(line: string): Reading | undefined {
    const layer = DOCKER_LAYER.exec(line);
    if (layer === null) return undefined;
    const [, id = '', status, done, size] = layer;
    const part = size === undefined ? 0 : Math.min(1, bytesOf(done) / Math.max(1, bytesOf(size)));
    const before = this.#layers.get(id) ?? 0;
    const now =
      status === 'Pull complete' || status === 'Already exists'
        ? 1
        : status === 'Downloading'
          ? part / 2
          : status === 'Download complete' || status === 'Verifying Checksum'
            ? 0.5
            : status === 'Extracting'
              ? // A layer is done when docker says so ("Pull complete"), not at its last byte.
                Math.min(0.5 + part / 2, 0.99)
              : 0;
    this.#layers.set(id, Math.max(before, now));
    const sum = [...this.#layers.values()].reduce((a, b) => a + b, 0);
    // Layers are announced first ("Pulling fs layer"); until one moves, the count of them still grows.
    if (sum === 0) return undefined;
    const complete = [...this.#layers.values()].filter((value) => value === 1).length;
    const detail = size === undefined ? status : `${status} ${done}/${size}`;
    return text(
      withMessage(
        sum,
        this.#layers.size,
        `${complete} of ${this.#layers.size} layers; ${id}: ${detail}`,
      ),
    );
  }
}

// ---------------------------------------------------------------- the table

/** A reader of what the generic reader reads, with a tool's own lines first. */
function before(own: LineReader): LineReader {
  const generic = new GenericReader();
  return {
    read(line, source) {
      return own.read(line, source) ?? generic.read(line);
    },
  };
}

export const GENERIC_PROFILE: ProgressProfile = {
  name: 'generic',
  commands: [],
  reads:
    'tqdm, rich and Keras bars, [n/total] counters, n/total and NN% in a line (not after = or :, not dates, statistics, measurements, nor a first value already at 100%)',
  reader: () => new GenericReader(),
};

export const PROFILES: readonly ProgressProfile[] = [
  {
    name: 'ffmpeg',
    commands: ['ffmpeg'],
    reads:
      "the -progress stream run adds on fd 3 (or time= and frame= on stderr) against the input's Duration:, a lavfi source's duration=, -t/-to, or frame= against -frames:v",
    withProgressPipe: (args) =>
      args.includes('-progress') ? undefined : ['-progress', 'pipe:3', ...args],
    reader: (args, piped) => new FfmpegReader(args, piped),
  },
  {
    name: 'tqdm',
    commands: [],
    reads:
      'tqdm bars (NN%|...| n/total, n it [..]), rich bars (━━━ n/total, ━━━ NN%), Keras (n/total [===>...], Epoch n/total)',
    reader: () => stateless((line) => readBar(line)),
  },
  {
    name: 'ninja',
    commands: ['ninja', 'samu', 'cmake', 'make', 'gmake', 'cargo', 'meson'],
    reads: "ninja's [n/total], cmake's Makefiles' [ NN%], cargo's Building [==> ] n/total",
    reader: () => stateless(readCounter),
  },
  {
    name: 'blender',
    commands: ['blender'],
    reads:
      'frames saved (Saved:) of the range -s/-e/-j -a or -f, plus Fra:N ... | Sample s/S of the frame',
    reader: (args) => new BlenderReader(args),
  },
  {
    name: 'rsync',
    commands: ['rsync'],
    reads: 'with --info=progress2 its NN% of the whole transfer; else files checked (to-chk=R/T)',
    reader: (args) => rsyncReader(args),
  },
  {
    name: 'wget',
    commands: ['wget', 'wget2'],
    reads: 'the NN% of its dots or of its bar (--progress=bar)',
    reader: () => new WgetReader(),
  },
  {
    name: 'curl',
    commands: ['curl'],
    reads: "its meter's % Total column (a size it knows), or -#'s NN%",
    reader: () => curlReader,
  },
  {
    name: 'pip',
    commands: ['pip', 'pip3'],
    reads: 'its download bars (━━━ n/total MB), named after the file',
    reader: () => before(new PipReader()),
  },
  {
    name: 'apt',
    commands: ['apt', 'apt-get'],
    reads:
      'the APT::Status-Fd lines run asks for on fd 3 (download, then install, each to 100%), or Progress: [ NN%]',
    withProgressPipe: (args) =>
      args.some((arg) => arg.includes('APT::Status-Fd'))
        ? undefined
        : ['-o', 'APT::Status-Fd=3', ...args],
    reader: () => aptReader,
  },
  {
    name: 'dpkg',
    commands: ['dpkg'],
    reads: 'its steps (Unpacking, Setting up: two for each .deb on the command line)',
    reader: (args) => new DpkgReader(args),
  },
  {
    name: 'docker',
    commands: ['docker', 'podman'],
    reads:
      'docker pull: each layer half downloaded (Downloading a/b), half extracted, of all layers seen',
    reader: () => new DockerPullReader(),
  },
];

/** The command's name without its directory, `.exe` or Python's version (pip3.11). */
export function commandName(file: string): string {
  const base = file.split(/[\\/]/).at(-1) ?? file;
  return base.replace(/\.exe$/i, '').replace(/(?<=^pip3?)\.\d+$/, '');
}

/** The profile a command's name chooses (`python -m pip` is pip), or undefined. */
export function detectProfile(file: string, args: readonly string[]): ProgressProfile | undefined {
  const name = commandName(file);
  if (/^python[\d.]*$/.test(name) && args[0] === '-m') {
    const module = args[1] === undefined ? '' : commandName(args[1]);
    return PROFILES.find((profile) => profile.commands.includes(module));
  }
  return PROFILES.find((profile) => profile.commands.includes(name));
}

/** The profile of that name, or undefined. */
export function profileNamed(name: string): ProgressProfile | undefined {
  return name === GENERIC_PROFILE.name
    ? GENERIC_PROFILE
    : PROFILES.find((profile) => profile.name === name);
}

export const PROFILE_NAMES: readonly string[] = [
  ...PROFILES.map((profile) => profile.name),
  GENERIC_PROFILE.name,
];

/**
 * The tool's arguments, for its reader: CMD's own when CMD is the tool;
 * behind a shell or a wrapper (`sh -c "ffmpeg -i a.mp4 ..."`, `sudo
 * blender -b ...`), the words after the tool's name, up to the end of its
 * command (`;`, `|`, `&`), quotes removed. A guess, never run: a script that
 * builds its command line elsewhere gives none.
 */
export function toolArguments(
  profile: ProgressProfile,
  file: string,
  args: readonly string[],
): readonly string[] {
  if (profile.commands.includes(commandName(file))) return args;
  const words = args.flatMap((arg) => arg.match(/[;|&]+|"[^"]*"|'[^']*'|[^\s;|&]+/g) ?? []);
  const at = words.findIndex((word) => profile.commands.includes(commandName(word)));
  if (at < 0) return args;
  const rest = words.slice(at + 1);
  const end = rest.findIndex((word) => /^[;|&]+$/.test(word));
  return (end < 0 ? rest : rest.slice(0, end)).map((word) => word.replace(/^(["'])(.*)\1$/, '$2'));
}

/**
 * A profile to suggest when nothing was read: one named by a word of the
 * command line (`sh -c "ffmpeg ..."`), or none.
 */
export function suggestProfile(file: string, args: readonly string[]): ProgressProfile | undefined {
  // Words of a shell script too: `sh -c 'echo "rsync ..."; ffmpeg -i ...'`.
  for (const word of [file, ...args].flatMap((arg) => arg.split(/[\s"'`;|&()<>]+/))) {
    const found = PROFILES.find((profile) => profile.commands.includes(commandName(word)));
    if (found !== undefined) return found;
  }
  return undefined;
}
