/**
 * The architecture, enforced: one module owns each outside dependency, and
 * the data path (ingress -> protocol -> router -> gate -> egress) never
 * reaches backwards.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/**
 * Every module specifier a file imports or re-exports, statically or dynamically, or
 * requires through createRequire (ws is required for its lighter CommonJS entry).
 */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = new Set<string>();
  for (const match of text.matchAll(
    /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]|createRequire\(import\.meta\.url\)\(\s*['"]([^'"]+)['"]\s*\)/g,
  )) {
    specifiers.add(match[1] ?? match[2] ?? match[3] ?? match[4] ?? '');
  }
  return [...specifiers];
}

/** The layer of a src file: its first directory, or the file name at the top. */
function layerOf(file: string): string {
  const rel = relative(SRC, file);
  const [first] = rel.split('/');
  return rel.includes('/') ? (first ?? rel) : rel.replace(/\.ts$/, '');
}

function resolveInternal(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  return resolve(from, '..', specifier.replace(/\.js$/, '.ts'));
}

const files = sourceFiles(SRC);
const graph = files.map((file) => ({
  file: relative(SRC, file),
  layer: layerOf(file),
  external: importsOf(file).filter((s) => !s.startsWith('.')),
  internal: importsOf(file)
    .map((s) => resolveInternal(file, s))
    .filter((p): p is string => p !== undefined)
    .map((p) => ({ file: relative(SRC, p), layer: layerOf(p) })),
}));

/** Which files may import each outside package: one owner per dependency and side. */
const OWNERS: Record<string, (file: string) => boolean> = {
  'node-ipc': (file) => file === 'daemon/worker-socket.ts',
  // The server side of the gateway, and the client side.
  ws: (file) => file === 'daemon/gateway.ts' || file === 'gateway-client/gateway-client.ts',
  '@modelcontextprotocol/sdk': (file) => file.startsWith('mcp/'),
  '@modelcontextprotocol/server': (file) => file.startsWith('mcp/'),
  // The NATS backplane, loaded only with --nats.
  nats: (file) => file === 'daemon/backplane.ts',
};

/**
 * Which folders each folder may import: the process a file runs in is its
 * folder. Every edge listed exists (a test below), so the table cannot drift
 * into permission nobody uses.
 */
const ALLOWED: Record<string, string[]> = {
  protocol: [],
  shared: ['protocol'],
  client: ['protocol', 'shared'],
  'gateway-client': ['protocol', 'shared'],
  mcp: ['protocol', 'shared', 'gateway-client'],
  daemon: ['protocol', 'shared', 'mcp'],
  cli: ['protocol', 'shared', 'client', 'gateway-client', 'mcp', 'daemon'],
  index: ['protocol', 'shared', 'gateway-client', 'daemon'],
};

/**
 * The pure core of the daemon: frames and a clock in, deliveries out; and the defaults it starts
 * from (shared/defaults.ts, pure itself: constants and a backoff formula), which the router reads.
 */
const PURE_FILES = [
  'daemon/router.ts',
  'daemon/gate.ts',
  'daemon/rate-estimator.ts',
  'daemon/list-page.ts',
  'shared/defaults.ts',
];

/** Static value imports (and top-level requires) only: what loading a file costs before any of its code runs. */
const staticImports = (file: string): string[] =>
  [
    ...readFileSync(join(SRC, file), 'utf8').matchAll(
      /^(?:import|export)\s(?!type\s)[^'"]*?from\s*['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]|^const\s[^=]*=\s*createRequire\(import\.meta\.url\)\(\s*['"]([^'"]+)['"]\s*\)/gm,
    ),
  ].map((match) => match[1] ?? match[2] ?? match[3] ?? '');
expect(staticImports('cli/main.ts').filter((s) => s.endsWith('-command.js'))).toEqual([]);
/** The heavy packages that loading a file loads, through any chain of value imports. */
const reachedFrom = (start: string): string[] => {
  const seen = new Set<string>();
  const externals = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of staticImports(file)) {
      const internal = resolveInternal(join(SRC, file), specifier);
      if (internal === undefined) externals.add(specifier);
      else visit(relative(SRC, internal));
    }
  };
  visit(start);
  return [...externals].filter((name) =>
    /^(ws|node-ipc|zod|nats|@modelcontextprotocol\/)/.test(name),
  );
};

/** Every cycle in a file graph, each as "a -> b -> a", found by depth-first search. */
function findCycles(edges: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of edges.get(file) ?? []) {
      if (state.get(next) === 'open') {
        cycles.push([...stack.slice(stack.indexOf(next)), next].join(' -> '));
      } else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of edges.keys()) if (!state.has(file)) visit(file);
  return cycles;
}

