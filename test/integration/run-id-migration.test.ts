/**
 * 20261201000000000_records_run_id: `records` without run_id (the ledger's sync_windows holds it per
 * window), its indexes as they were. A populated
 * database of the previous release keeps every record exactly (its run then read from the ledger),
 * its partitions, its owner and grants (those on run_id go with it), records_typed with its owner,
 * grants and columns (run_id now the window's), and its publications (a column list without
 * run_id); a sync afterwards is exact; the Down part brings run_id back from the ledger; the
 * embedded database (PGlite) migrates a populated schema too.
 */
import { rmSync } from 'node:fs';
import { runner } from 'node-pg-migrate';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startSimulator } from '@analytics-exporter/simulator';
import { startEmbeddedDatabase } from '../../src/db/embedded.js';
import { migrate, MIGRATIONS_DIR, MIGRATIONS_TABLE } from '../../src/db/migrate.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { runSync } from '../../src/sync/run/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { initialisedDataDir } from '../helpers/embedded.js';
import { MIGRATIONS, migrateUpTo } from '../helpers/migrations.js';
import { pgDeps } from '../helpers/pg-deps.js';
import { privilegeLines } from '../helpers/privileges.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const RUN_ID = '20261201000000000_records_run_id';
const PREVIOUS = MIGRATIONS[MIGRATIONS.indexOf(RUN_ID) - 1]!;
const START = new Date('2026-09-27T00:00:00Z');
const END = new Date('2026-10-04T00:00:00Z');
const SYNC_ENV = { SYNC_WINDOW: '1d' };

/** Every record with its run (`records`: its own column; `ledger`: its window's), in id order. */
async function recordsDigest(pool: Pool, schema: string, run: 'records' | 'ledger'): Promise<{ n: number; digest: string }> {
  const { rows } = await pool.query<{ n: number; digest: string }>(
    `select count(*)::int as n,
            md5(string_agg(concat_ws(' ', r.id, r.source, r.payload::text, r.event_time, r.window_start, ${run === 'records' ? 'r.run_id' : 'w.run_id'}), E'\\n' order by r.id)) as digest
       from ${schema}.records r left join ${schema}.sync_windows w using (source, window_start)`,
  );
  return rows[0]!;
}

async function columnsOf(pool: Pool, relation: string): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `select attname as name from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped order by attnum`,
    [relation],
  );
  return rows.map((r) => r.name);
}

/** `name method` of each index on `relation`. */
async function indexesOf(pool: Pool, relation: string): Promise<string[]> {
  const { rows } = await pool.query<{ line: string }>(
    `select c.relname || ' ' || am.amname as line from pg_index i join pg_class c on c.oid = i.indexrelid join pg_am am on am.oid = c.relam
      where i.indrelid = $1::regclass order by 1`,
    [relation],
  );
  return rows.map((r) => r.line);
}

async function migrateDown(schema: string): Promise<void> {
  await runner({
    databaseUrl: db.url,
    dir: MIGRATIONS_DIR,
    direction: 'down',
    count: 1,
    schema,
    migrationsSchema: schema,
    migrationsTable: MIGRATIONS_TABLE,
    checkOrder: true,
    logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
  });
}

