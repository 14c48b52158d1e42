import { describe, expect, it } from 'vitest';
import { migrate, pendingMigrations } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { useTestDatabase } from '../helpers/db.js';
import { MIGRATIONS } from '../helpers/migrations.js';

describe('migrate', () => {
  const db = useTestDatabase();

  it('creates the schema and its tables, then has nothing to do', async () => {
    const pool = createPool(db.url, silentLogger);
    try {
      expect(await pendingMigrations(pool, 'etl_a')).toEqual(MIGRATIONS);
      expect(await migrate(pool, 'etl_a', silentLogger)).toEqual(MIGRATIONS);
      expect(await migrate(pool, 'etl_a', silentLogger)).toEqual([]);
      expect(await pendingMigrations(pool, 'etl_a')).toEqual([]);
      const { rows } = await pool.query<{ table_name: string }>("select table_name from information_schema.tables where table_schema = 'etl_a' order by 1");
      expect(rows.map((r) => r.table_name)).toEqual([
        'derived_settings',
        'pgmigrations',
        'record_field_changes',
        'record_fields',
        'records',
        'records_quarantine',
        'sync_runs',
        'sync_state',
        'sync_windows',
      ]);
      const path = await pool.query<{ search_path: string }>('show search_path');
      expect(path.rows[0]!.search_path).toBe('"$user", public');
    } finally {
      await pool.end();
    }
  });

  it('lets several processes start at once without breaking each other', async () => {
    const pools = Array.from({ length: 4 }, () => createPool(db.url, silentLogger, { max: 1 }));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p, 'etl_b', silentLogger)));
      expect(results.flat()).toEqual(MIGRATIONS);
      const { rows } = await pools[0]!.query<{ n: number }>('select count(*)::int as n from etl_b.pgmigrations');
      expect(rows[0]!.n).toBe(MIGRATIONS.length);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('keeps schemas apart', async () => {
    const pool = createPool(db.url, silentLogger);
    try {
      await migrate(pool, 'etl_c', silentLogger);
      await migrate(pool, 'etl_d', silentLogger);
      await pool.query("insert into etl_c.sync_runs (source, range_start, range_end) values ('default', now(), now())");
      const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from etl_d.sync_runs');
      expect(rows[0]!.n).toBe(0);
    } finally {
      await pool.end();
    }
  });
});
