/** The Python client's promises that no run shows: Python 3.8 syntax, the standard library only, one file. */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';
import { PYTHON, PYTHON_ARGS } from '../helpers/python.js';

const CLIENT = join(ROOT, 'clients/python/mcp_progress.py');

/** Parses the file as Python 3.8 would and lists every module it imports, with whether it is guarded by try. */
const INSPECT = `
import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read(), feature_version=(3, 8))
guarded = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Try):
        for inner in node.body:
            for sub in ast.walk(inner):
                guarded.add(id(sub))
imports = []
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        imports += [(alias.name.split(".")[0], id(node) in guarded) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        imports.append(((node.module or "").split(".")[0], id(node) in guarded))
stdlib = set(sys.stdlib_module_names) | {"__future__"}
print(json.dumps([[name, name in stdlib, optional] for name, optional in imports]))
`;

describe('clients/python', () => {
  it('is one file', () => {
    expect(
      readdirSync(join(ROOT, 'clients/python')).filter((name) => !name.startsWith('__')),
    ).toEqual(['mcp_progress.py']);
  });

  it('parses as Python 3.8 and imports only the standard library (tqdm optionally, inside try)', () => {
    const imports = JSON.parse(
      execFileSync(PYTHON, [...PYTHON_ARGS, '-c', INSPECT, CLIENT], { encoding: 'utf8' }),
    ) as Array<[string, boolean, boolean]>;
    expect(imports.length).toBeGreaterThan(5);
    const outside = imports.filter(([, stdlib]) => !stdlib);
    expect(outside).toEqual([['tqdm', false, true]]);
  });
});