async function createRoles(...roles: string[]): Promise<void> {
  for (const role of roles) {
    await bed.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role}; end if; end $$`);
  }
}

/**
 * `schema` as the previous release left it after a sync: a sync of this release into `scratch`,
 * copied over with each record's run from its ledger row (a sync stores a window's records in the
 * transaction writing that row), and records_typed as the previous release defined it.
 */
async function previousRelease(pool: Pool, scratch: string, schema: string): Promise<void> {
  await migrateUpTo(pool, schema, PREVIOUS);
  const { rows: parts } = await pool.query<{ name: string; bound: string }>(
    `select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = $1::regclass order by 1`,
    [`${scratch}.records`],
  );
  for (const p of parts) await pool.query(`create table ${schema}.${p.name} partition of ${schema}.records ${p.bound}`);
  await pool.query(
    `insert into ${schema}.records (id, event_time, window_start, run_id, source, payload) overriding system value
     select r.id, r.event_time, r.window_start, w.run_id, r.source, r.payload from ${scratch}.records r join ${scratch}.sync_windows w using (source, window_start)`,
  );
  await pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.records`, [`${schema}.records`]);
  for (const table of ['sync_windows', 'sync_state', 'record_fields']) await pool.query(`insert into ${schema}.${table} select * from ${scratch}.${table}`);
  await pool.query(`insert into ${schema}.sync_runs overriding system value select * from ${scratch}.sync_runs`);
  await pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.sync_runs`, [`${schema}.sync_runs`]);
  const definition = `create view ${schema}.records_typed as select r.id, r.source, r.event_time, r.window_start, w.window_end, r.run_id, w.loaded_at, r.payload ->> 'eventType' as event_type from ${schema}.records r left join ${schema}.sync_windows w on w.source = r.source and w.window_start = r.window_start`;
  await pool.query(definition);
  await pool.query(`insert into ${schema}.derived_settings (name, value) values ('typed_view', to_jsonb($1::text))`, [definition]);
}

describe('migration 20261201000000000_records_run_id (real PostgreSQL)', () => {
  it('drops run_id in place: records exact, owner and grants, records_typed, publications; a sync after is exact; Down restores run_id', async () => {
    const s = await startSimulator({ port: 0, records: 700, start: START, end: END, duplicateEvery: 50 });
    closers.push(() => s.close());
    const client = simClient(s);
    closers.push(() => client.close());
    const scratch = 'indexes_scratch';
    const schema = 'indexes_up';
    await migrate(bed.pool, scratch, silentLogger);
    const loaded = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema: scratch, log: silentLogger }), { from: START, to: END });
    expect(loaded).toMatchObject({ status: 'succeeded', records: 700 });
    await previousRelease(bed.pool, scratch, schema);

    await createRoles('ix_owner', 'ix_reader', 'ix_lead', 'ix_analyst', 'ix_columns', 'ix_view_owner');
    const records = `${schema}.records`;
    const view = `${schema}.records_typed`;
    const part = `${schema}.records_20261001_20261101`;
    await bed.pool.query(`grant usage on schema ${schema} to ix_lead`);
    await bed.pool.query(`alter table ${records} owner to ix_owner`);
    await bed.pool.query(`alter table ${part} owner to ix_owner`);
    await bed.pool.query(`grant select on ${records} to ix_reader`);
    await bed.pool.query(`grant select on ${records} to ix_lead with grant option`);
    await bed.pool.query(`set role ix_lead`);
    await bed.pool.query(`grant select on ${records} to ix_analyst`);
    await bed.pool.query(`reset role`);
    await bed.pool.query(`grant select (id, payload) on ${records} to ix_columns`);
    await bed.pool.query(`grant select (run_id) on ${records} to ix_columns`);
    await bed.pool.query(`grant delete on ${part} to ix_reader`);
    // The view reads as its owner: records and the ledger.
    await bed.pool.query(`grant usage on schema ${schema} to ix_view_owner`);
    await bed.pool.query(`grant select on ${records}, ${schema}.sync_windows to ix_view_owner`);
    await bed.pool.query(`alter view ${view} owner to ix_view_owner`);
    await bed.pool.query(`grant select on ${view} to ix_reader`);
    await bed.pool.query(`grant select (id, run_id) on ${view} to ix_columns`);
    // Publications: one of the whole table, one with a column list naming run_id and a row filter.
    await bed.pool.query(`create publication ix_pub_all for table ${records} with (publish = 'insert, truncate')`);
    await bed.pool.query(
      `create publication ix_pub_list for table ${records} (id, source, payload, run_id) where (source <> 'private') with (publish = 'insert', publish_via_partition_root = true)`,
    );
    closers.push(() => bed.pool.query('drop publication if exists ix_pub_all, ix_pub_list'));

    const before = await recordsDigest(bed.pool, schema, 'records');
    expect(before.n).toBe(700);
    expect(before).toEqual(await recordsDigest(bed.pool, schema, 'ledger'));
    const grantsBefore = await privilegeLines(bed.pool, [records, part, view]);
    expect(grantsBefore).toEqual(
      expect.arrayContaining([
        'records ix_owner run_id ix_owner ix_columns SELECT false',
        'records ix_owner - ix_lead ix_analyst SELECT false',
        'records_typed ix_view_owner run_id ix_view_owner ix_columns SELECT false',
      ]),
    );
    const viewColumns = await columnsOf(bed.pool, view);
    const typedBefore = await bed.pool.query(`select * from ${view} order by id`);

    expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([RUN_ID]);
    expect(await columnsOf(bed.pool, records)).toEqual(['id', 'event_time', 'window_start', 'source', 'payload']);
    expect(await recordsDigest(bed.pool, schema, 'ledger')).toEqual(before);
    expect(await indexesOf(bed.pool, records)).toEqual(['records_event_time_idx btree', 'records_source_window_start_idx btree']);
    expect(await indexesOf(bed.pool, part)).toEqual([
      'records_20261001_20261101_event_time_idx btree',
      'records_20261001_20261101_source_window_start_idx btree',
    ]);
    // Every grant but the one on run_id, by the same grantors; records_typed's column grant on run_id stays (the view keeps the column).
    expect(await privilegeLines(bed.pool, [records, part, view])).toEqual(grantsBefore.filter((l) => !l.startsWith('records ix_owner run_id ')));
    expect(await columnsOf(bed.pool, view)).toEqual(viewColumns);
    expect((await bed.pool.query(`select * from ${view} order by id`)).rows).toEqual(typedBefore.rows);
    const setting = await bed.pool.query<{ value: string }>(`select value #>> '{}' as value from ${schema}.derived_settings where name = 'typed_view'`);
    expect(setting.rows[0]!.value).toContain('w.run_id');
    expect(setting.rows[0]!.value).not.toContain('r.run_id');
    const published = await bed.pool.query<{ line: string }>(
      `select concat_ws(' ', p.pubname, c.relname,
                        (select string_agg(a.attname, ',' order by a.attnum) from pg_attribute a where a.attrelid = c.oid and a.attnum = any (pr.prattrs::int2[])),
                        pg_get_expr(pr.prqual, pr.prrelid)) as line
         from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid join pg_class c on c.oid = pr.prrelid
        where p.pubname like 'ix_pub_%' order by 1`,
    );
    expect(published.rows.map((r) => r.line)).toEqual(['ix_pub_all records', "ix_pub_list records id,source,payload (source <> 'private'::text)"]);

    // A sync afterwards (the migrations after this one too): every window replaced exactly, records_typed's run the window's.
    await migrate(bed.pool, schema, silentLogger);
    const again = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema, log: silentLogger }), { from: START, to: END });
    expect(again).toMatchObject({ status: 'succeeded', records: 700 });
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(700);
    const runs = await bed.pool.query<{ n: number }>(
      `select count(*)::int as n from ${view} t join ${schema}.sync_windows w using (source, window_start)
        where t.run_id = w.run_id and w.run_id = (select max(id) from ${schema}.sync_runs)`,
    );
    expect(runs.rows[0]!.n).toBe(700);

    // Down: run_id again, each record's from its window's ledger row.
    const after = await recordsDigest(bed.pool, schema, 'ledger');
    while ((await bed.pool.query(`select 1 from ${schema}.pgmigrations where name = $1`, [RUN_ID])).rowCount === 1) await migrateDown(schema);
    expect(await columnsOf(bed.pool, records)).toEqual(['id', 'event_time', 'window_start', 'source', 'payload', 'run_id']);
    expect(await recordsDigest(bed.pool, schema, 'records')).toEqual(after);
    expect(await indexesOf(bed.pool, records)).toEqual(['records_event_time_idx btree', 'records_source_window_start_idx btree']);
    expect(await columnsOf(bed.pool, view)).toEqual(expect.arrayContaining(['run_id', 'event_type']));
  });

  it('fails naming the object when something of ones own depends on run_id, and changes nothing', async () => {
    const schema = 'indexes_dependent';
    await migrateUpTo(bed.pool, schema, PREVIOUS);
    await bed.pool.query(`create view ${schema}.my_runs as select distinct run_id from ${schema}.records`);
    await expect(migrate(bed.pool, schema, silentLogger, { count: 1 })).rejects.toThrow(/my_runs/);
    expect(await columnsOf(bed.pool, `${schema}.records`)).toContain('run_id');
    expect(await indexesOf(bed.pool, `${schema}.records`)).toEqual(['records_event_time_idx btree', 'records_source_window_start_idx btree']);
  });
});

