/** The C client (clients/c/mcp_progress.h) built into the tests' worker, for Linux and for Windows. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './daemon.js';
import { tool } from './tools.js';

export const cc = tool('cc', { debian: 'gcc', why: 'the C client is built for Linux' });
export const mingw = tool('x86_64-w64-mingw32-gcc', {
  debian: 'gcc-mingw-w64-x86-64',
  why: 'the C client is built for Windows',
});

type Compiler = 'cc' | 'x86_64-w64-mingw32-gcc';

/** Builds test/fixtures/NAME.c, which includes the C client, with `compiler` into `dir`; returns the program's path. */
export function buildCProgram(compiler: Compiler, dir: string, name: string): string {
  const output = join(dir, compiler === 'cc' ? name : `${name}.exe`);
  // Strict C99 with every warning an error: the header must build as its users build it.
  const flags = ['-std=c99', '-Wall', '-Wextra', '-Wpedantic', '-Werror'];
  if (compiler === 'cc') flags.push('-D_POSIX_C_SOURCE=200809L');
  const build = spawnSync(
    compiler,
    [...flags, '-I', join(ROOT, 'clients/c'), '-o', output, join(ROOT, `test/fixtures/${name}.c`)],
    { encoding: 'utf8' },
  );
  if (build.status !== 0) throw new Error(`${compiler} failed: ${build.stderr}`);
  return output;
}

/** Builds test/fixtures/c_worker.c with `compiler` into `dir`; returns the program's path. */
export function buildCWorker(compiler: Compiler, dir: string): string {
  return buildCProgram(compiler, dir, 'c_worker');
}