describe('layering', () => {
  it('finds the source files', () => {
    expect(files.length).toBeGreaterThan(15);
    expect(graph.find((g) => g.file === 'daemon/worker-socket.ts')?.external).toContain('node-ipc');
  });

  it('each outside dependency is imported by its one owner only', () => {
    const offenders = graph.flatMap((g) =>
      g.external
        .filter((name) => {
          const owner = Object.keys(OWNERS).find((o) => name === o || name.startsWith(`${o}/`));
          return owner !== undefined && !OWNERS[owner]?.(g.file);
        })
        .map((name) => `${g.file} imports ${name}`),
    );
    expect(offenders).toEqual([]);
  });

  it('protocol, the router and the gate are pure: no node built-ins, no I/O packages', () => {
    const pure = graph.filter((g) => g.layer === 'protocol' || PURE_FILES.includes(g.file));
    expect(pure.map((g) => g.file)).toEqual(expect.arrayContaining(PURE_FILES));
    const offenders = pure.flatMap((g) => [
      ...g.external.filter((name) => name !== 'zod').map((name) => `${g.file} imports ${name}`),
      ...g.internal
        .filter((dep) => dep.layer !== 'protocol' && !PURE_FILES.includes(dep.file))
        .map((dep) => `${g.file} imports ${dep.file}`),
    ]);
    expect(offenders).toEqual([]);
  });

  it('the worker client imports neither ws, the SDK nor node-ipc, even indirectly, and loads no zod', () => {
    const reach = new Set<string>();
    const visit = (file: string) => {
      if (reach.has(file)) return;
      reach.add(file);
      for (const dep of graph.find((g) => g.file === file)?.internal ?? []) visit(dep.file);
    };
    for (const g of graph.filter((g) => g.layer === 'client')) visit(g.file);
    const externals = [...reach].flatMap(
      (file) => graph.find((g) => g.file === file)?.external ?? [],
    );
    expect(externals.filter((name) => /^(ws|node-ipc|@modelcontextprotocol\/)/.test(name))).toEqual(
      [],
    );
    // zod only by type: loading the client loads none of it.
    expect(reachedFrom('client/index.ts')).toEqual([]);
  });

  it('the CLI loads a command when it runs, and publish and run load no heavy package', () => {
    expect(reachedFrom('cli/main.ts')).toEqual([]);
    expect(reachedFrom('cli/publish-command.ts')).toEqual([]);
    expect(reachedFrom('cli/run-command.ts')).toEqual([]);
  });

  it('the daemon loads the NATS client only when it joins a backplane (a dynamic import)', () => {
    expect(graph.find((g) => g.file === 'daemon/backplane.ts')?.external).toContain('nats');
    expect(reachedFrom('daemon/daemon.ts')).not.toContain('nats');
    expect(reachedFrom('index.ts')).not.toContain('nats');
    expect(reachedFrom('cli/daemon-command.ts')).not.toContain('nats');
  });

  it('the daemon starts without ws, node-ipc, zod or the SDK: each is loaded at its first use', () => {
    expect(graph.find((g) => g.file === 'daemon/gateway.ts')?.external).toContain('ws');
    expect(reachedFrom('daemon/daemon.ts')).toEqual([]);
    expect(reachedFrom('cli/daemon-command.ts')).toEqual([]);
  });

  it('no folder imports one its process may not', () => {
    const offenders = graph.flatMap((g) => {
      const allowed = ALLOWED[g.layer];
      if (allowed === undefined) return [`${g.file}: layer ${g.layer} has no rule in this test`];
      return g.internal
        .filter((dep) => dep.layer !== g.layer && !allowed.includes(dep.layer))
        .map((dep) => `${g.file} (${g.layer}) imports ${dep.file} (${dep.layer})`);
    });
    expect(offenders).toEqual([]);
  });
  it('every allowed edge is used, so the table states what is, not what might be', () => {
    const used = new Set(
      graph.flatMap((g) =>
        g.internal.filter((dep) => dep.layer !== g.layer).map((dep) => `${g.layer}->${dep.layer}`),
      ),
    );
    const unused = Object.entries(ALLOWED).flatMap(([from, tos]) =>
      tos.filter((to) => !used.has(`${from}->${to}`)).map((to) => `${from}->${to}`),
    );
    expect(unused).toEqual([]);
  });

  it('has no import cycle between files, type-only imports included', () => {
    const edges = new Map(graph.map((g) => [g.file, g.internal.map((dep) => dep.file)]));
    expect(findCycles(edges)).toEqual([]);
  });

  it('the cycle finder finds a cycle, type-only or not, in a graph that has one', () => {
    const edges = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(findCycles(edges)).toEqual(['a.ts -> b.ts -> c.ts -> a.ts']);
    expect(
      findCycles(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
    ).toEqual([]);
  });
});
