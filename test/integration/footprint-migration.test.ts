/**
 * 20261129000000000_footprint: `records` rebuilt without its primary key index, window_end and
 * loaded_at (kept once per window in sync_windows), its columns reordered. A populated database of
 * the previous release keeps every record exactly, its partitions, its grants and records_typed;
 * the Down part brings the previous shape back.
 */
import { runner } from 'node-pg-migrate';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '@analytics-exporter/simulator';
import { migrate, MIGRATIONS_DIR, MIGRATIONS_TABLE } from '../../src/db/migrate.js';
import { silentLogger } from '../../src/log.js';
import { runSync } from '../../src/sync/run.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { MIGRATIONS, migrateUpTo } from '../helpers/migrations.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;

const FOOTPRINT = '20261129000000000_footprint';
const START = new Date('2026-09-27T00:00:00Z');
const END = new Date('2026-10-04T00:00:00Z');
const SYNC_ENV = { SYNC_WINDOW: '1d' };

/** Every record with its window's end and load time, as the previous release stored them, in id order. */
async function recordsDigest(schema: string, source: 'records' | 'ledger'): Promise<{ n: number; max: string; digest: string }> {
  const from =
    source === 'records'
      ? `${schema}.records r`
      : `${schema}.records r join ${schema}.sync_windows w on w.source = r.source and w.window_start = r.window_start`;
  const end = source === 'records' ? 'r.window_end' : 'w.window_end';
  const loaded = source === 'records' ? 'r.loaded_at' : 'w.loaded_at';
  const { rows } = await bed.pool.query<{ n: number; max: string; digest: string }>(
    `select count(*)::int as n, max(r.id)::text as max,
            md5(string_agg(concat_ws(' ', r.id, r.source, r.payload::text, r.event_time, r.window_start, ${end}, ${loaded}, r.run_id), E'\\n' order by r.id)) as digest
       from ${from}`,
  );
  return rows[0]!;
}

async function columnsOf(relation: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ name: string }>(
    `select attname as name from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped order by attnum`,
    [relation],
  );
  return rows.map((r) => r.name);
}

async function partitionsOf(schema: string): Promise<string[]> {
  const { rows } = await bed.pool.query<{ name: string; bound: string }>(
    `select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
       from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = $1::regclass order by 1`,
    [`${schema}.records`],
  );
  return rows.map((r) => `${r.name} ${r.bound}`);
}

