/**
 * An upstream that serves fewer records per page than `pageSize` asks (issue 24's first "why"):
 * the reference promises nothing about page sizes being honoured, so a page is complete only when
 * it holds all of its `totalRecords`, whatever its envelope echoes. Against real PostgreSQL and
 * the simulator's `pageSizeCap`, the sync must store every record exactly once and say that it
 * learned a smaller size.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
let schemaCounter = 0;

describe('sync against an E6 that clamps the page size (real PostgreSQL, the simulator)', () => {
  it.each([
    [200, 'served'],
    [200, 'asked'],
    [100, 'asked'],
    [37, 'served'],
  ] as const)('asked 1000 a page, served %i (echoing the size %s): 6,000 records stored exactly once', async (cap, echo) => {
    // 250 records an hour: every 1-hour window "fits" the 1,000 asked, so a sync that trusts the
    // envelope keeps only the first page of each.
    const s = await startSimulator({ port: 0, records: 6000, start: START, end: END, pageSizeCap: cap, pageSizeCapEcho: echo });
    closers.push(() => s.close());
    const client = simClient(s);
    closers.push(() => client.close());
    const schema = `clamp_${++schemaCounter}`;
    await migrate(bed.pool, schema, silentLogger);
    const clamped: { asked: number; served: number; echoed: number }[] = [];
    const run = () =>
      runSync(
        pgDeps({
          pool: bed.pool,
          client,
          ...syncSettings({ SYNC_WINDOW: '1h', SYNC_PAGE_SIZE: '1000' }),
          schema,
          log: silentLogger,
          observer: { pageSizeClamped: (e) => clamped.push(e) },
        }),
        { from: START, to: END },
      );
    expect(await run()).toMatchObject({ status: 'succeeded', windows: 24, records: 6000 });
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(6000);
    // Learned once in the run, from the first short page; every later request asks for what is served.
    expect(clamped).toEqual([{ asked: 1000, served: cap, echoed: echo === 'asked' ? 1000 : cap }]);
    // A re-run reads every window again and changes nothing.
    expect(await run()).toMatchObject({ status: 'succeeded', records: 6000 });
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(6000);
  });
});
