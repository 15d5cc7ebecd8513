// Loaded with `node --import` into a real process of the bridge: appends every module it
// loads (import or require, resolved URL) to $MCP_PROGRESS_TEST_MODULE_LOG, one a line, so
// that a test can say what a process had loaded at a moment of its life.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const log = process.env.MCP_PROGRESS_TEST_MODULE_LOG;
if (log) {
  const seen = new Set();
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context);
      if (!seen.has(resolved.url)) {
        seen.add(resolved.url);
        appendFileSync(log, `${resolved.url}\n`);
      }
      return resolved;
    },
  });
}
