/**
 * What the rate/ETA estimator adds to the router's hot path: ns per accepted
 * progress frame in the pure router (src/daemon/router.ts, which now updates
 * each stream's estimator), against the estimator's update alone on the same
 * values, in one process: best of 5 rounds each. The share is what rate and
 * ETA cost of the router's work per frame; the socket, framing and checks
 * around it (bench ingest) make the share of the whole path smaller still.
 *
 *   npm run build && node bench/rate-estimate.ts
 */
const DIST = new URL('../dist/daemon/', import.meta.url).href;
const { Router, DEFAULT_ROUTER_OPTIONS } = (await import(
  `${DIST}router.js`
)) as typeof import('../src/daemon/router.ts');
const { RateEstimator } = (await import(
  `${DIST}rate-estimator.js`
)) as typeof import('../src/daemon/rate-estimator.ts');

const STREAMS = 64;
const FRAMES = 200_000;
const ROUNDS = 5;

/** ns per frame of `run`, which handles FRAMES frames, best of ROUNDS. */
function best(run: (round: number) => void): number {
  let fastest = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    run(round);
    fastest = Math.min(fastest, ((performance.now() - started) * 1e6) / FRAMES);
  }
  return fastest;
}

let delivered = 0;
const router = best((round) => {
  const table = new Router({ ...DEFAULT_ROUTER_OPTIONS, maxStreamsPerConnection: STREAMS }, () => {
    delivered++;
  });
  for (let i = 0; i < FRAMES; i++) {
    const outcome = table.publish(
      1,
      { v: 1, progressToken: `job-${round}-${i % STREAMS}`, progress: i, total: FRAMES },
      i,
    );
    if (!outcome.ok) throw new Error(outcome.message);
  }
});
const estimators = Array.from({ length: STREAMS }, () => new RateEstimator());
const estimator = best(() => {
  for (const one of estimators.splice(0)) void one;
  for (let s = 0; s < STREAMS; s++) estimators.push(new RateEstimator());
  for (let i = 0; i < FRAMES; i++)
    (estimators[i % STREAMS] as InstanceType<typeof RateEstimator>).observe(i, i);
});
process.stdout.write(
  `rate/ETA per accepted frame, ns (best of ${ROUNDS}): router.publish ${router.toFixed(1)}, of which the estimator ${estimator.toFixed(1)} (${((estimator / router) * 100).toFixed(1)}%)\n`,
);
if (delivered !== 0) throw new Error('nobody subscribed, yet something was delivered');
