// The live page of mcp-progress: one EventSource (GET /events) feeds a model of every job; the
// DOM is updated on animation frames, only for rows that changed, and not at all while the tab
// is hidden. Worker text is untrusted: it only ever goes into textContent, never into HTML.
// The page computes no rate or ETA: it shows the daemon's `rate` and `etaMs` when they are there.

const SVG = 'http://www.w3.org/2000/svg';
const SPARK_WINDOW_MS = 60_000;
const STATE_LABELS = {
  active: 'running',
  waiting: 'waiting',
  ok: 'done: ok',
  error: 'done: error',
  cancelled: 'done: cancelled',
  abandoned: 'done: abandoned',
};

/** Jobs by key (the token's type and value: "7" and 7 are different jobs). */
const jobs = new Map();
/** The DOM of each job's row, made once and updated in place. */
const rows = new Map();
/** Keys whose row must be redrawn at the next frame. */
const dirty = new Set();
/** Rates the daemon gave per job over the last minute, for the sparkline. */
const rates = new Map();
/** While a snapshot arrives in chunks: the jobs it has not named yet (they go at its end). */
let unseen;
let lastEventId = '';
let frameRequested = false;
let source;
let retryMs = 1000;

const running = document.getElementById('running');
const recent = document.getElementById('recent');
const COLUMNS = [
  'Job',
  'Progress',
  'n/total',
  '%',
  'Rate',
  'ETA',
  'Elapsed',
  'Message',
  'Last minute',
  'State',
  'Actions',
];
// Rows are a grid of divs with table roles, not a <table>: rows out of view then cost nothing.
for (const table of [running, recent]) {
  table.setAttribute('role', 'table');
  const head = document.createElement('div');
  head.className = 'row head';
  head.setAttribute('role', 'row');
  for (const name of COLUMNS) {
    const cell = document.createElement('span');
    cell.setAttribute('role', 'columnheader');
    cell.textContent = name;
    if (name === 'Actions') cell.className = 'visually-hidden';
    head.append(cell);
  }
  const body = document.createElement('div');
  body.setAttribute('role', 'rowgroup');
  table.append(head, body);
}
const runningRows = running.lastElementChild;
const recentRows = recent.lastElementChild;
const filter = document.getElementById('filter');
const connection = document.getElementById('connection');

const keyOf = (token) => `${typeof token}:${token}`;
const stateOf = (job) => (job.state === 'done' ? job.status || 'ok' : job.state);

function connect() {
  const url =
    lastEventId === '' ? '/events' : `/events?lastEventId=${encodeURIComponent(lastEventId)}`;
  source = new EventSource(url);
  source.addEventListener('open', () => {
    retryMs = 1000;
    showConnection('live');
  });
  source.addEventListener('snapshot', (event) => receive(event, true));
  source.addEventListener('changes', (event) => receive(event, false));
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CONNECTING) {
      showConnection('reconnecting…');
      return;
    }
    // Refused (the daemon at --max-sessions, or the cookie is gone) or unreachable: say why, then
    // try again with a new EventSource, which carries the last id in its URL.
    source.close();
    void retryAfterRefusal(url);
  });
}

async function retryAfterRefusal(url) {
  const refusal = await whyRefused(url);
  if (refusal === undefined)
    showConnection('disconnected: retrying (if this lasts, run `mcp-progress open` for a new URL)');
  else showConnection(`refused: ${refusal.message} (${refusal.data.code}); retrying`, true);
  setTimeout(connect, retryMs);
  retryMs = Math.min(retryMs * 2, 15_000);
}

/**
 * The daemon's refusal of `url` now ({message, data: {code}}), or undefined when it admits it or
 * cannot be reached. An EventSource never shows a refused response, so the same request once more,
 * by fetch, whose answer can be read; a stream it opens is dropped at once.
 */
async function whyRefused(url) {
  const asked = new AbortController();
  try {
    const response = await fetch(url, { signal: asked.signal });
    if (response.ok) return undefined;
    const { error } = await response.json();
    return typeof error?.message === 'string' ? error : undefined;
  } catch {
    return undefined;
  } finally {
    asked.abort();
  }
}

function showConnection(text, refused = false) {
  if (connection.textContent !== text) connection.textContent = text;
  connection.classList.toggle('refused', refused);
}

