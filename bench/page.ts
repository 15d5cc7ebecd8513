/**
 * `npm run bench:page`: the live page at scale, in the real browser (Debian's chromium, driven
 * by puppeteer-core): JOBS live jobs, RATE updates per second in total spread over them.
 * Measures the time from navigation to the first paint and to every row drawn, the frame
 * times while the updates arrive (requestAnimationFrame intervals and long tasks), and the
 * tab's memory (JS heap and DOM nodes from the DevTools protocol).
 *
 *   npm run bench:page [-- --jobs 2000 --rate 100 --seconds 10]
 */
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';
import { BIN, scratchDir, startDaemonProcess, stopProcess } from './lib/systems.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '2000' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '10' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
  },
});
const JOBS = Number(values.jobs);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);

const runtimeDir = scratchDir('page');
const { server, info } = await startDaemonProcess(
  BIN,
  { execArgv: [], minIntervalMs: 100 },
  runtimeDir,
  ['--log-level', 'warn'],
  'daemon',
);
const worker = connect({ path: info.socket });
await new Promise<void>((resolve) => worker.once('connect', () => resolve()));
worker.on('data', () => {});
const frame = (data: object) =>
  worker.write(`${JSON.stringify({ type: 'progress', data: { v: 1, ...data } })}\f`);
const progress = new Array<number>(JOBS).fill(0);
for (let i = 0; i < JOBS; i++) {
  progress[i] = 1;
  frame({ progressToken: `job-${i}`, progress: 1, total: 1000, message: `job ${i}: step 1` });
}

const url = execFileSync(process.execPath, [BIN, 'open', '--print', '--runtime-dir', runtimeDir], {
  encoding: 'utf8',
}).trim();
const browser = await puppeteer.launch({
  executablePath: values.chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const started = performance.now();
  await page.goto(url);
  await page.waitForFunction(
    (jobs) => document.querySelectorAll('#running .row:not(.head)').length === jobs,
    { timeout: 120_000 },
    JOBS,
  );
  const allRows = performance.now() - started;
  const paint = await page.evaluate(() =>
    Object.fromEntries(
      performance.getEntriesByType('paint').map((entry) => [entry.name, entry.startTime]),
    ),
  );
  // Frame times and long tasks while the updates arrive.
  await page.evaluate(() => {
    const w = window as unknown as { frames_: number[]; longTasks_: number[] };
    w.frames_ = [];
    w.longTasks_ = [];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) w.longTasks_.push(entry.duration);
    }).observe({ type: 'longtask', buffered: false });
    let last = performance.now();
    const tick = (now: number) => {
      w.frames_.push(now - last);
      last = now;
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const every = 1000 / RATE;
  const end = performance.now() + SECONDS * 1000;
  let next = performance.now();
  let sent = 0;
  while (performance.now() < end) {
    const i = sent % JOBS;
    progress[i] = (progress[i] ?? 0) + 1;
    frame({
      progressToken: `job-${i}`,
      progress: progress[i],
      message: `job ${i}: step ${progress[i]}`,
    });
    sent++;
    next += every;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
  }
  const { frames, longTasks } = await page.evaluate(() => {
    const w = window as unknown as { frames_: number[]; longTasks_: number[] };
    return { frames: w.frames_.slice(1), longTasks: w.longTasks_ };
  });
  const client = await page.createCDPSession();
  await client.send('HeapProfiler.collectGarbage');
  const { metrics } = await client.send('Performance.getMetrics').catch(async () => {
    await client.send('Performance.enable');
    return client.send('Performance.getMetrics');
  });
  await client.send('Performance.enable');
  const measured = (await client.send('Performance.getMetrics')).metrics;
  const metric = (name: string) =>
    (measured.find((m) => m.name === name) ?? metrics.find((m) => m.name === name))?.value ?? 0;
  frames.sort((a, b) => a - b);
  const quantile = (q: number) =>
    frames[Math.min(frames.length - 1, Math.floor(q * frames.length))] ?? 0;
  const result = {
    jobs: JOBS,
    updatesPerSecond: Math.round(sent / SECONDS),
    firstPaintMs: Math.round(paint['first-paint'] ?? 0),
    firstContentfulPaintMs: Math.round(paint['first-contentful-paint'] ?? 0),
    allRowsDrawnMs: Math.round(allRows),
    frameMs: {
      p50: +quantile(0.5).toFixed(1),
      p95: +quantile(0.95).toFixed(1),
      max: +quantile(1).toFixed(1),
    },
    longTasks: { count: longTasks.length, maxMs: Math.round(Math.max(0, ...longTasks)) },
    jsHeapUsedMiB: +(metric('JSHeapUsedSize') / 1048576).toFixed(1),
    domNodes: metric('Nodes'),
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} finally {
  await browser.close();
  worker.destroy();
  await stopProcess(server.child);
}
