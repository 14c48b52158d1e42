/**
 * Exactness whatever order E6 returns records in: the simulator reshuffles ties or the
 * whole range per request (`order`), dense timestamps put about 21 records on every minute, and the
 * sync must still store every record exactly once, for an inclusive and an exclusive toDate.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runSync, type SyncObserver, type SyncResult } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { expectExactDataset, simClient, syncSettings, watermarkOf } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

const DAY_START = new Date('2026-10-31T00:00:00Z');
const DAY_END = new Date('2026-11-01T00:00:00Z');

async function setup(options: Parameters<typeof startSimulator>[0]): Promise<{ s: Simulator; schema: string }> {
  const s = await startSimulator({ port: 0, ...options });
  closers.push(() => s.close());
  const schema = `order_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return { s, schema };
}

async function sync(
  s: Simulator,
  schema: string,
  env: Record<string, string>,
  observer: SyncObserver = {},
  to = DAY_END,
): Promise<Extract<SyncResult, { runId: number }>> {
  const client = simClient(s);
  closers.push(() => client.close());
  const result = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(env), schema, log: silentLogger, observer }), { from: DAY_START, to });
  if (result.status === 'locked') throw new Error('unexpectedly locked');
  return result;
}

describe('sync against an E6 whose order is not stable (real PostgreSQL, the simulator)', () => {
  // Six hours at the density of 30,000 records a day: every window holds 1,250 records in 2 pages.
  const DENSE_END = new Date('2026-10-31T06:00:00Z');
  it.each([
    ['ties', 'inclusive'],
    ['ties', 'exclusive'],
    ['random', 'inclusive'],
    ['random', 'exclusive'],
  ] as const)('stores 7,500 records, 21 on every whole minute, exactly once with %s order and %s toDate', async (order, toDate) => {
    const { s, schema } = await setup({ records: 7_500, start: DAY_START, end: DENSE_END, timePrecisionMs: 60_000, order, toDate, duplicateEvery: 700 });
    const before = s.stats.analyticsRequests;
    const result = await sync(s, schema, { SYNC_WINDOW: '1h', UPSTREAM_TO_DATE: toDate }, {}, DENSE_END);
    expect(result).toMatchObject({ status: 'succeeded', windows: 6, records: 7_500 });
    expect(await expectExactDataset(bed.pool, schema, s, DAY_START, DENSE_END)).toBe(7_500);
    // 1,250 records an hour need 2 requests a window at least.
    expect(s.stats.analyticsRequests - before).toBeLessThanOrEqual(Math.ceil(12 * 1.3));
    // A re-run (every window re-read, split ahead from the ledger's counts) changes nothing.
    expect(await sync(s, schema, { SYNC_WINDOW: '1h', UPSTREAM_TO_DATE: toDate }, {}, DENSE_END)).toMatchObject({ status: 'succeeded', records: 7_500 });
    await expectExactDataset(bed.pool, schema, s, DAY_START, DENSE_END);
  });

  /** 5,000 records on whole minutes, and 1,200 more at one instant in the afternoon. */
  async function withCrowdedInstant(order: 'stable' | 'ties'): Promise<{ s: Simulator; schema: string; instant: Date }> {
    const setUp = await setup({ records: 5000, start: DAY_START, end: DAY_END, timePrecisionMs: 60_000, order });
    const instant = new Date('2026-10-31T15:42:00Z');
    setUp.s.insertRecords(setUp.s.dataset.plausibleRecords(1200, instant, instant, true, 99));
    return { ...setUp, instant };
  }

  it('parks the window of an instant holding more than a page when ties are reshuffled, committing nothing of it, and goes on', async () => {
    const { s, schema } = await withCrowdedInstant('ties');
    const unstable: number[] = [];
    const result = await sync(s, schema, { SYNC_WINDOW: '1h', SYNC_WINDOW_ATTEMPTS: '2' }, { unstableInstant: (e) => unstable.push(e.records) });
    // Loud (a parked window: src/sync/run/park.ts), but the source does not stall at it. The simulator's
    // toDate is inclusive: the instant ending at 15:42:00 holds its records too (and keeps them), so
    // both instants next to it are read twice and found unstable; either parks the window.
    expect(result).toMatchObject({ status: 'succeeded', windows: 23, parked: 1, parkedWindows: 1 });
    expect(unstable.length).toBeGreaterThanOrEqual(2);
    // Nothing of its window is stored; the windows after it are, and the watermark passes it.
    expect((await watermarkOf(bed.pool, schema))?.toISOString()).toBe('2026-11-01T00:00:00.000Z');
    const { rows } = await bed.pool.query<{ n: number }>(
      `select count(*)::int as n from ${schema}.records where window_start >= '2026-10-31T15:00:00Z' and window_start < '2026-10-31T16:00:00Z'`,
    );
    expect(rows[0]!.n).toBe(0);
    const parked = await bed.pool.query(`select window_start, reason from ${schema}.sync_windows where status = 'parked'`);
    expect(parked.rows).toEqual([
      {
        window_start: new Date('2026-10-31T15:00:00Z'),
        reason: expect.stringMatching(/instant 2026-10-31T15:4(1:59|2:00)\.000Z\.\.2026-10-31T15:42:0[01]\.000Z holds 12\d\d records, more than a page/),
      },
    ]);
  });

  it('reads an instant holding more than a page exactly when the order is stable', async () => {
    const { s, schema } = await withCrowdedInstant('stable');
    const result = await sync(s, schema, { SYNC_WINDOW: '1h' });
    expect(result).toMatchObject({ status: 'succeeded', windows: 24, records: 6200 });
    expect(await expectExactDataset(bed.pool, schema, s, DAY_START, DAY_END)).toBe(6200);
  });
});
