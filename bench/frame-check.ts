/**
 * The worker socket's per-frame check, the hand-written guard the daemon runs
 * (src/protocol/frame-guards.ts), against zod's compiled check of the same
 * schema (what the daemon ran before), on the same typical progress frames in
 * the same process: ns per frame, best of 5 rounds each.
 *
 *   npm run build && node bench/frame-check.ts
 */
import * as z from 'zod';

const DIST = new URL('../dist/protocol/', import.meta.url).href;
const { isProgressFrame } = (await import(
  `${DIST}frame-guards.js`
)) as typeof import('../src/protocol/frame-guards.ts');
const { progressFrameSchema } = (await import(
  `${DIST}frames.js`
)) as typeof import('../src/protocol/frames.ts');

const compiled = z.compile(progressFrameSchema);
const frames: unknown[] = Array.from({ length: 1000 }, (_, i) =>
  JSON.parse(
    `{"v":1,"progressToken":"job-${i % 7}","progress":${i},"total":100000,"message":"step ${i} of 100000","seq":${i}}`,
  ),
);
const ROUNDS = 5;
const PASSES = 2000;

function nsPerFrame(check: (frame: unknown) => boolean): number {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    let accepted = 0;
    const started = performance.now();
    for (let pass = 0; pass < PASSES; pass++)
      for (const frame of frames) if (check(frame)) accepted++;
    const ns = ((performance.now() - started) * 1e6) / (PASSES * frames.length);
    if (accepted !== PASSES * frames.length) throw new Error('a good frame was refused');
    best = Math.min(best, ns);
  }
  return best;
}

const zod = nsPerFrame((frame) => z.validate(compiled, frame));
const guard = nsPerFrame(isProgressFrame);
process.stdout.write(
  `progress frame check, ns per frame (best of ${ROUNDS}): hand-written ${guard.toFixed(1)}, zod compiled ${zod.toFixed(1)}, ratio ${(guard / zod).toFixed(2)}\n`,
);
