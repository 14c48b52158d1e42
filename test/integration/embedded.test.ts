import { rmSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { EMBEDDED_WAL_LIMIT_BYTES, walBytes } from '../../src/db/maintenance.js';
import { migrate } from '../../src/db/migrate.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { runSync } from '../../src/sync/run/run.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { MIGRATIONS } from '../helpers/migrations.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';

const MIB = 1024 * 1024;

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
      const first = await runSync(pgDeps({ ...deps, ...syncSettings({ SYNC_WINDOW: '1d' }) }), { from: start, to: end });
      expect(first).toMatchObject({ status: 'succeeded', records: 300 });
      expect(await partitionNames()).toEqual(['records_20260901_20261001', 'records_20261001_20261101']);
      await expectExactDataset(pool, 'analytics', sim, start, end);
      const later = () => Date.parse('2026-10-20T00:00:00Z');
      const retained = await runSync(pgDeps({ ...deps, ...syncSettings({ SYNC_WINDOW: '1d', RETENTION: '15d' }) }), { to: end, now: later });
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

  // The backend touches all its shared buffers at start and the WebAssembly heap never shrinks:
  // PGlite's 128 MB would be most of a 1,000,000-record sync's peak RSS. With data checksums every
  // first read after a bulk load would log each page whole to set its hint bits.
  it('starts with 32 MB of shared buffers, and a new folder has no data checksums', async () => {
    const dir = await initialisedDataDir('ae-pglite-settings-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const db = await startEmbeddedDatabase(dir, silentLogger);
    const pool = createPool(db.url, silentLogger, { max: 1 });
    try {
      const { rows } = await pool.query<{ name: string; setting: string }>(
        `select name, setting from pg_settings where name in ('shared_buffers', 'data_checksums', 'wal_recycle') order by name`,
      );
      expect(Object.fromEntries(rows.map((r) => [r.name, r.setting]))).toEqual({
        data_checksums: 'off',
        shared_buffers: String((32 * MIB) / 8192),
        wal_recycle: 'off',
      });
    } finally {
      await pool.end();
      await db.close();
    }
  }, 60_000);

  // 120,000 rows of about 1 kB: about 130 MB of WAL, twice the guard's bound. PGlite's backend is
  // single-user: without the guard nothing checkpoints before close, and with PostgreSQL's defaults
  // (min_wal_size 80 MB, wal_recycle on, 16 MB segments) the checkpoint of close keeps 80 MB or more.
  it('keeps its WAL bounded while writing and leaves one small segment at rest', async () => {
    const dir = await initialisedDataDir('ae-pglite-wal-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    let db = await startEmbeddedDatabase(dir, silentLogger);
    let pool = createPool(db.url, silentLogger, { max: 1 });
    const { rows: segment } = await pool.query<{ bytes: string }>(`select setting as bytes from pg_settings where name = 'wal_segment_size'`);
    expect(Number(segment[0]!.bytes)).toBe(MIB);
    await pool.query('create table filler (id int primary key, body text not null)');
    let peak = 0;
    let checkpoints = 0;
    for (let batch = 0; batch < 12; batch++) {
      await pool.query(`insert into filler select i, repeat(md5(i::text), 32) from generate_series($1::int, $1::int + 9999) i`, [batch * 10_000]);
      peak = Math.max(peak, walBytes(dir));
      // What the guard's timer does every second, here after each batch, so the bound does not depend on timing.
      if (await db.checkWal()) checkpoints++;
    }
    await pool.end();
    await db.close();
    expect(checkpoints).toBeGreaterThan(0);
    // The bound plus one batch (about 11 MB) written after the last check.
    expect(peak).toBeLessThanOrEqual(EMBEDDED_WAL_LIMIT_BYTES + 16 * MIB);
    expect(walBytes(dir)).toBeLessThanOrEqual(2 * MIB);

    db = await startEmbeddedDatabase(dir, silentLogger);
    pool = createPool(db.url, silentLogger, { max: 1 });
    const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from filler');
    expect(rows[0]!.n).toBe(120_000);
    await pool.end();
    await db.close();
  }, 120_000);

  // Each run's lookback deletes the rows of its windows and loads them again. PGlite's backend is
  // single-user, without autovacuum: without the exporter's own pass every reload leaves its rows
  // behind as dead tuples and the table grows by its size each time (six loads: six times the size).
  it('vacuums and analyses what autovacuum would, so reloaded rows do not pile up', async () => {
    const dir = await initialisedDataDir('ae-pglite-vacuum-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const db = await startEmbeddedDatabase(dir, silentLogger);
    const pool = createPool(db.url, silentLogger, { max: 1 });
    try {
      await pool.query('create table reloaded (id int primary key, body text not null)');
      const load = () => pool.query(`insert into reloaded select i, repeat(md5(i::text), 4) from generate_series(1, 20000) i`);
      await load();
      const sizeOf = async () => Number((await pool.query<{ bytes: string }>(`select pg_table_size('reloaded') as bytes`)).rows[0]!.bytes);
      const once = await sizeOf();
      const passes = [];
      for (let reload = 0; reload < 5; reload++) {
        await pool.query('delete from reloaded');
        await load();
        // Statistics reach pg_stat_all_tables at most once a second; this makes them reach it now.
        await pool.query('select pg_stat_force_next_flush()');
        await pool.query('select 1');
        passes.push(await db.autovacuum());
      }
      expect(passes.every((p) => p.vacuumed.includes('public.reloaded'))).toBe(true);
      expect(passes[0]!.analyzed).toContain('public.reloaded');
      // The live rows and the dead ones of the last reload, whose space the next load reuses.
      expect(await sizeOf()).toBeLessThanOrEqual(2.5 * once);
      const { rows } = await pool.query<{ n: number; analyzed: boolean }>(
        `select n_live_tup::int as n, last_analyze is not null as analyzed from pg_stat_all_tables where relname = 'reloaded'`,
      );
      expect(rows[0]).toEqual({ n: 20_000, analyzed: true });
    } finally {
      await pool.end();
      await db.close();
    }
  }, 120_000);
});
