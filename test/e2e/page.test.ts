/// <reference lib="dom" />
/**
 * The live page in a real browser: Debian's chromium, headless, driven by puppeteer-core (no
 * downloaded browser), against the real daemon and real worker processes. The run saves the
 * screenshot that README shows (docs/page.png).
 */
import { readFileSync } from 'node:fs';
import { get, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_HEADERS } from '../../src/daemon/page-headers.js';
import { cleanupAll, ROOT, type RunningDaemon, startDaemon, tempDir } from '../helpers/daemon.js';
import { type DrivenWorker, killWorkers, nodeWorker } from '../helpers/driven-worker.js';
import { connectGateway } from '../helpers/gateway.js';
import { httpAsk, pageTicketUrl } from '../helpers/page.js';
import { tool } from '../helpers/tools.js';

export const CHROMIUM_PATH = '/usr/bin/chromium';
const chromium = tool('chromium', {
  debian: 'chromium',
  probe: [CHROMIUM_PATH, '--version'],
  why: 'the live page is tested in a real browser',
});

const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';

let runtimeDir: string;
let port: number;
let daemon: RunningDaemon;
let browser: Browser;
let page: Page;
let base: string;

async function worker(token: string): Promise<DrivenWorker> {
  const started = nodeWorker({
    MCP_PROGRESS_SOCKET: daemon.info.socket,
    MCP_PROGRESS_TOKEN: token,
  });
  await started.next((event) => event.event === 'ready', 'ready');
  return started;
}

async function update(driven: DrivenWorker, values: Record<string, unknown>): Promise<void> {
  driven.send({ update: values });
  await driven.next((event) => event.event === 'ok', 'ok');
}

async function finish(driven: DrivenWorker, status: string, message?: string): Promise<void> {
  driven.send({ done: status, message });
  await driven.next((event) => event.event === 'done', 'done');
}

/** The selector of a job's row: its token as JSON in data-token. */
const row = (token: string) => `.row[data-token='${JSON.stringify(token)}']`;

/** Waits until the row's cell shows exactly `text`. */
async function cellShows(token: string, cell: string, text: string): Promise<void> {
  await page.waitForFunction(
    (selector, expected) => document.querySelector(selector)?.textContent === expected,
    { timeout: 10_000 },
    `${row(token)} .${cell}`,
    text,
  );
}

/** The page's own headers (CSP, framing, referrer, ...), on a response of it. */
function expectPageHeaders(headers: IncomingHttpHeaders, what: string): void {
  for (const [name, value] of Object.entries(PAGE_HEADERS))
    expect(headers[name], `${what}: ${name}`).toBe(value);
}

/** The headers of a response that streams (the page's feed), and then the request is dropped. */
function headersOf(url: string, headers: Record<string, string>): Promise<IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const asked = get(url, { headers }, (response) => {
      resolve(response.headers);
      asked.destroy();
    });
    asked.on('error', reject);
  });
}

