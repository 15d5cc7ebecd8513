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

/** Every module specifier a file imports or re-exports, statically or dynamically. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = new Set<string>();
  for (const match of text.matchAll(
    /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g,
  )) {
    specifiers.add(match[1] ?? match[2] ?? match[3] ?? '');
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

/** Which files may import each outside package. */
const OWNERS: Record<string, (file: string) => boolean> = {
  'node-ipc': (file) => file === 'ingress/ipc-server.ts',
  ws: (file) => file === 'egress/endpoint.ts' || file === 'egress/gateway-client.ts',
  '@modelcontextprotocol/sdk': (file) => file.startsWith('egress/'),
  '@modelcontextprotocol/server': (file) => file.startsWith('egress/'),
};

/** Which layers each layer may import. */
const ALLOWED: Record<string, string[]> = {
  protocol: ['protocol'],
  router: ['router', 'protocol'],
  client: ['client', 'protocol', 'locate', 'version'],
  locate: ['protocol'],
  log: [],
  version: [],
  config: ['protocol', 'locate', 'log', 'router'],
  ingress: ['ingress', 'protocol', 'locate', 'client'],
  egress: ['egress', 'protocol', 'router', 'locate', 'version', 'client'],
  daemon: [
    'config',
    'egress',
    'ingress',
    'locate',
    'log',
    'metrics',
    'protocol',
    'router',
    'scheduler',
    'version',
  ],
  metrics: ['daemon'],
  scheduler: ['router'],
  cli: [
    'cli',
    'client',
    'config',
    'daemon',
    'egress',
    'locate',
    'log',
    'protocol',
    'version',
    'router',
  ],
  index: ['protocol', 'client', 'daemon', 'config', 'egress', 'locate', 'router'],
};

describe('layering', () => {
  it('finds the source files', () => {
    expect(files.length).toBeGreaterThan(15);
    expect(graph.find((g) => g.file === 'ingress/ipc-server.ts')?.external).toContain('node-ipc');
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

  it('protocol and router are pure: no node built-ins, no I/O packages', () => {
    const offenders = graph
      .filter((g) => g.layer === 'protocol' || g.layer === 'router')
      .flatMap((g) =>
        g.external.filter((name) => name !== 'zod').map((name) => `${g.file} imports ${name}`),
      );
    expect(offenders).toEqual([]);
  });

  it('the client imports neither ws, the SDK nor node-ipc, even indirectly', () => {
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
  });

  it('the CLI loads a command when it runs, and publish and run load no heavy package', () => {
    // Static imports only: what loading a file costs before any of its code runs.
    const staticImports = (file: string): string[] =>
      [
        ...readFileSync(join(SRC, file), 'utf8').matchAll(
          /^(?:import|export)\s(?!type\s)[^'"]*?from\s*['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]/gm,
        ),
      ].map((match) => match[1] ?? match[2] ?? '');
    expect(staticImports('cli/main.ts').filter((s) => s.endsWith('-command.js'))).toEqual([]);
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
        /^(ws|node-ipc|zod|@modelcontextprotocol\/)/.test(name),
      );
    };
    expect(reachedFrom('cli/main.ts')).toEqual([]);
    expect(reachedFrom('cli/publish-command.ts')).toEqual([]);
    expect(reachedFrom('cli/run-command.ts')).toEqual([]);
  });

  it('no layer reaches backwards along the data path', () => {
    const offenders = graph.flatMap((g) => {
      const allowed = ALLOWED[g.layer];
      if (allowed === undefined) return [`${g.file}: layer ${g.layer} has no rule in this test`];
      return g.internal
        .filter((dep) => dep.layer !== g.layer && !allowed.includes(dep.layer))
        .map((dep) => `${g.file} (${g.layer}) imports ${dep.file} (${dep.layer})`);
    });
    expect(offenders).toEqual([]);
  });
});
