import { defineConfig } from 'vitest/config';

// The simulator's own tests: the dataset and orders (pure, fast) and the server and command line
// (loopback sockets, no database). The repository root's `npm test` runs them as its project `simulator`.
export default defineConfig({
  test: {
    name: 'simulator',
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
  },
});
