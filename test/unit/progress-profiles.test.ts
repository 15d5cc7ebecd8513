/**
 * `run --parse` profiles on the real output of the tools (test/fixtures/parse, made by its
 * capture.sh: each fixture's command is there), fed as `run` feeds them: per stream, as bytes,
 * split anywhere, with the tools' \r redraws and ANSI colours.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  OutputProgress,
  type OutputSource,
  type ParsedProgress,
} from '../../src/cli/progress-parser.js';
import {
  commandName,
  detectProfile,
  GENERIC_PROFILE,
  PROFILE_NAMES,
  PROFILES,
  profileNamed,
  suggestProfile,
} from '../../src/cli/progress-profiles.js';
import { nothingFoundNotice, parsingOf } from '../../src/cli/run-command.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/parse');
const CAPTURE = readFileSync(join(FIXTURES, 'capture.sh'), 'utf8');

interface Replay {
  /** The command as capture.sh ran it (its name chooses the profile unless `profile` says). */
  readonly command: readonly [string, ...string[]];
  readonly profile?: string;
  /** Fixture files by the stream they were captured from; fed in this order. */
  readonly files: Partial<Record<OutputSource, string>>;
  /** The progress pipe was there (run added it, or the capture did as run would). */
  readonly piped?: boolean;
}

/** A small deterministic generator, so that a failing split can be replayed. */
function splitter(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state;
  };
}

/** The values run would publish for this output, each stream's bytes cut by `cut` (default: whole). */
function replay(spec: Replay, cut?: (bytes: Buffer) => Buffer[]): ParsedProgress[] {
  const [file, ...args] = spec.command;
  const profile =
    (spec.profile === undefined ? detectProfile(file, args) : profileNamed(spec.profile)) ??
    GENERIC_PROFILE;
  const values: ParsedProgress[] = [];
  const output = new OutputProgress(profile.reader(args, spec.piped === true), (value) =>
    values.push(value),
  );
  for (const [source, name] of Object.entries(spec.files) as Array<[OutputSource, string]>) {
    const bytes = readFileSync(join(FIXTURES, name));
    const stream = output.stream(source);
    for (const piece of cut === undefined ? [bytes] : cut(bytes)) stream.write(piece);
    stream.end();
  }
  return values;
}

function randomCuts(seed: number, max: number) {
  return (bytes: Buffer): Buffer[] => {
    const next = splitter(seed);
    const pieces: Buffer[] = [];
    for (let at = 0; at < bytes.length; ) {
      const size = 1 + (next() % max);
      pieces.push(bytes.subarray(at, at + size));
      at += size;
    }
    return pieces;
  };
}

const everyByte = (bytes: Buffer): Buffer[] => [...bytes].map((byte) => Buffer.from([byte]));

/** What every profile's stream must be, on every fixture. */
function expectWellFormed(values: ParsedProgress[]): void {
  for (let i = 1; i < values.length; i++)
    expect(values[i]?.progress, JSON.stringify(values.slice(i - 1, i + 1))).toBeGreaterThan(
      values[i - 1]?.progress as number,
    );
  for (const value of values) {
    if (value.total !== undefined) expect(value.progress).toBeLessThanOrEqual(value.total);
    // Colours, cursor moves and redraws are gone from what the host shows.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters.
    expect(value.message ?? '', JSON.stringify(value)).not.toMatch(/[\x00-\x1f\x7f]/);
  }
}

