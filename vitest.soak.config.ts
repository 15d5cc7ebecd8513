import { defineConfig } from 'vitest/config';

/** `npm run test:soak`: the long reliability scenarios, bounded in time and count. */
export default defineConfig({
  test: {
    include: ['test/**/*.soak.test.ts'],
    globalSetup: ['test/setup/build-dist.ts'],
    // The default output, then one plain `N passed, N failed, N skipped` line; under CI a skip fails.
    reporters: ['default', './test/setup/count-reporter.ts'],
    testTimeout: 15 * 60_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
  },
});
