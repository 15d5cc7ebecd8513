/**
 * zod's locale index as the `mcp-progress` binary loads it: English alone, zod's default
 * (src/shared/own-modules.ts resolves the index here; zod's own index loads all 64 locales).
 */
export { default as en } from 'zod/v4/locales/en.js';