describe('migration 20261201000000000_records_run_id (embedded PGlite)', () => {
  it('migrates a populated schema: records kept, run_id gone, and a sync after is exact', async () => {
    const dir = await initialisedDataDir('ae-indexes-');
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const embedded = await startEmbeddedDatabase(dir, silentLogger);
    const pool = createPool(embedded.url, silentLogger, { max: 2 });
    onTestFinished(async () => {
      await pool.end();
      await embedded.close();
    });
    const s = await startSimulator({ port: 0, records: 300, start: START, end: END });
    const client = simClient(s);
    onTestFinished(async () => {
      await client.close();
      await s.close();
    });
    await migrate(pool, 'scratch', silentLogger);
    const loaded = await runSync(pgDeps({ pool, client, ...syncSettings(SYNC_ENV), schema: 'scratch', log: silentLogger }), { from: START, to: END });
    expect(loaded).toMatchObject({ status: 'succeeded', records: 300 });
    await previousRelease(pool, 'scratch', 'analytics');
    const before = await recordsDigest(pool, 'analytics', 'records');
    expect(before.n).toBe(300);

    expect(await migrate(pool, 'analytics', silentLogger)).toEqual(MIGRATIONS.slice(MIGRATIONS.indexOf(RUN_ID)));
    expect(await columnsOf(pool, 'analytics.records')).toEqual(['id', 'event_time', 'window_start', 'source', 'payload']);
    expect(await recordsDigest(pool, 'analytics', 'ledger')).toEqual(before);
    expect(await indexesOf(pool, 'analytics.records')).toEqual(['records_event_time_idx btree', 'records_source_window_start_idx btree']);
    const again = await runSync(pgDeps({ pool, client, ...syncSettings(SYNC_ENV), schema: 'analytics', log: silentLogger }), { from: START, to: END });
    expect(again).toMatchObject({ status: 'succeeded', records: 300 });
    expect(await expectExactDataset(pool, 'analytics', s, START, END)).toBe(300);
  }, 120_000);
});