async function primaryKeys(schema: string): Promise<number> {
  const { rows } = await bed.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relname like 'records%' and c.relname not like 'records_quarantine%' and c.relname not like 'records_hourly%'
        and c.relname not like 'records_daily%' and i.indisprimary`,
    [schema],
  );
  return rows[0]!.n;
}

describe('migration 20261129000000000_footprint (real PostgreSQL)', () => {
  it('rebuilds a populated records table exactly: window end and load time from the ledger, partitions, grants, records_typed; Down restores the previous shape', async () => {
    const s = await startSimulator({ port: 0, records: 700, start: START, end: END, duplicateEvery: 50 });
    closers.push(() => s.close());
    const client = simClient(s);
    closers.push(() => client.close());

    // A database as the previous release left it: filled by a sync of this release into a scratch
    // schema, copied over with each record's window end and load time from its ledger row (a sync
    // stores both in the transaction that writes that row), and records_typed as it was created.
    const scratch = 'footprint_scratch';
    const schema = 'footprint';
    await migrate(bed.pool, scratch, silentLogger);
    const loaded = await runSync({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema: scratch, log: silentLogger }, { from: START, to: END });
    expect(loaded).toMatchObject({ status: 'succeeded', records: 700 });
    const previous = MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!;
    await migrateUpTo(bed.pool, schema, previous);
    for (const p of await partitionsOf(scratch)) {
      const [name, ...bound] = p.split(' ');
      await bed.pool.query(`create table ${schema}.${name} partition of ${schema}.records ${bound.join(' ')}`);
    }
    await bed.pool.query(
      `insert into ${schema}.records (id, source, payload, event_time, window_start, window_end, loaded_at, run_id) overriding system value
       select r.id, r.source, r.payload, r.event_time, r.window_start, w.window_end, w.loaded_at, r.run_id
         from ${scratch}.records r join ${scratch}.sync_windows w using (source, window_start)`,
    );
    await bed.pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.records`, [`${schema}.records`]);
    await bed.pool.query(`insert into ${schema}.sync_windows select * from ${scratch}.sync_windows`);
    await bed.pool.query(`insert into ${schema}.sync_runs overriding system value select * from ${scratch}.sync_runs`);
    await bed.pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.sync_runs`, [`${schema}.sync_runs`]);
    await bed.pool.query(`insert into ${schema}.sync_state select * from ${scratch}.sync_state`);
    await bed.pool.query(`insert into ${schema}.record_fields select * from ${scratch}.record_fields`);
    await bed.pool.query(
      `create view ${schema}.records_typed as select id, source, event_time, window_start, window_end, run_id, loaded_at, payload ->> 'eventType' as event_type from ${schema}.records`,
    );
    await bed.pool.query(`insert into ${schema}.derived_settings (name, value) values ('typed_view', to_jsonb('the previous definition'::text))`);
    await bed.pool.query(
      `do $$ begin if not exists (select from pg_roles where rolname = 'footprint_reader') then create role footprint_reader; end if; end $$`,
    );
    await bed.pool.query(`grant select on ${schema}.records to footprint_reader`);
    const before = await recordsDigest(schema, 'records');
    expect(before.n).toBe(700);
    const partitions = await partitionsOf(schema);
    expect(partitions.length).toBe(2);
    expect(await primaryKeys(schema)).toBeGreaterThan(0);

    expect(await migrate(bed.pool, schema, silentLogger)).toEqual([FOOTPRINT]);
    expect(await columnsOf(`${schema}.records`)).toEqual(['id', 'event_time', 'window_start', 'run_id', 'source', 'payload']);
    expect(await recordsDigest(schema, 'ledger')).toEqual(before);
    expect(await partitionsOf(schema)).toEqual(partitions);
    expect(await primaryKeys(schema)).toBe(0);
    const grant = await bed.pool.query<{ ok: boolean }>(`select has_table_privilege('footprint_reader', $1, 'select') as ok`, [`${schema}.records`]);
    expect(grant.rows[0]!.ok).toBe(true);
    const leftovers = await bed.pool.query(
      `select relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and relname like '%previous%'`,
      [schema],
    );
    expect(leftovers.rows).toEqual([]);
    // records_typed: the base columns until the next sync, its definition forgotten so that the sync recreates it.
    expect(await columnsOf(`${schema}.records_typed`)).toEqual(['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at']);
    const setting = await bed.pool.query(`select 1 from ${schema}.derived_settings where name = 'typed_view'`);
    expect(setting.rows).toEqual([]);

    // A sync afterwards: every window replaced exactly, new ids after the largest, records_typed with its fields again.
    const again = await runSync({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema, log: silentLogger }, { from: START, to: END });
    expect(again).toMatchObject({ status: 'succeeded', records: 700 });
    expect(await expectExactDataset(bed.pool, schema, s, START, END)).toBe(700);
    const ids = await bed.pool.query<{ min: string }>(`select min(id)::text as min from ${schema}.records`);
    expect(BigInt(ids.rows[0]!.min)).toBeGreaterThan(BigInt(before.max));
    expect(await columnsOf(`${schema}.records_typed`)).toEqual(expect.arrayContaining(['window_end', 'loaded_at', 'event_type', 'customer_id']));
    const typed = await bed.pool.query<{ n: number }>(
      `select count(*)::int as n from ${schema}.records_typed t join ${schema}.sync_windows w using (source, window_start)
        where t.window_end = w.window_end and t.loaded_at = w.loaded_at`,
    );
    expect(typed.rows[0]!.n).toBe(700);

    // Down: the previous shape, each record's window end and load time from its ledger row, the primary key.
    const after = await recordsDigest(schema, 'ledger');
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
    expect(await columnsOf(`${schema}.records`)).toEqual(['id', 'event_time', 'window_start', 'run_id', 'source', 'payload', 'window_end', 'loaded_at']);
    expect(await recordsDigest(schema, 'records')).toEqual(after);
    expect(await primaryKeys(schema)).toBeGreaterThan(0);
    expect(await columnsOf(`${schema}.records_typed`)).toEqual(['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at']);
  });
});
