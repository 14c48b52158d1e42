/**
 * The Config of a `serve` started in the test process (src/serve/lifecycle.ts) on the simulator and
 * the test database, as the in-process serve tests build it.
 */
import type { Simulator } from '@analytics-exporter/simulator';
import { loadConfig, type Config } from '../../src/config.js';
import { simulatorEnv } from './sync.js';

/**
 * `serve` on `sim`, storing into `schema` of `databaseUrl`, listening on a free port of 127.0.0.1,
 * with no sync schedule; `env` adds or overrides settings.
 *
 * @throws what loadConfig throws for an invalid setting in `env`.
 */
export function serveTestConfig(sim: Simulator, databaseUrl: string, schema: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    ...simulatorEnv(sim),
    DATABASE_URL: databaseUrl,
    DATABASE_SCHEMA: schema,
    METRICS_LISTEN: '127.0.0.1:0',
    SYNC_SCHEDULE: 'off',
    ...env,
  });
}