function receive(event, isSnapshot) {
  const batch = JSON.parse(event.data);
  if (isSnapshot && batch.first) unseen = new Set(jobs.keys());
  for (const job of batch.jobs) {
    const key = keyOf(job.progressToken);
    unseen?.delete(key);
    jobs.set(key, job);
    if (typeof job.rate === 'number') remember(key, job.rate, job.updatedAt);
    dirty.add(key);
  }
  for (const token of batch.gone) forget(keyOf(token));
  if (isSnapshot && batch.last) {
    for (const key of unseen) forget(key);
    unseen = undefined;
  }
  if (event.lastEventId !== '') lastEventId = event.lastEventId;
  showConnection('live');
  schedule();
}

function forget(key) {
  jobs.delete(key);
  rates.delete(key);
  dirty.add(key);
}

function remember(key, rate, at) {
  const points = rates.get(key) ?? [];
  points.push([at, rate]);
  while (points.length > 0 && points[0][0] < at - SPARK_WINDOW_MS) points.shift();
  rates.set(key, points);
}

function schedule() {
  if (frameRequested || document.hidden) return;
  frameRequested = true;
  requestAnimationFrame(render);
}

function render() {
  frameRequested = false;
  const needle = filter.value.trim().toLowerCase();
  for (const key of dirty) {
    const job = jobs.get(key);
    const row = rows.get(key);
    if (job === undefined) {
      row?.element.remove();
      rows.delete(key);
      continue;
    }
    draw(row ?? makeRow(key, job), job, needle);
  }
  dirty.clear();
  counts();
}

function makeRow(key, job) {
  const element = document.createElement('div');
  element.className = 'row';
  element.setAttribute('role', 'row');
  element.dataset.token = JSON.stringify(job.progressToken);
  const cell = (className) => {
    const span = document.createElement('span');
    span.setAttribute('role', 'cell');
    span.className = className;
    element.append(span);
    return span;
  };
  const tokenCell = cell('token');
  const token = document.createElement('span');
  const host = document.createElement('span');
  host.className = 'host';
  tokenCell.append(token, host);
  const barCell = cell('progress');
  const bar = document.createElement('div');
  bar.className = 'bar';
  bar.setAttribute('role', 'progressbar');
  bar.setAttribute('aria-label', `progress of ${JSON.stringify(job.progressToken)}`);
  const fill = document.createElement('div');
  fill.className = 'fill';
  bar.append(fill);
  barCell.append(bar);
  const row = {
    element,
    token,
    host,
    bar,
    fill,
    count: cell('count num'),
    percent: cell('percent num'),
    rate: cell('rate num'),
    eta: cell('eta num'),
    elapsed: cell('elapsed num'),
    message: cell('message'),
    spark: cell('spark-cell'),
    state: cell('state'),
    action: cell('action'),
    place: undefined,
  };
  const label = document.createElement('span');
  row.state.append(label);
  row.label = label;
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Cancel';
  button.addEventListener('click', () => cancel(job.progressToken, row));
  const outcome = document.createElement('span');
  outcome.className = 'outcome';
  outcome.setAttribute('role', 'status');
  row.action.append(button, outcome);
  row.button = button;
  row.outcome = outcome;
  rows.set(key, row);
  return row;
}

