/**
 * Prints where a V8 CPU profile (from `npm run bench -- --profile`) spent its
 * time: the top functions by self time, and by total time (self plus callees).
 *
 *   node bench/profile-summary.ts bench/results/profiles/CPU.….cpuprofile [top]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [path, topText] = process.argv.slice(2);
if (path === undefined) {
  process.stderr.write('usage: node bench/profile-summary.ts FILE.cpuprofile [top]\n');
  process.exit(2);
}
const top = Number(topText ?? 25);
// Piped into head, which closes early: stop quietly instead of throwing EPIPE.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});
const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes)
  for (const child of node.children ?? []) parent.set(child, node.id);

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^.*\/(node_modules\/|src\/|dist\/)/, '$1');
  return `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
}

const self = new Map<string, number>();
const total = new Map<string, number>();
let all = 0;
profile.samples.forEach((id, index) => {
  const dt = profile.timeDeltas[index] ?? 0;
  all += dt;
  const node = byId.get(id);
  if (node === undefined) return;
  self.set(label(node), (self.get(label(node)) ?? 0) + dt);
  // Each function once per sample, however deep it recurses.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const ancestor = byId.get(at);
    if (ancestor === undefined) break;
    const name = label(ancestor);
    if (seen.has(name)) continue;
    seen.add(name);
    total.set(name, (total.get(name) ?? 0) + dt);
  }
});

function print(title: string, table: Map<string, number>): void {
  process.stdout.write(`\n${title}\n`);
  const rows = [...table.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [name, time] of rows) {
    process.stdout.write(`${((100 * time) / all).toFixed(1).padStart(6)}%  ${name}\n`);
  }
}

process.stdout.write(`${path}: ${(all / 1e6).toFixed(2)} s sampled\n`);
print('self time', self);
print('total time', total);
