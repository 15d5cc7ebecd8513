/**
 * Outside programs the tests use (socat, tmux, nats-server, chromium, wine, ...). Where one is
 * missing a developer's run skips its tests and says so once; under CI (`CI` set) nothing skips:
 * the tests run and fail with a message naming the Debian package that brings the tool.
 *
 *   const socat = tool('socat', { debian: 'socat', probe: ['socat', '-V'] });
 *   describe.skipIf(socat.skip)('printf | socat', () => {
 *     beforeAll(() => socat.require());
 *     ...
 */
import { spawnSync } from 'node:child_process';

export interface ToolSpec {
  /** The Debian package that installs it (named in the failure). */
  readonly debian: string;
  /** A command that exits 0 when the tool works; default: `sh -c 'command -v NAME'`. */
  readonly probe?: readonly [string, ...string[]];
  /** Overrides the probe: a check that needs more than one command (root, a namespace). */
  readonly check?: () => boolean;
  /** Why the tests need it, for the messages. */
  readonly why?: string;
  /** The tests also need root (another user, network namespaces): not root counts as missing. */
  readonly root?: boolean;
}

export interface Tool {
  readonly name: string;
  readonly available: boolean;
  /** Whether tests that need it should be skipped: never under CI. */
  readonly skip: boolean;
  /** Throws, naming the package, when the tool is missing: call it in the tests' beforeAll. */
  require(): void;
}

/** True when the run is CI's: a missing tool then fails instead of skipping. */
export const UNDER_CI = (process.env.CI ?? '') !== '' && process.env.CI !== 'false';

const IS_ROOT = process.getuid?.() === 0;

export function tool(name: string, spec: ToolSpec): Tool {
  const rootMissing = spec.root === true && !IS_ROOT;
  const available = !rootMissing && probe(name, spec);
  const purpose = spec.why === undefined ? '' : ` (${spec.why})`;
  const message = rootMissing
    ? `${name} needs root${purpose}, and this run is uid ${process.getuid?.()}: run the tests as root, as .ci/run does`
    : `${name} is not available${purpose}: apt-get install ${spec.debian}`;
  if (!available && !UNDER_CI)
    console.warn(`${message}; its tests are skipped (under CI they fail)`);
  return {
    name,
    available,
    skip: !available && !UNDER_CI,
    require() {
      if (!available) throw new Error(message);
    },
  };
}

/** Tests that need root and no package (chown to another uid, say): not root skips, or fails under CI. */
export function rootOnly(name: string, why: string): Tool {
  return tool(name, { debian: 'none', root: true, why, check: () => true });
}

function probe(name: string, spec: ToolSpec): boolean {
  if (spec.check !== undefined) return spec.check();
  const [command, ...args] = spec.probe ?? ['sh', '-c', `command -v ${name}`];
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}