function draw(row, job, needle) {
  const state = stateOf(job);
  const last = job.last;
  setText(
    row.token,
    typeof job.progressToken === 'string' ? job.progressToken : `#${job.progressToken}`,
  );
  setText(row.host, job.host ?? '');
  const total = last?.total;
  const progress = last?.progress;
  const fraction = total > 0 && progress !== undefined ? Math.min(1, progress / total) : undefined;
  const finishedOk = state === 'ok';
  row.bar.classList.toggle('indeterminate', fraction === undefined && state === 'active');
  const width =
    fraction !== undefined ? `${(fraction * 100).toFixed(1)}%` : finishedOk ? '100%' : '';
  if (row.fill.style.width !== width) row.fill.style.width = width;
  if (fraction === undefined) row.bar.removeAttribute('aria-valuenow');
  else {
    row.bar.setAttribute('aria-valuemin', '0');
    row.bar.setAttribute('aria-valuemax', '100');
    row.bar.setAttribute('aria-valuenow', (fraction * 100).toFixed(0));
  }
  setText(
    row.count,
    progress === undefined ? '' : total === undefined ? `${progress}` : `${progress}/${total}`,
  );
  setText(row.percent, fraction === undefined ? '' : `${Math.floor(fraction * 100)}%`);
  setText(row.rate, typeof job.rate === 'number' ? `${job.rate.toPrecision(3)}/s` : '—');
  setText(row.eta, typeof job.etaMs === 'number' ? duration(job.etaMs / 1000) : '—');
  // The done message when there is one, else the last progress message: text, never HTML.
  setText(row.message, job.message ?? last?.message ?? '');
  sparkline(row, rates.get(keyOf(job.progressToken)));
  elapsed(row, job, Date.now());
  if (row.label.className !== `state-${state}`) row.label.className = `state-${state}`;
  setText(row.label, STATE_LABELS[state] ?? state);
  if (row.element.className !== `row ${state}`) row.element.className = `row ${state}`;
  row.button.hidden = state !== 'active';
  const place = job.state === 'done' ? recentRows : runningRows;
  if (row.place !== place) {
    if (place === recentRows) recentRows.prepend(row.element);
    else runningRows.append(row.element);
    row.place = place;
  }
  const hidden = !matches(job, needle);
  if (row.element.hidden !== hidden) row.element.hidden = hidden;
}

/** Writes only what changed: an unchanged cell costs the browser no style or layout work. */
function setText(element, text) {
  if (element.textContent !== text) element.textContent = text;
}

function matches(job, needle) {
  if (needle === '') return true;
  const text = `${job.progressToken} ${job.host ?? ''} ${job.message ?? job.last?.message ?? ''}`;
  return text.toLowerCase().includes(needle);
}

function sparkline(row, points) {
  row.spark.replaceChildren();
  if (points === undefined || points.length < 2) return;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', '0 0 100 20');
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('aria-hidden', 'true');
  const end = points[points.length - 1][0];
  const top = Math.max(...points.map(([, rate]) => rate)) || 1;
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute(
    'points',
    points
      .map(
        ([at, rate]) =>
          `${(100 * (1 - (end - at) / SPARK_WINDOW_MS)).toFixed(1)},${(20 - (rate / top) * 18).toFixed(1)}`,
      )
      .join(' '),
  );
  svg.append(line);
  row.spark.append(svg);
}

function drawElapsed() {
  const now = Date.now();
  for (const [key, row] of rows) {
    const job = jobs.get(key);
    if (job !== undefined && job.state === 'active') elapsed(row, job, now);
  }
}

function elapsed(row, job, now) {
  if (job.state === 'waiting') return;
  const end = job.state === 'done' ? job.updatedAt : now;
  setText(row.elapsed, duration(Math.max(0, end - job.startedAt) / 1000));
}

function counts() {
  const runningCount = runningRows.children.length;
  const recentCount = recentRows.children.length;
  document.getElementById('running-count').textContent = String(runningCount);
  document.getElementById('recent-count').textContent = String(recentCount);
  document.getElementById('running-empty').hidden = runningCount > 0;
  document.getElementById('recent-empty').hidden = recentCount > 0;
}

function duration(seconds) {
  const s = Math.floor(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

async function cancel(token, row) {
  if (!window.confirm(`Cancel ${JSON.stringify(token)}? Its worker is told to stop.`)) return;
  row.button.disabled = true;
  setText(row.outcome, 'cancelling…');
  try {
    const response = await fetch('/cancel', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ progressToken: token, reason: 'cancelled from the page' }),
    });
    const answer = await response.json();
    setText(
      row.outcome,
      response.ok
        ? answer.workers > 0
          ? `cancel sent to ${answer.workers} worker${answer.workers === 1 ? '' : 's'}`
          : 'no worker was told: the job has no live worker'
        : `refused: ${answer.error.message} (${answer.error.data.code})`,
    );
  } catch (error) {
    setText(row.outcome, `cancel failed: ${error.message}`);
  } finally {
    row.button.disabled = false;
  }
}

filter.addEventListener('input', () => {
  for (const key of jobs.keys()) dirty.add(key);
  schedule();
});
document.addEventListener('visibilitychange', schedule);
// Running jobs' elapsed time moves on its own: redrawn once a second while the tab is shown.
setInterval(() => {
  if (!document.hidden) requestAnimationFrame(drawElapsed);
}, 1000);
connect();
