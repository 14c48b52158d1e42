import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // No PostgreSQL, Prometheus, child process or socket: these run in seconds anywhere.
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // One throwaway PostgreSQL cluster for the run; files isolate themselves with a database each.
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ],
    // Integration tests start servers on loopback ports; two workers match the 2-core machines.
    maxWorkers: 2,
  },
});
