import { defineConfig } from 'vitest/config';

/** `npm run test:soak`: the long reliability scenarios, bounded in time and count. */
export default defineConfig({
  test: {
    include: ['test/**/*.soak.test.ts'],
    globalSetup: ['test/setup/build-dist.ts'],
    testTimeout: 15 * 60_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
  },
});
