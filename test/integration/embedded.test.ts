import { rmSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../../src/log.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';

describe('embedded PGlite database', () => {
  // Two starts of PGlite (WebAssembly) and a sync: well within the default timeout on a quiet machine, not on a loaded one.
  it('runs the migrations through pg, keeps data across restarts, and partitions records', async () => {
    // Initialised but empty (PGlite's first start in an empty folder is serve.test.ts's `npm start` case).
    const dir = await initialisedDataDir('ae-pglite-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const first = await startEmbeddedDatabase(dir, silentLogger);
    let pool = createPool(first.url, silentLogger, { max: 2 });
    expect(await migrate(pool, 'analytics', silentLogger)).toEqual(MIGRATIONS);
    await pool.query(`insert into analytics.sync_runs (source, range_start, range_end, status) values ('default', now(), now(), 'succeeded')`);
    await pool.end();
    await first.close();

    const second = await startEmbeddedDatabase(dir, silentLogger);
    pool = createPool(second.url, silentLogger, { max: 2 });
    expect(await migrate(pool, 'analytics', silentLogger)).toEqual([]);
    const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from analytics.sync_runs');
    expect(rows[0]!.n).toBe(1);

    // records is partitioned there too: a run creates its monthly partitions, RETENTION drops the older one.
    const start = new Date('2026-09-20T00:00:00Z');
    const end = new Date('2026-10-10T00:00:00Z');
    const sim = await startSimulator({ port: 0, records: 300, start, end });
    const client = simClient(sim);
    try {
      const deps = { pool, client, schema: 'analytics', log: silentLogger };
      const first = await runSync({ ...deps, ...syncSettings({ SYNC_WINDOW: '1d' }) }, { from: start, to: end });
      expect(first).toMatchObject({ status: 'succeeded', records: 300 });
      expect(await partitionNames()).toEqual(['records_20260901_20261001', 'records_20261001_20261101']);
      await expectExactDataset(pool, 'analytics', sim, start, end);
      const later = () => Date.parse('2026-10-20T00:00:00Z');
      const retained = await runSync({ ...deps, ...syncSettings({ SYNC_WINDOW: '1d', RETENTION: '15d' }) }, { to: end, now: later });
      expect(retained).toMatchObject({ status: 'succeeded' });
      expect(await partitionNames()).toEqual(['records_20261001_20261101']);
      await expectExactDataset(pool, 'analytics', sim, new Date('2026-10-01T00:00:00Z'), end);
      const expired = await pool.query<{ n: number }>('select count(*)::int as n from analytics.sync_windows where expired_at is not null');
      expect(expired.rows[0]!.n).toBe(11);
    } finally {
      await client.close();
      await sim.close();
    }
    await pool.end();
    await second.close();

    async function partitionNames(): Promise<string[]> {
      const { rows: parts } = await pool.query<{ name: string }>(
        `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'analytics.records'::regclass order by 1`,
      );
      return parts.map((r) => r.name);
    }
  }, 90_000);
});
