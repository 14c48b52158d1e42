/**
 * `serve` started in the test process on a simulator of the file, each test's servers stopped
 * after it, its JSON log captured: the set-up of the tests of hostile clients.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { createLogger } from '../../src/log.js';
import { startServe, type RunningServer } from '../../src/serve/lifecycle.js';
import type { CapturedLog } from './log-capture.js';
import { serveTestConfig } from './serve-config.js';

/** What {@link useLoggedServes} returns. */
export interface LoggedServes {
  /** The servers started and not yet stopped; after each test they are stopped, last first. */
  running: RunningServer[];
  /**
   * Starts `serve` on a new schema `<prefix>_<n>`, logging at info as JSON into `capture`, with one
   * attempt per upstream request; `env` adds or overrides settings.
   */
  serve: (capture: CapturedLog, env?: Record<string, string>) => Promise<RunningServer>;
}

/**
 * Registers the file's hooks: a simulator with 200 records over the last day, started before all
 * tests and closed after them, and the stop of each test's servers. Call it once at the top level,
 * after useTestDatabase (and after any beforeAll that must run before the simulator starts).
 */
export function useLoggedServes(db: { url: string }, schemaPrefix: string): LoggedServes {
  let sim: Simulator | undefined;
  let schemaCounter = 0;
  const running: RunningServer[] = [];
  beforeAll(async () => {
    sim = await startSimulator({ port: 0, records: 200, end: new Date(), start: new Date(Date.now() - 86_400_000) });
  });
  afterEach(async () => {
    while (running.length) await running.pop()!.stop();
  });
  afterAll(async () => {
    await sim?.close();
  });
  return {
    running,
    serve: async (capture, env = {}) => {
      const config = serveTestConfig(sim!, db.url, `${schemaPrefix}_${++schemaCounter}`, { UPSTREAM_MAX_ATTEMPTS: '1', ...env });
      const s = await startServe(config, createLogger('info', { format: 'json', destination: capture }));
      running.push(s);
      return s;
    },
  };
}
