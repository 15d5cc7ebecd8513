/**
 * `npm run bench`: the bridge and its baselines (raw relay, node-ipc relay,
 * NATS) in one run on this machine, as a table, with the targets as
 * ratios. `npm run bench -- --json` prints the full results as JSON instead.
 * The options are in HELP below (`npm run bench -- --help`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { backplaneTable } from './lib/backplane.ts';
import { floodProbeTable } from './lib/flood-probe.ts';
import { MCP_PATHS, type McpPath } from './lib/mcp-path.ts';
import { conditions, mcpTable, table, targets, targetTable } from './lib/report.ts';
import { ALL_SYSTEMS, runSuite, WORKLOADS, type WorkloadName } from './lib/suite.ts';
import { ROOT, SYSTEM_LABELS, type SystemName } from './lib/systems.ts';
import { SIZES } from './lib/workloads.ts';

const HELP = `usage: npm run bench -- [options]\n\nRuns the bridge, its baselines and its peers on this machine, and prints tables with the\ntargets as ratios (bench/README.md says what each workload measures).\n\n  --json               print the full results as JSON instead of tables\n  --quick              shorter runs (same shapes)\n  --smoke              tiny sizes: checks the harness, measures nothing\n  --only a,b           workloads: ingest, e2e, latency, fanout, flood, scale, startup, mcp, probe,\n                       backplane\n  --systems a,b        bridge, norate (ingest only: the bridge without rate/ETA), raw, nodeipc,\n                       nats\n  --paths a,b          MCP paths of the startup and mcp workloads: floor, floor-pair, http-floor,\n                       telemetry, embedded, http, stdio, defaults, defaults-every, relay, sdk\n                       (start-up only)\n  --rates a,b          shapes of the mcp workload: 1000, 10000 (updates/s), burst (default: all)\n  --repeat N           run each throughput and latency measurement N times, report the median\n                       (default 1; in a full run the mcp workload's 1k/s shape, which its\n                       targets judge, runs 3 times, the paths interleaved)\n  --before DIR         also run the bridge built in DIR (bin/ and dist/) as "bridge (before)",\n                       to measure a change against its parent in the same run (the MCP paths,\n                       their workers' Node client, and the backplane too)\n  --samples DIR        write the mcp workload's per-update latencies, one file per path and shape\n                       (DIR/<shape>/<path>.tsv: ms since the first update, latency ms)\n  --warm SECONDS       open each mcp workload window only after SECONDS of warm-up updates at its\n                       rate (a burst's at 1000/s), every path alike: steady state apart from\n                       warm-up. The issue's ratio targets are checked on cold runs only\n  --batch N            the mcp workload's worker sends its updates N at a time, every N/rate\n                       seconds (default 1: one every 1/rate). Each is still its own write; a\n                       server that did not run between them reads them in one read (the table\n                       gives read calls per update), so this separates what a server costs per\n                       wake from what it costs per update. The issue's targets are checked at 1\n                       only\n  --profile            write V8 CPU profiles of the servers to bench/results/profiles/ (sampled\n                       every 100 µs; their CPU figures are not comparable with a plain run's)\n  --help               this text\n`;

function parseOptions() {
  try {
    return parseArgs({
      options: {
        help: { type: 'boolean' },
        json: { type: 'boolean' },
        quick: { type: 'boolean' },
        smoke: { type: 'boolean' },
        only: { type: 'string' },
        systems: { type: 'string' },
        paths: { type: 'string' },
        rates: { type: 'string' },
        profile: { type: 'boolean' },
        repeat: { type: 'string' },
        before: { type: 'string' },
        samples: { type: 'string' },
        warm: { type: 'string' },
        batch: { type: 'string' },
      },
    }).values;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\nSee npm run bench -- --help\n`);
    process.exit(2);
  }
}

const values = parseOptions();
if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

function list<T extends string>(
  text: string | undefined,
  allowed: readonly T[],
  what: string,
): T[] {
  if (text === undefined) return [...allowed];
  const chosen = text.split(',').map((item) => item.trim());
  for (const item of chosen) {
    if (!(allowed as readonly string[]).includes(item)) {
      process.stderr.write(`unknown ${what} "${item}": choose from ${allowed.join(', ')}\n`);
      process.exit(2);
    }
  }
  return chosen as T[];
}

/**
 * A number option, checked up front: one `accepts` refuses exits 2, saying what `flag` takes
 * (`takes`) with an `example`.
 */
