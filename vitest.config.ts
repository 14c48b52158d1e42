import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      // The simulator package's own tests (packages/simulator/vitest.config.ts): project `simulator`.
      'packages/simulator',
      {
        test: {
          name: 'unit',
          // No PostgreSQL, Prometheus, child process or socket: these run in seconds anywhere.
          include: ['test/unit/**/*.test.ts'],
          // Unit files leave no state behind (no servers, no globals; fake timers are restored in
          // afterEach), so they share a worker's module cache instead of re-importing per file.
          isolate: false,
          // …except the secrets src/redact.ts registers, which each file forgets when it ends.
          setupFiles: ['test/helpers/forget-secrets.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // Files share a worker's module cache too (132 s → 120 s of CPU, measured once each): each starts its
          // own servers, simulators and databases and closes them in its hooks, and the code under
          // test keeps no process-wide state but its shutdown handlers, which tests never install.
          isolate: false,
          setupFiles: ['test/helpers/forget-secrets.ts'],
          // One throwaway PostgreSQL cluster for the run; files isolate themselves with a database each.
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
    ],
    // Most integration time is spent waiting on child processes, PostgreSQL and sockets, so three
    // workers finish sooner than two on a 2-core machine (measured: 107 s against 131 s); four
    // gain little more and load the machine enough to stretch the timing-sensitive tests.
    maxWorkers: 3,
  },
});
