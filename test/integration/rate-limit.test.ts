/**
 * The request budget (UPSTREAM_RATE_LIMIT) against the simulator's real rate limit, over HTTP:
 * a backfill paced under the limit sees no 429 at all and is exact; the same backfill without a
 * budget trips the limit and still completes exactly, riding the 429s out.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import type { Pool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { useTestDatabase } from '../helpers/db.js';
import { expectExactDataset, simulatorEnv, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
let pool: Pool;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(() => {
  pool = db.pool({ max: 6 });
});
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

const START = new Date('2026-10-30T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
/** The simulator's limit: 50 E6/E7 requests a second, 10 at once. */
const LIMIT = { perSecond: 50, burst: 10 };
const SYNC_ENV = { SYNC_WINDOW: '12h', SYNC_PAGE_SIZE: '100', SYNC_CONCURRENCY: '4' };

/**
 * One backfill of [START, END) into a fresh schema, against a fresh simulator of `records` records
 * limited to `limit`; `syncEnv` adds to {@link SYNC_ENV}.
 */
async function backfill(schema: string, env: Record<string, string>, limit = LIMIT, records = 3000, syncEnv: Record<string, string> = {}) {
  const sim: Simulator = await startSimulator({ port: 0, records, start: START, end: END, faults: { rateLimit: { ...limit } } });
  closers.push(() => sim.close());
  const rates: number[] = [];
  const config = loadConfig({ ...simulatorEnv(sim), ...env });
  const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, {
    log: silentLogger,
    random: () => 0,
    observer: { onRateLimit: (r) => rates.push(r) },
  });
  closers.push(() => client.close());
  await migrate(pool, schema, silentLogger);
  const result = await runSync(pgDeps({ pool, client, ...syncSettings({ ...SYNC_ENV, ...syncEnv }), schema, log: silentLogger }), { from: START, to: END });
  return { sim, result, rates };
}

describe('request budget against a rate-limited upstream', () => {
  it('paces a backfill under the limit: no 429, and every record stored exactly once', async () => {
    const { sim, result, rates } = await backfill('paced', { UPSTREAM_RATE_LIMIT: '40', UPSTREAM_RATE_BURST: '5' });
    expect(result).toMatchObject({ status: 'succeeded', windows: 4, records: 3000 });
    expect(await expectExactDataset(pool, 'paced', sim, START, END)).toBe(3000);
    // More requests than the simulator's burst, so the limit was there to trip.
    expect(sim.stats.analyticsRequests).toBeGreaterThan(3 * LIMIT.burst);
    expect(sim.stats.responses['429'] ?? 0).toBe(0);
    expect(rates).toEqual([40]);
  });

  it('without a budget, trips the limit and still completes exactly', async () => {
    // A burst of 2 against SYNC_CONCURRENCY 4: the pages one window fetches at once trip it however
    // slowly a loaded machine sends them; 10 attempts a request ride the 429s out. One window of 6
    // pages, since every 429 costs its Retry-After (a second at least).
    const { sim, result, rates } = await backfill('unpaced', { UPSTREAM_MAX_ATTEMPTS: '10' }, { perSecond: 20, burst: 2 }, 600, { SYNC_WINDOW: '2d' });
    expect(result).toMatchObject({ status: 'succeeded', windows: 1, records: 600 });
    expect(await expectExactDataset(pool, 'unpaced', sim, START, END)).toBe(600);
    expect(sim.stats.responses['429']).toBeGreaterThan(0);
    expect(rates).toEqual([]);
  });
});