const REPLAYS: Record<string, Replay> = {
  'ffmpeg, the issue command, stderr only': {
    command: [
      'ffmpeg',
      ...'-nostdin -y -f lavfi -i testsrc=duration=20:size=640x360:rate=30 -c:v libx264 -preset veryslow issue.mp4'.split(
        ' ',
      ),
    ],
    files: { stderr: 'ffmpeg-issue.stderr' },
  },
  'ffmpeg, lavfi with the progress pipe': {
    command: [
      'ffmpeg',
      ...'-nostdin -y -progress pipe:3 -f lavfi -i testsrc=duration=5:size=640x360:rate=30 -c:v libx264 -preset veryslow lavfi.mp4'.split(
        ' ',
      ),
    ],
    files: { stderr: 'ffmpeg-lavfi.stderr', progress: 'ffmpeg-lavfi.fd3' },
    piped: true,
  },
  'ffmpeg, a file with a Duration, with the progress pipe': {
    command: [
      'ffmpeg',
      ...'-nostdin -y -progress pipe:3 -i input.mp4 -c:v libx264 -c:a aac file.mp4'.split(' '),
    ],
    files: { stderr: 'ffmpeg-file.stderr', progress: 'ffmpeg-file.fd3' },
    piped: true,
  },
  'ffmpeg -t': {
    command: ['ffmpeg', ...'-nostdin -y -i input.mp4 -t 2.5 -c:v libx264 cut.mp4'.split(' ')],
    files: { stderr: 'ffmpeg-t.stderr' },
  },
  'ffmpeg -frames:v': {
    command: [
      'ffmpeg',
      ...'-nostdin -y -i input.mp4 -frames:v 90 -c:v libx264 frames.mp4'.split(' '),
    ],
    files: { stderr: 'ffmpeg-frames.stderr' },
  },
  'ninja on a pipe': { command: ['ninja', '-j1'], files: { stdout: 'ninja.stdout' } },
  'ninja on a terminal': { command: ['ninja', '-j1'], files: { stdout: 'ninja-tty.stdout' } },
  'cmake --build, Makefiles, coloured': {
    command: ['cmake', '--build', 'make-build', '-j1'],
    files: { stdout: 'cmake-make.stdout' },
  },
  'cmake --build, Ninja': {
    command: ['cmake', '--build', 'ninja-build', '-j1'],
    files: { stdout: 'cmake-ninja.stdout' },
  },
  'cargo build, coloured': {
    command: ['cargo', 'build', '--offline', '--color=always'],
    files: { stderr: 'cargo.stderr' },
  },
  'rsync --info=progress2': {
    command: ['rsync', '-a', '--info=progress2', '--bwlimit=4000', 'src/', 'dst/'],
    files: { stdout: 'rsync-progress2.stdout' },
  },
  'rsync --progress': {
    command: ['rsync', '-a', '--progress', '--bwlimit=8000', 'src/', 'dst2/'],
    files: { stdout: 'rsync-progress.stdout' },
  },
  'wget, dots': { command: ['wget', '--limit-rate=4m'], files: { stderr: 'wget-dots.stderr' } },
  'wget, bar': {
    command: ['wget', '--limit-rate=4m', '--progress=bar:force'],
    files: { stderr: 'wget-bar.stderr' },
  },
  'curl, meter': {
    command: ['curl', '--limit-rate', '1M'],
    files: { stderr: 'curl-meter.stderr' },
  },
  'curl -#': {
    command: ['curl', '--limit-rate', '1M', '-#'],
    files: { stderr: 'curl-bar.stderr' },
  },
  'pip download on a terminal': {
    command: ['/usr/bin/python3', '-m', 'pip', 'download', '--progress-bar', 'on'],
    files: { stdout: 'pip-tty.stdout' },
  },
  'tqdm, nested and a byte bar, coloured': {
    command: ['/usr/bin/python3', 'bars.py'],
    profile: 'tqdm',
    files: { stderr: 'tqdm.stderr' },
  },
  'rich on a terminal': {
    command: ['/usr/bin/python3', 'rich.py'],
    profile: 'tqdm',
    files: { stdout: 'rich-tty.stdout' },
  },
  'Keras (by hand)': {
    command: ['python3', 'train.py'],
    profile: 'tqdm',
    files: { stdout: 'keras.stdout' },
  },
  'dpkg -i': {
    command: ['dpkg', '-i', 'mcp-progress-fixture-a.deb', 'mcp-progress-fixture-b.deb'],
    files: { stdout: 'dpkg.stdout' },
  },
  'apt-get install with APT::Status-Fd=3': {
    command: ['apt-get', 'install', '-y', '-o', 'APT::Status-Fd=3', './a.deb', './b.deb'],
    files: { stdout: 'apt.stdout', progress: 'apt.fd3' },
    piped: true,
  },
  'blender -s 1 -e 3 -a': {
    command: ['blender', '-b', '--factory-startup', '-E', 'CYCLES', '-s', '1', '-e', '3', '-a'],
    files: { stdout: 'blender.stdout' },
  },
  'docker pull (by hand)': {
    command: ['docker', 'pull', 'ubuntu-fixture'],
    files: { stdout: 'docker-pull.stdout' },
  },
};

