/**
 * Proves the test harness itself: the shared cluster answers, databases are isolated, and a
 * private cluster survives restart and kill (the shared one is never restarted).
 */
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { useTestDatabase } from '../helpers/db.js';
import { createTestDatabase, findPostgresBinaries, startThrowawayCluster, type TestDatabase } from '../helpers/postgres.js';

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('shared cluster', () => {
  const db = useTestDatabase();

  it('runs the PostgreSQL version that is installed (or TEST_DATABASE_URL’s)', async () => {
    const [row] = await query<{ version: string }>(db.url, 'select version()');
    const expected = process.env.TEST_DATABASE_URL ? /^PostgreSQL \d+/ : new RegExp(`^PostgreSQL ${findPostgresBinaries().major}\\b`);
    expect(row?.version).toMatch(expected);
  });

  it('gives the file its own database, reachable through a pool', async () => {
    const pool = db.pool({ max: 2 });
    const { rows } = await pool.query<{ name: string }>('select current_database() as name');
    expect(rows[0]?.name).toMatch(/^postgres_harness_[0-9a-f]{12}$/);
    expect(db.url).toContain(`/${rows[0]?.name}`);
  });

  it('keeps two test databases isolated from each other', async () => {
    const created: TestDatabase[] = [];
    try {
      const a = await createTestDatabase(inject('postgresUrl'), 'isolation a');
      created.push(a);
      const b = await createTestDatabase(inject('postgresUrl'), 'isolation a');
      created.push(b);
      expect(a.name).not.toBe(b.name);

      await query(a.url, 'create table widgets (id int primary key); insert into widgets values (1)');
      const [inA] = await query<{ n: number }>(a.url, 'select count(*)::int as n from widgets');
      const [inB] = await query<{ t: string | null }>(b.url, "select to_regclass('widgets')::text as t");
      expect(inA?.n).toBe(1);
      expect(inB?.t).toBeNull();

      // drop() succeeds although a session is still connected, and the database is gone afterwards.
      const lingering = new pg.Client({ connectionString: a.url });
      lingering.on('error', () => undefined);
      await lingering.connect();
      await a.drop();
      await lingering.end().catch(() => undefined);
      const rows = await query(inject('postgresUrl'), `select 1 from pg_database where datname = '${a.name}'`);
      expect(rows).toHaveLength(0);
    } finally {
      await Promise.all(created.map((database) => database.drop()));
    }
  });
});

describe('private cluster', () => {
  let stop: (() => Promise<void>) | undefined;
  afterAll(() => stop?.());

  it('keeps its data across restart() and kill(), and stop() removes its folder', async () => {
    const startedAt = performance.now();
    const cluster = await startThrowawayCluster({ ignoreTestDatabaseUrl: true });
    stop = () => cluster.stop();
    const startMs = performance.now() - startedAt;
    expect(cluster.url).toBe(`postgres://postgres@127.0.0.1:${cluster.port}/postgres`);
    expect(startMs).toBeLessThan(15_000);

    await query(cluster.url, 'create table survivors (id int); insert into survivors values (42)');

    await cluster.restart();
    expect(await query(cluster.url, 'select id from survivors')).toEqual([{ id: 42 }]);

    // A crash-like stop cuts off open sessions; restart() runs crash recovery and serves again.
    const victim = new pg.Client({ connectionString: cluster.url });
    victim.on('error', () => undefined);
    await victim.connect();
    await cluster.kill();
    await expect(victim.query('select 1')).rejects.toThrow();
    await expect(query(cluster.url, 'select 1')).rejects.toThrow();
    await victim.end().catch(() => undefined);
    await cluster.restart();
    expect(await query(cluster.url, 'select id from survivors')).toEqual([{ id: 42 }]);

    const dataDir = cluster.dataDir;
    expect(dataDir && existsSync(dataDir)).toBe(true);
    await cluster.stop();
    expect(existsSync(dataDir ?? '')).toBe(false);
    await cluster.stop(); // idempotent
  });
});
