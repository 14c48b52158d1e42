import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../../src/log.js';
import { MIGRATIONS } from '../helpers/migrations.js';

describe('embedded PGlite database', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ae-pglite-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs the migrations through pg and keeps data across restarts', async () => {
    const first = await startEmbeddedDatabase(dir, silentLogger);
    let pool = createPool(first.url, silentLogger, { max: 2 });
    expect(await migrate(pool, 'analytics', silentLogger)).toEqual(MIGRATIONS);
    await pool.query(`insert into analytics.sync_runs (range_start, range_end, status) values (now(), now(), 'succeeded')`);
    await pool.end();
    await first.close();

    const second = await startEmbeddedDatabase(dir, silentLogger);
    pool = createPool(second.url, silentLogger, { max: 2 });
    expect(await migrate(pool, 'analytics', silentLogger)).toEqual([]);
    const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from analytics.sync_runs');
    expect(rows[0]!.n).toBe(1);
    await pool.end();
    await second.close();
  });
});