describe.skipIf(chromium.skip)('the live page in chromium', () => {
  beforeAll(async () => {
    chromium.require();
    runtimeDir = tempDir();
    // A port of the daemon's choosing (a port picked free beforehand can be taken meanwhile);
    // the restart below reuses it, as a browser tab needs the same origin.
    daemon = await startDaemon(['--port', '0'], runtimeDir);
    port = Number(new URL(daemon.info.url).port);
    base = `http://127.0.0.1:${port}`;
    browser = await puppeteer.launch({
      executablePath: CHROMIUM_PATH,
      headless: true,
      // As root (CI) chromium has no sandbox; the page is ours and loopback only.
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 640 });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    killWorkers();
    await daemon?.stop();
    cleanupAll();
  });

  it('opens with the one-time URL, which leaves the address bar and a cookie behind', async () => {
    const url = await pageTicketUrl(runtimeDir);
    expect(url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/\\?ticket=`));
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('requestfailed', (request) => problems.push(`failed ${request.url()}`));
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    await page.goto(url);
    expect(page.url()).toBe(`${base}/`);
    await page.waitForFunction(() => document.getElementById('connection')?.textContent === 'live');
    const [cookie] = await browser.cookies();
    expect(cookie).toMatchObject({
      name: `mcp_progress_page_${port}`,
      httpOnly: true,
      sameSite: 'Strict',
    });
    // The script cannot read the cookie, and the ticket is gone from the history.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    // Nothing from anywhere else: every request went to the daemon.
    expect(requested.every((address) => address.startsWith(`${base}/`))).toBe(true);
    expect(problems).toEqual([]);
    // The same URL works once.
    expect((await httpAsk(url)).status).toBe(401);
  });

  it('a row appears when a worker starts, the bar moves, done shows', async () => {
    const job = await worker('render-1');
    await update(job, { progress: 1, total: 10, message: 'frame 1' });
    await page.waitForSelector(row('render-1'));
    await cellShows('render-1', 'count', '1/10');
    await cellShows('render-1', 'state', 'running');
    await update(job, { progress: 5, total: 10, message: 'frame 5' });
    await cellShows('render-1', 'count', '5/10');
    await cellShows('render-1', 'percent', '50%');
    await cellShows('render-1', 'message', 'frame 5');
    // Two values at two instants: the daemon's rate and ETA reach their columns.
    await page.waitForFunction(
      (selector) => {
        const text = (name: string) => document.querySelector(`${selector} .${name}`)?.textContent;
        return /\/s$/.test(text('rate') ?? '') && /\d+ (s|min|h)/.test(text('eta') ?? '');
      },
      { timeout: 20_000 },
      row('render-1'),
    );
    expect(
      await page.$eval(`${row('render-1')} .fill`, (fill) => (fill as HTMLElement).style.width),
    ).toBe('50%');
    expect(
      await page.$eval(`${row('render-1')} .bar`, (bar) => bar.getAttribute('aria-valuenow')),
    ).toBe('50');
    await finish(job, 'ok', 'rendered');
    await cellShows('render-1', 'state', 'done: ok');
    expect(await page.$(`#recent ${row('render-1')}`)).not.toBeNull();
    expect(await page.$(`#running ${row('render-1')}`)).toBeNull();
  });

  it('renders a hostile message as text: no script runs, no element is made', async () => {
    const job = await worker('hostile');
    await update(job, { progress: 1, message: HOSTILE });
    await cellShows('hostile', 'message', HOSTILE);
    expect(await page.$eval(`${row('hostile')} .message`, (cell) => cell.children.length)).toBe(0);
    expect(await page.evaluate(() => document.querySelectorAll('img').length)).toBe(0);
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
    await finish(job, 'error', HOSTILE);
    await cellShows('hostile', 'state', 'done: error');
    await cellShows('hostile', 'message', HOSTILE);
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
  });

  it('a confirmed cancel reaches the worker and the row shows the outcome', async () => {
    const job = await worker('train-7');
    await update(job, { progress: 3, total: 100, message: 'epoch 3' });
    await page.waitForSelector(`${row('train-7')} button:not([hidden])`);
    const dialogs: string[] = [];
    page.once('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    await page.click(`${row('train-7')} button`);
    const cancel = await job.next((event) => event.event === 'cancel', 'the cancel');
    expect(cancel.reason).toBe('cancelled from the page');
    expect(dialogs).toEqual(['Cancel "train-7"? Its worker is told to stop.']);
    await cellShows('train-7', 'outcome', 'cancel sent to 1 worker');
    await finish(job, 'cancelled', 'stopped at epoch 3');
    await cellShows('train-7', 'state', 'done: cancelled');
  });

  it('refuses a request without the cookie, with a foreign Origin or a foreign Host', async () => {
    const [cookie] = await browser.cookies();
    const withCookie = `${cookie?.name}=${cookie?.value}`;
    const own = { host: `127.0.0.1:${port}` };
    for (const path of ['/', '/events', '/page.js']) {
      const bare = await httpAsk(`${base}${path}`, { headers: own });
      expect(bare.status, path).toBe(401);
      expect(bare.body).toContain('mcp-progress open');
      expectPageHeaders(bare.headers, `401 of ${path}`);
    }
    // A page of another origin (another port of localhost is one) gets none of them, even where
    // the browser sends it the cookie, nor can it redeem a ticket.
    const ticket = new URL(await pageTicketUrl(runtimeDir));
    for (const path of ['/', '/events', '/page.js', `/${ticket.search}`]) {
      const foreign = await httpAsk(`${base}${path}`, {
        headers: { ...own, cookie: withCookie, origin: 'http://localhost:1' },
      });
      expect(foreign.status, path).toBe(403);
      expect(foreign.body).toContain('Origin http://localhost:1 is not allowed');
      expectPageHeaders(foreign.headers, `403 of ${path}`);
    }
    const cancel = (headers: Record<string, string>) =>
      httpAsk(`${base}/cancel`, {
        method: 'POST',
        headers: { ...own, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ progressToken: 'train-7' }),
      });
    const refusals = [
      { status: 401, answer: await cancel({ origin: base }) },
      { status: 403, answer: await cancel({ cookie: withCookie, origin: 'http://evil.example' }) },
      { status: 403, answer: await cancel({ cookie: withCookie }) },
      {
        status: 415,
        answer: await cancel({ cookie: withCookie, origin: base, 'content-type': 'text/plain' }),
      },
      { status: 200, answer: await cancel({ cookie: withCookie, origin: base }) },
    ];
    for (const { status, answer } of refusals) {
      expect(answer.status).toBe(status);
      expectPageHeaders(answer.headers, `${status} of /cancel`);
    }
    expect(refusals[1]?.answer.body).toContain('Origin http://evil.example is not allowed');
    // What it serves with the cookie carries them too, the feed of /events included.
    expectPageHeaders(
      (await httpAsk(`${base}/page.js`, { headers: { ...own, cookie: withCookie } })).headers,
      '/page.js',
    );
    expectPageHeaders(await headersOf(`${base}/events`, { ...own, cookie: withCookie }), '/events');
    const rebound = await httpAsk(`${base}/`, {
      headers: { host: `evil.example:${port}`, cookie: withCookie },
    });
    expect(rebound.status).toBe(421);
    // A page of another origin in the same browser: its cancel is refused, its read is opaque.
    const other = await browser.newPage();
    await other.goto(`http://localhost:${port}/`);
    expect(await other.evaluate(() => document.body.textContent)).toContain('mcp-progress open');
    const crossSite = await other.evaluate(async (target) => {
      try {
        const response = await fetch(`${target}/cancel`, {
          method: 'POST',
          credentials: 'include',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ progressToken: 'train-7' }),
        });
        return `status ${response.status}`;
      } catch (error) {
        return `blocked: ${(error as Error).name}`;
      }
    }, base);
    expect(crossSite).toMatch(/^blocked/);
    await other.close();
  });

  it('counts its stream in /metrics as a page session', async () => {
    const metrics = await httpAsk(`${base}/metrics`, {
      headers: { host: `127.0.0.1:${port}`, authorization: `Bearer ${daemon.info.secret}` },
    });
    expect(metrics.body).toMatch(/^mcp_progress_page_sessions 1$/m);
  });

  it('shows why the daemon refuses its stream (at --max-sessions), and goes live once a place frees', async () => {
    // A daemon of its own, with one place, which a WebSocket session holds.
    const fullDir = tempDir();
    const full = await startDaemon(['--port', '0', '--max-sessions', '1'], fullDir);
    const holder = await connectGateway(full.info);
    const tab = await browser.newPage();
    try {
      await tab.goto(await pageTicketUrl(fullDir));
      // The first thing it says once its stream was answered.
      const said = await tab.waitForFunction(
        () => {
          const text = document.getElementById('connection')?.textContent;
          return text !== 'connecting…' ? text : undefined;
        },
        { timeout: 15_000 },
      );
      expect(await said.jsonValue()).toMatch(
        /^refused: the daemon serves at most 1 sessions of all kinds together \(--max-sessions\): .*\(too_many_sessions\); retrying$/,
      );
      expect(await tab.$eval('#connection', (status) => status.className)).toBe('refused');
      holder.ws.close();
      await tab.waitForFunction(
        () => {
          const status = document.getElementById('connection');
          return status?.textContent === 'live' && !status.classList.contains('refused');
        },
        { timeout: 30_000 },
      );
    } finally {
      await tab.close();
      holder.ws.close();
      await full.stop();
    }
  });

  it('resumes after a daemon restart, on the same cookie', async () => {
    const job = await worker('long-run');
    await update(job, { progress: 3, total: 10, message: 'before the restart' });
    await cellShows('long-run', 'count', '3/10');
    // A job whose worker is gone: the old daemon still lists it (abandon grace), the new one not.
    const gone = await worker('only-before');
    await update(gone, { progress: 1, message: 'its worker dies' });
    await page.waitForSelector(row('only-before'));
    gone.child.kill('SIGKILL');
    await gone.exit();
    expect(await daemon.stop()).toBe(0);
    await page.waitForFunction(() => document.getElementById('connection')?.textContent !== 'live');
    daemon = await startDaemon(['--port', String(port)], runtimeDir);
    // The publisher reconnects by itself; its next value reaches the page over the new stream.
    await page.waitForFunction(
      () => document.getElementById('connection')?.textContent === 'live',
      {
        timeout: 15_000,
      },
    );
    await update(job, { progress: 4, total: 10, message: 'after the restart' });
    await cellShows('long-run', 'count', '4/10');
    await cellShows('long-run', 'message', 'after the restart');
    // The new daemon's snapshot replaced the old daemon's jobs.
    await page.waitForFunction(
      (selector) => document.querySelector(selector) === null,
      {},
      row('only-before'),
    );
    await finish(job, 'ok');
  }, 60_000);

  // The README's picture is rewritten only when asked (UPDATE_SCREENSHOT=1 npx vitest run
  // test/e2e/page.test.ts), so that a test run leaves the checkout as it found it.
  it('takes a screenshot of a few jobs (docs/page.png with UPDATE_SCREENSHOT=1)', async () => {
    const jobs = await Promise.all(
      ['blender-shot-042', 'train-resnet50', 'ffmpeg-transcode', 'nightly-build'].map(worker),
    );
    const [render, train, transcode, build] = jobs as [
      DrivenWorker,
      DrivenWorker,
      DrivenWorker,
      DrivenWorker,
    ];
    await update(render, { progress: 87, total: 240, message: 'frame 87/240, 1.9 s per frame' });
    await update(train, { progress: 7, total: 20, message: 'epoch 7: loss 0.412' });
    await update(transcode, { progress: 1, message: 'probing streams' });
    await update(build, { progress: 412, total: 412, message: 'linked' });
    await finish(build, 'ok', 'all 412 targets built');
    await cellShows('nightly-build', 'state', 'done: ok');
    await cellShows('blender-shot-042', 'count', '87/240');
    await page.emulateMediaFeatures([{ name: 'prefers-reduced-motion', value: 'reduce' }]);
    const path =
      process.env.UPDATE_SCREENSHOT === '1'
        ? join(ROOT, 'docs/page.png')
        : join(tempDir(), 'page.png');
    await page.screenshot({ path });
    // A PNG of the page's size: the signature, then the IHDR chunk's width and height.
    const png = readFileSync(path);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]));
    const viewport = page.viewport();
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([
      viewport?.width,
      viewport?.height,
    ]);
  });
});
