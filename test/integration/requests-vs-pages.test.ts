/**
 * Requests against pages on the ETL's shape (issue 40): 25 one-day windows of 20,000 records at
 * pages of 500 (40 pages a window, as the ETL set's 40,000 at 1,000), the simulator, a real
 * PostgreSQL. A sync makes at most 1.1 E6 requests per page the data needs: slices planned from
 * a profile that proved accurate are filled close to a page (docs/design/reader-budgets.md).
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { runSync } from '../../src/sync/run/run.js';
import { planWindows } from '../../src/sync/windows.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { simClient, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);

const END = new Date('2026-11-01T00:00:00Z');
const START = new Date(END.getTime() - 25 * 86_400_000);

describe('E6 requests per page on the ETL shape (real PostgreSQL, the simulator)', () => {
  it('reads 500,000 records in 25 one-day windows with at most 1.1 requests per page needed', async () => {
    const sim = await startSimulator({ port: 0, records: 500_000, start: START, end: END });
    bed.closers.push(() => sim.close());
    const client = simClient(sim);
    bed.closers.push(() => client.close());
    await migrate(bed.pool, 'requests', silentLogger);
    const settings = syncSettings({ SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '500' });
    const before = sim.stats.analyticsRequests;
    const result = await runSync(pgDeps({ pool: bed.pool, client, ...settings, schema: 'requests', log: silentLogger }), { from: START, to: END });
    expect(result).toMatchObject({ status: 'succeeded', windows: 25, records: 500_000 });
    const { rows } = await bed.pool.query<{ n: number }>('select count(*)::int as n from requests.records');
    expect(rows[0]!.n).toBe(500_000);
    const windows = planWindows(START.getTime(), END.getTime(), settings.config.windowMs);
    const pages = windows.reduce((n, w) => n + Math.ceil(sim.dataset.count(new Date(w.start), new Date(w.end), false) / 500), 0);
    expect(pages).toBe(1000);
    // The clock probe, a count a window, the first window's overflow and its slices are in it.
    expect(sim.stats.analyticsRequests - before).toBeLessThanOrEqual(1.1 * pages);
  });
});
