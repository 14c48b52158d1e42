/**
 * The embedded database (PGlite, no DATABASE_URL) inserts page by page instead of COPY: a page it
 * refuses for a data reason is inserted again in smaller batches under savepoints, its refused records
 * quarantined with the SQLSTATE and message; SYNC_SHRINK=keep's union works there too.
 */
import { rmSync } from 'node:fs';
import { startSimulator } from '@analytics-exporter/simulator';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { runSync } from '../../src/sync/run/run.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { canonicalJson, simClient, storedMultiset, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const START = new Date('2026-10-31T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');

describe('embedded PGlite database', () => {
  // A start of PGlite (WebAssembly) and three syncs: well within this timeout on a loaded machine.
  it('quarantines what it refuses (1e200000, -1e200000, 1e-20000) and loads the rest exactly; keep keeps what E6 deleted', { timeout: 120_000 }, async () => {
    const dir = await initialisedDataDir('ae-pglite-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const db = await startEmbeddedDatabase(dir, silentLogger);
    onTestFinished(() => db.close());
    const pool = createPool(db.url, silentLogger, { max: 2 });
    onTestFinished(() => pool.end());
    await migrate(pool, 'analytics', silentLogger);
    const sim = await startSimulator({ port: 0, records: 600, start: START, end: END, outOfRangeEvery: 100 });
    onTestFinished(() => sim.close());
    const client = simClient(sim);
    onTestFinished(() => client.close());
    const run = (shrink: string) =>
      runSync(pgDeps({ pool, client, schema: 'analytics', log: silentLogger, ...syncSettings({ SYNC_WINDOW: '6h', SYNC_SHRINK: shrink }) }), {
        from: START,
        to: END,
      });

    const refused = (t: string) => /e200000|e-20000/.test(t);
    const servedNow = () => sim.servedJson(START, END);
    const stored = (texts: string[]) =>
      texts
        .filter((t) => !refused(t))
        .map((t) => canonicalJson(JSON.parse(t)))
        .sort();
    expect(await run('keep')).toMatchObject({ status: 'succeeded', records: 594, quarantined: 6 });
    const before = await storedMultiset(pool, 'analytics');
    expect(before).toEqual(stored(servedNow()));
    const { rows } = await pool.query<{ payload_text: string; sqlstate: string; message: string }>(
      'select payload_text, sqlstate, message from analytics.records_quarantine order by payload_text',
    );
    expect(rows.map((r) => r.payload_text)).toEqual(servedNow().filter(refused).sort());
    expect(rows.every((r) => r.sqlstate === '22003' && r.message === 'value overflows numeric format')).toBe(true);

    // Five deleted upstream: keep keeps them, replace lets them go.
    const deleted = sim.deleteRecords({ from: new Date('2026-10-31T07:00:00Z'), to: new Date('2026-10-31T08:00:00Z'), count: 5 });
    expect(deleted).toHaveLength(5);
    expect(await run('keep')).toMatchObject({ status: 'succeeded', records: 594, quarantined: 6 });
    expect(await storedMultiset(pool, 'analytics')).toEqual(before);
    expect(await run('replace')).toMatchObject({ status: 'succeeded', records: 589, quarantined: 6 });
    expect(await storedMultiset(pool, 'analytics')).toEqual(stored(servedNow()));
  });
});
