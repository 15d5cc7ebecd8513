import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // dist/ is what the e2e tests run: built before every run, however it is started.
    globalSetup: ['test/setup/build-dist.ts'],
    // The default output, then one plain `N passed, N failed, N skipped` line; under CI a skip fails.
    reporters: ['default', './test/setup/count-reporter.ts'],
    exclude: ['test/**/*.soak.test.ts', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // End-to-end tests start real daemons and child processes; two workers fit a 2-core machine.
    maxWorkers: 2,
  },
});