describe('every fixture', () => {
  it('was made by capture.sh (its command is there) or is said there to be written by hand', () => {
    for (const spec of Object.values(REPLAYS))
      for (const name of Object.values(spec.files)) expect(CAPTURE, name).toContain(name);
  });

  for (const [name, spec] of Object.entries(REPLAYS)) {
    it(`${name}: increasing, clean messages, and the same values however the bytes are split`, () => {
      const whole = replay(spec);
      expect(whole.length, name).toBeGreaterThan(0);
      expectWellFormed(whole);
      expect(replay(spec, everyByte)).toEqual(whole);
      for (const seed of [1, 2, 3, 4, 5]) expect(replay(spec, randomCuts(seed, 97))).toEqual(whole);
    });
  }
});

const progressOf = (values: ParsedProgress[]) => values.map((value) => value.progress);

describe('ffmpeg', () => {
  it('the issue command: time= against the lavfi source duration, 100% only after the last frame, messages say frame and time', () => {
    const values = replay(REPLAYS['ffmpeg, the issue command, stderr only'] as Replay);
    expect(values.length).toBeGreaterThanOrEqual(10);
    expect(values.every((value) => value.total === 20)).toBe(true);
    // Only the summary after the last frame says the encode is done.
    expect(values.filter((value) => value.progress >= 20)).toHaveLength(1);
    expect(values.at(-1)).toEqual({ progress: 20, total: 20, message: 'frame 600, 20 s of 20 s' });
    for (const value of values) expect(value.message).toMatch(/^frame \d+, [\d.]+ s of 20 s$/);
    expect(values[10]).toEqual({ progress: 4.36, total: 20, message: 'frame 206, 4.4 s of 20 s' });
  });

  it('the progress pipe: out_time_us against duration=5 of the lavfi source, progress=end is 100%', () => {
    const values = replay(REPLAYS['ffmpeg, lavfi with the progress pipe'] as Replay);
    expect(values.at(-1)).toEqual({ progress: 5, total: 5, message: 'frame 150, 5 s of 5 s' });
    expect(values.slice(0, -1).every((value) => value.progress < 5 * 0.9)).toBe(true);
    expect(values[1]).toEqual({ progress: 0.333398, total: 5, message: 'frame 85, 0.3 s of 5 s' });
  });

  it("a file's Duration: on stderr is the total of what the pipe says", () => {
    const values = replay(
      REPLAYS['ffmpeg, a file with a Duration, with the progress pipe'] as Replay,
    );
    expect(values.map((value) => value.total)).toEqual([6, 6, 6, 6]);
    expect(values.at(-1)).toEqual({ progress: 6, total: 6, message: 'frame 150, 6 s of 6 s' });
  });

  it('-t of the output caps the length; -frames:v counts frames', () => {
    const cut = replay(REPLAYS['ffmpeg -t'] as Replay);
    expect(cut.every((value) => value.total === 2.5)).toBe(true);
    expect(cut.at(-2)?.progress).toBeLessThan(2.5);
    expect(cut.at(-1)).toEqual({ progress: 2.5, total: 2.5, message: 'frame 63, 2.5 s of 2.5 s' });
    const frames = replay(REPLAYS['ffmpeg -frames:v'] as Replay);
    expect(frames.at(-1)).toEqual({ progress: 90, total: 90, message: 'frame 90 of 90, 3.6 s' });
    expect(frames.at(-2)?.progress).toBeLessThan(90);
  });
});

