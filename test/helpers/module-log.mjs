// Loaded with `node --import` into a real process of the bridge: appends every module it
// loads (import or require, its URL) to $MCP_PROGRESS_TEST_MODULE_LOG, one a line, so that a
// test can say what a process had loaded at a moment of its life. A load hook, not a resolve
// one: the binary resolves its own modules itself (src/shared/own-modules.ts), so a resolve
// hook registered before it never sees them.
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const log = process.env.MCP_PROGRESS_TEST_MODULE_LOG;
if (log) {
  const seen = new Set();
  registerHooks({
    load(url, context, nextLoad) {
      if (!seen.has(url)) {
        seen.add(url);
        appendFileSync(log, `${url}\n`);
      }
      return nextLoad(url, context);
    },
  });
}
