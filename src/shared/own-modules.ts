/**
 * The `mcp-progress` binary's own modules, resolved by URL arithmetic. Node's
 * resolver turns every import into a path, realpaths it and back into a URL;
 * start-up's ~130 imports run three of its path functions often enough that
 * V8 wakes its optimising compiler for them, and the compiler's code stays
 * mapped: 6 MiB of an idle daemon's 61 MiB (docs/MCP-PATH.md, the fourth round).
 * The package's compiled files are plain files in one tree (dist/), so a
 * relative `.js` import from one of them is the URL it names, as Node would
 * find it; everything else (packages, node: built-ins) is Node's to resolve.
 * Needs module.registerHooks (Node 22.15+); without it, nothing changes. The same hook
 * keeps zod's locales to English (zodLocaleIndex says why).
 */
import * as nodeModule from 'node:module';

/** The URL a relative `.js` import from a module under `rootHref` names, if it stays under it. */
export function resolveOwnModule(
  specifier: string,
  parentURL: string | undefined,
  rootHref: string,
): string | undefined {
  if (parentURL === undefined || !parentURL.startsWith(rootHref)) return undefined;
  if (!(specifier.startsWith('./') || specifier.startsWith('../')) || !specifier.endsWith('.js'))
    return undefined;
  const url = new URL(specifier, parentURL);
  // A query or fragment, or a path that leaves the tree, is Node's to decide.
  if (url.search !== '' || url.hash !== '' || !url.href.startsWith(rootHref)) return undefined;
  return url.href;
}

type NextResolve = (specifier: string, context: unknown) => { url: string };

type ResolveHook = (
  specifier: string,
  context: { parentURL?: string | undefined },
  nextResolve: NextResolve,
) => unknown;

/** How every zod's locale index URL ends: a cheap test before the look-up of ours. */
const LOCALE_INDEX_TAIL = '/zod/v4/locales/index.js';

/**
 * Where the zod the package uses keeps its locale index, which loads all of zod's locales (64 of
 * them, about 1 MiB of source) because zod's core re-exports it: about 1 MiB of an idle `mcp` and
 * 15 ms of its start-up. The binary's processes speak English alone, zod's default, which zod
 * imports from en.js itself; so this index is resolved to `./zod-english.js`, which has `en`
 * only. Looked up through the hooks after ours (not import.meta.resolve, which would come back
 * through this one); null when no zod is found from here.
 */
function zodLocaleIndex(nextResolve: NextResolve): string | null {
  try {
    return nextResolve('zod/v4/locales', { parentURL: import.meta.url }).url;
  } catch {
    return null;
  }
}

/**
 * Resolves relative imports among the modules under `rootHref` (a directory URL ending in `/`)
 * directly from now on, and zod's locale index to English alone; returns whether the hook is in
 * place.
 */
export function resolveOwnModulesDirectly(rootHref: string): boolean {
  const register = (nodeModule as { registerHooks?: (hooks: { resolve: ResolveHook }) => unknown })
    .registerHooks;
  if (register === undefined) return false;
  // Looked up when a zod locale index first resolves: a command that loads no zod (publish, run
  // once per update from shell loops) pays nothing; a first bare-specifier look-up costs 3-4 ms.
  let localeIndex: string | null | undefined;
  const englishOnly = new URL('./zod-english.js', import.meta.url).href;
  register({
    resolve(specifier, context, nextResolve) {
      const url = resolveOwnModule(specifier, context.parentURL, rootHref);
      // The package is "type": "module": its .js files are ES modules.
      if (url !== undefined) return { url, format: 'module', shortCircuit: true };
      const resolved = nextResolve(specifier, context);
      if (!resolved.url.endsWith(LOCALE_INDEX_TAIL)) return resolved;
      // null: looked up, no zod found from here; undefined: not looked up yet.
      if (localeIndex === undefined) localeIndex = zodLocaleIndex(nextResolve);
      return resolved.url === localeIndex ? { ...resolved, url: englishOnly } : resolved;
    },
  });
  return true;
}