describe('build tools', () => {
  it('ninja: every step, on a pipe and on a terminal (\\r and ESC[K)', () => {
    const piped = replay(REPLAYS['ninja on a pipe'] as Replay);
    expect(progressOf(piped)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(piped[2]).toEqual({ progress: 3, total: 20, message: 'step 3 of 20: STEP s3' });
    const terminal = replay(REPLAYS['ninja on a terminal'] as Replay);
    expect(progressOf(terminal)).toEqual(Array.from({ length: 21 }, (_, i) => i));
  });

  it("cmake: the Makefiles' [ NN%] (colours stripped) and Ninja's [n/total]", () => {
    const make = replay(REPLAYS['cmake --build, Makefiles, coloured'] as Replay);
    expect(progressOf(make)).toEqual([11, 22, 33, 44, 55, 66, 77, 88, 100]);
    expect(make[0]?.message).toBe('11%: Building C object CMakeFiles/fs.dir/f1.c.o');
    const ninja = replay(REPLAYS['cmake --build, Ninja'] as Replay);
    expect(ninja.at(-1)).toEqual({
      progress: 9,
      total: 9,
      message: 'step 9 of 9: Linking C executable app',
    });
  });

  it('cargo: Building [==> ] n/total, and the crates it builds', () => {
    const values = replay(REPLAYS['cargo build, coloured'] as Replay);
    expect(values.every((value) => value.total === 5)).toBe(true);
    expect(values.at(-1)?.message).toBe('4 of 5 crates built; building app(bin)');
  });
});

describe('transfers and packages', () => {
  it('rsync: the whole transfer with --info=progress2; files checked with --progress', () => {
    const overall = replay(REPLAYS['rsync --info=progress2'] as Replay);
    expect(overall.at(-1)).toEqual({
      progress: 100,
      total: 100,
      message: '100%, 10,000,000 bytes, 6 of 6 files',
    });
    expect(progressOf(overall)).toContain(44);
    const files = replay(REPLAYS['rsync --progress'] as Replay);
    expect(files.map((value) => value.message)).toEqual([
      '2 of 6 files',
      '3 of 6 files',
      '4 of 6 files',
      '5 of 6 files',
      '6 of 6 files',
    ]);
  });

  it('wget: dots and bar; curl: the meter (a known size) and -#', () => {
    const dots = replay(REPLAYS['wget, dots'] as Replay);
    expect(progressOf(dots)).toEqual(Array.from({ length: 101 }, (_, i) => i));
    expect(dots[45]?.message).toBe('wget.bin: 45%');
    const bar = replay(REPLAYS['wget, bar'] as Replay);
    expect(bar[1]).toEqual({ progress: 11, total: 100, message: 'wget.bin: 11% (880.00K)' });
    const meter = replay(REPLAYS['curl, meter'] as Replay);
    expect(meter[0]).toEqual({ progress: 20, total: 100, message: '20% of 7812k (1600k)' });
    expect(meter.at(-1)?.progress).toBe(100);
    expect(replay(REPLAYS['curl -#'] as Replay)).toEqual([
      { progress: 100, total: 100, message: '100.0%' },
    ]);
  });

  it('pip: the download bar in bytes, named after the file', () => {
    const values = replay(REPLAYS['pip download on a terminal'] as Replay);
    expect(values.at(-1)).toEqual({
      progress: 3_000_000,
      total: 3_000_000,
      message: 'Downloading fixture-1.0-py3-none-any.whl: 3.0 of 3.0 MB',
    });
  });

  it('apt-get: the download, then the install, from APT::Status-Fd; dpkg: two steps a .deb', () => {
    const apt = replay(REPLAYS['apt-get install with APT::Status-Fd=3'] as Replay);
    expect(apt[0]).toEqual({
      progress: 0,
      total: 100,
      message: 'download: Retrieving file 1 of 2 (0%)',
    });
    expect(apt.at(-1)).toEqual({
      progress: 188.89,
      total: 200,
      message: 'install: Installed mcp-progress-fixture-b (amd64) (88.89%)',
    });
    // stdout's "(Reading database ... 5%" is dpkg's database, not the install: not read.
    expect(apt.some((value) => value.message?.includes('Reading database'))).toBe(false);
    const dpkg = replay(REPLAYS['dpkg -i'] as Replay);
    expect(dpkg.map((value) => value.message)).toEqual([
      'unpacking mcp-progress-fixture-a (step 1 of 4)',
      'unpacking mcp-progress-fixture-b (step 2 of 4)',
      'setting up mcp-progress-fixture-a (step 3 of 4)',
      'setting up mcp-progress-fixture-b (step 4 of 4)',
    ]);
  });

  it('docker pull: layers half downloaded, half extracted', () => {
    const values = replay(REPLAYS['docker pull (by hand)'] as Replay);
    expect(values.every((value) => value.total === 3)).toBe(true);
    expect(values.at(-1)?.progress).toBe(3);
    expect(values.at(-1)?.message).toBe('3 of 3 layers; 5d4c3b2a1f0e: Pull complete');
  });
});

describe('bars and renders', () => {
  it('tqdm: nested epochs and batches, then a byte bar that weighs as much as the epochs (not added to them)', () => {
    const values = replay(REPLAYS['tqdm, nested and a byte bar, coloured'] as Replay);
    expect(values.slice(0, 16).every((value) => value.total === 3)).toBe(true);
    expect(values[1]?.message).toBe('epochs 0/3 · batch 1/5');
    expect(values.slice(16).every((value) => value.total === 6)).toBe(true);
    expect(values.at(-1)).toEqual({ progress: 6, total: 6, message: 'download 4000000/4000000' });
  });

  it('rich and Keras', () => {
    const rich = replay(REPLAYS['rich on a terminal'] as Replay);
    expect(rich.at(-1)).toEqual({ progress: 100, total: 100, message: 'Rendering' });
    const keras = replay(REPLAYS['Keras (by hand)'] as Replay);
    expect(keras.every((value) => value.total === 2)).toBe(true);
    expect(keras.at(-1)).toEqual({ progress: 2, total: 2, message: 'epoch 2/2' });
    expect(keras[1]?.message).toBe('epoch 0/2 · step 1/32');
  });

  it('Blender: frames of -s/-e, each with its samples, a frame done when saved', () => {
    const values = replay(REPLAYS['blender -s 1 -e 3 -a'] as Replay);
    expect(values.every((value) => value.total === 3)).toBe(true);
    expect(
      values.filter((value) => Number.isInteger(value.progress) && value.progress > 0),
    ).toEqual([
      { progress: 1, total: 3, message: '1 of 3 frames rendered (frame 1)' },
      { progress: 2, total: 3, message: '2 of 3 frames rendered (frame 2)' },
      { progress: 3, total: 3, message: '3 of 3 frames rendered (frame 3)' },
    ]);
    expect(values[1]).toEqual({
      progress: 0.0625,
      total: 3,
      message: 'frame 1 (1 of 3), sample 1/16',
    });
  });
});

describe('the generic reader on tool output', () => {
  it("refuses every false reading of the issue's ffmpeg output: SAR=1/1, the muxing overhead, x264's statistics", () => {
    expect(
      replay({
        ...(REPLAYS['ffmpeg, the issue command, stderr only'] as Replay),
        profile: 'generic',
      }),
    ).toEqual([]);
  });

  it('still reads what has a bar or a counter: ninja, tqdm, cmake', () => {
    for (const name of [
      'ninja on a pipe',
      'tqdm, nested and a byte bar, coloured',
      'cmake --build, Makefiles, coloured',
    ])
      expect(progressOf(replay({ ...(REPLAYS[name] as Replay), profile: 'generic' }))).toEqual(
        progressOf(replay(REPLAYS[name] as Replay)),
      );
  });
});

describe('choosing a profile', () => {
  it("by the command's name, without its directory, .exe or Python's version", () => {
    expect(detectProfile('/usr/bin/ffmpeg', [])?.name).toBe('ffmpeg');
    expect(detectProfile('C:\\ffmpeg\\bin\\ffmpeg.exe', [])?.name).toBe('ffmpeg');
    expect(detectProfile('pip3.11', ['install', 'x'])?.name).toBe('pip');
    expect(detectProfile('python3', ['-m', 'pip', 'install', 'x'])?.name).toBe('pip');
    expect(detectProfile('python3', ['train.py'])).toBeUndefined();
    expect(detectProfile('apt-get', ['install'])?.name).toBe('apt');
    expect(detectProfile('cmake', ['--build', '.'])?.name).toBe('ninja');
    expect(commandName('/opt/blender-4.2/blender')).toBe('blender');
  });

  it('every profile has a name --parse=NAME takes, and says what it reads', () => {
    for (const name of PROFILE_NAMES) expect(profileNamed(name)?.name).toBe(name);
    for (const profile of PROFILES) expect(profile.reads.length).toBeGreaterThan(20);
    expect(profileNamed('nope')).toBeUndefined();
  });

  it('adds the progress pipe to ffmpeg and apt-get, unless the command line chose one', () => {
    const ffmpeg = profileNamed('ffmpeg');
    expect(ffmpeg?.withProgressPipe?.(['-i', 'a.mp4', 'b.mp4'])).toEqual([
      '-progress',
      'pipe:3',
      '-i',
      'a.mp4',
      'b.mp4',
    ]);
    expect(
      ffmpeg?.withProgressPipe?.(['-progress', 'log.txt', '-i', 'a.mp4', 'b.mp4']),
    ).toBeUndefined();
    expect(profileNamed('apt')?.withProgressPipe?.(['install', 'x'])).toEqual([
      '-o',
      'APT::Status-Fd=3',
      'install',
      'x',
    ]);
  });

  it('adds the pipe only when CMD is the tool itself, not a shell or sudo in front of it', () => {
    const args = ['-i', 'a.mp4', 'b.mp4'];
    expect(parsingOf({ file: 'ffmpeg', args, parseProfile: undefined })).toMatchObject({
      args: ['-progress', 'pipe:3', ...args],
      piped: true,
      chosen: true,
    });
    expect(parsingOf({ file: '/usr/bin/ffmpeg', args, parseProfile: 'ffmpeg' }).piped).toBe(true);
    const script = ['-c', 'ffmpeg -i a.mp4 b.mp4'];
    expect(parsingOf({ file: 'sh', args: script, parseProfile: 'ffmpeg' })).toMatchObject({
      args: script,
      // The reader still learns ffmpeg's own arguments from the script.
      toolArgs: args,
      piped: false,
      chosen: true,
    });
    expect(
      parsingOf({
        file: 'sh',
        args: ['-c', `echo go; ffmpeg -t 5 -i "my file.mov" out.mp4 | tee log; echo done`],
        parseProfile: 'ffmpeg',
      }).toolArgs,
    ).toEqual(['-t', '5', '-i', 'my file.mov', 'out.mp4']);
    const sudo = ['apt-get', 'install', 'x'];
    expect(parsingOf({ file: 'sudo', args: sudo, parseProfile: 'apt' })).toMatchObject({
      args: sudo,
      piped: false,
    });
    expect(parsingOf({ file: 'sh', args: script, parseProfile: undefined })).toMatchObject({
      args: script,
      piped: false,
      chosen: false,
    });
  });

  it('when nothing is read: one line naming the profile to try', () => {
    const generic = GENERIC_PROFILE;
    expect(
      nothingFoundNotice(
        { file: 'sh', args: ['-c', 'ffmpeg -i a.mp4 b.mp4'] },
        generic,
        false,
        true,
      ),
    ).toBe("mcp-progress run --parse: no progress found in sh's output yet; try --parse=ffmpeg\n");
    expect(suggestProfile('make', [])?.name).toBe('ninja');
    expect(nothingFoundNotice({ file: 'sh', args: ['-c', 'echo'] }, generic, false, false)).toBe(
      `mcp-progress run --parse: no progress found in sh's output; name a profile with --parse=NAME (${PROFILE_NAMES.join(', ')})\n`,
    );
    const ffmpeg = profileNamed('ffmpeg') ?? generic;
    expect(nothingFoundNotice({ file: 'ffmpeg', args: [] }, ffmpeg, true, false)).toMatch(
      /^mcp-progress run --parse=ffmpeg: no progress found in ffmpeg's output \(this profile reads .*\); try --parse=generic\n$/,
    );
  });
});
