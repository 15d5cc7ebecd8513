// Loaded with `node --import` into a real process of the bridge: the module whose URL ends with
// $MCP_PROGRESS_TEST_HOLD_MODULE does not finish loading until the file `release` appears in
// $MCP_PROGRESS_TEST_HOLD_DIR; the file `held` appears there once its load is under way. A
// top-level await is put before the module's source, so the process goes on serving everything
// else meanwhile: a test can let things happen, in its own order, while an import is in flight.
import { existsSync, writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { join } from 'node:path';

const tail = process.env.MCP_PROGRESS_TEST_HOLD_MODULE;
const dir = process.env.MCP_PROGRESS_TEST_HOLD_DIR;
if (tail && dir) {
  globalThis.__mcpProgressTestHold = () => {
    writeFileSync(join(dir, 'held'), '');
    return new Promise((resolve) => {
      const look = () => (existsSync(join(dir, 'release')) ? resolve() : setTimeout(look, 5));
      look();
    });
  };
  registerHooks({
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context);
      if (!url.endsWith(tail)) return loaded;
      const source = Buffer.from(loaded.source).toString('utf8');
      return { ...loaded, source: `await globalThis.__mcpProgressTestHold();\n${source}` };
    },
  });
}