function numberOption(
  flag: string,
  text: string | undefined,
  accepts: (value: number) => boolean,
  takes: string,
  example: string,
): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text.trim() === '' || !accepts(value)) {
    process.stderr.write(`${flag} takes ${takes} (got "${text}"): e.g. ${flag} ${example}\n`);
    process.exit(2);
  }
  return value;
}
const warmSeconds = numberOption(
  '--warm',
  values.warm,
  (seconds) => Number.isFinite(seconds) && seconds >= 0,
  'a number of seconds, 0 or more',
  '5',
);
const mcpWarmMs = warmSeconds === undefined ? undefined : Math.round(warmSeconds * 1000);
const repeat =
  numberOption(
    '--repeat',
    values.repeat,
    (times) => Number.isInteger(times) && times >= 1,
    'a whole number of runs, 1 or more',
    '5',
  ) ?? 1;
const mcpBatch = numberOption(
  '--batch',
  values.batch,
  (updates) => Number.isInteger(updates) && updates >= 1,
  'a whole number of updates, 1 or more',
  '10',
);

// Profiling runs one long instance of each chosen workload, so that each profile shows one thing.
// Exit through process.exit so that the servers started so far are killed with the harness.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

const sizeName = values.smoke
  ? 'smoke'
  : values.profile
    ? 'profile'
    : values.quick
      ? 'quick'
      : 'full';
const resultsDir = join(ROOT, 'bench/results');
const profileDir = join(resultsDir, 'profiles');
if (values.profile) mkdirSync(profileDir, { recursive: true });

const result = await runSuite({
  sizes: SIZES[sizeName],
  sizeName,
  systems: [
    ...(values.before === undefined ? [] : (['before'] as SystemName[])),
    ...list<SystemName>(values.systems, ALL_SYSTEMS, 'system'),
  ],
  beforeRoot: values.before,
  samplesDir: values.samples,
  mcpWarmMs,
  mcpBatch,
  paths: list<McpPath>(values.paths, MCP_PATHS, 'path'),
  mcpShapes:
    values.rates === undefined
      ? undefined
      : list(values.rates, ['1000', '10000', 'burst'] as const, 'rate'),
  workloads: list<WorkloadName>(values.only, WORKLOADS, 'workload'),
  repeat,
  mcpTargetRepeat: values.repeat === undefined ? SIZES[sizeName].mcpTargetRuns : repeat,
  // Sampled every 100 µs: an update's work at 1k/s is a few tens of µs, which 1 ms samples mostly miss.
  serverExecArgv: values.profile
    ? ['--cpu-prof', '--cpu-prof-interval=100', `--cpu-prof-dir=${profileDir}`]
    : [],
  log: (line) => process.stderr.write(`${line}\n`),
});
const checks = targets(result);
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  join(resultsDir, 'latest.json'),
  `${JSON.stringify({ ...result, targets: checks }, null, 2)}\n`,
);

if (values.json) {
  process.stdout.write(`${JSON.stringify({ ...result, targets: checks }, null, 2)}\n`);
} else {
  const mcp = mcpTable(result);
  const probe =
    Object.keys(result.probe).length === 0 ? '' : floodProbeTable(result.probe, SYSTEM_LABELS);
  const backplane =
    Object.keys(result.backplane).length === 0
      ? ''
      : backplaneTable(result.backplane, SIZES[sizeName].backplaneSettleMs);
  process.stdout.write(
    `\n${[table(result), mcp, probe, backplane].filter((text) => text !== '').join('\n\n')}\n\n${targetTable(checks)}\n\n${conditions(result)}\n`,
  );
}
