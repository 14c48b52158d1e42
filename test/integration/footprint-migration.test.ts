/**
 * 20261129000000000_footprint: `records` rebuilt without its primary key index, window_end and
 * loaded_at (kept once per window in sync_windows), its columns reordered. A populated database of
 * the previous release keeps every record exactly, its partitions, its grants and records_typed;
 * the Down part brings the previous shape back. The identity continues where the old sequence was
 * (ids of deleted rows never given again); the owner and every grant (with grant option, by its
 * grantor, on columns, on partitions) stay as they were, records_typed's too (Up and Down); the
 * publications naming records or a partition name the new relations, with a replica identity that
 * takes a window's delete, or the migration fails naming the publication.
 */
import { runner } from 'node-pg-migrate';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '@analytics-exporter/simulator';
import { migrate, MIGRATIONS_DIR, MIGRATIONS_TABLE } from '../../src/db/migrate.js';
import { withClient } from '../../src/db/pool.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { runSync } from '../../src/sync/run/run.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { MIGRATIONS, migrateUpTo } from '../helpers/migrations.js';
import { holds, privilegeLines } from '../helpers/privileges.js';
import { expectExactDataset, simClient, syncSettings } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

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
  // The ledger's run: records hold none from 20261201000000000_records_run_id on.
  const run = source === 'records' ? 'r.run_id' : 'w.run_id';
  const { rows } = await bed.pool.query<{ n: number; max: string; digest: string }>(
    `select count(*)::int as n, max(r.id)::text as max,
            md5(string_agg(concat_ws(' ', r.id, r.source, r.payload::text, r.event_time, r.window_start, ${end}, ${loaded}, ${run}), E'\\n' order by r.id)) as digest
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

/** The footprint migration's Down part, on `schema` (its last migration). */
/** The migrations after FOOTPRINT, which a sync of this release needs. */
const LATER = MIGRATIONS.length - 1 - MIGRATIONS.indexOf(FOOTPRINT);

async function migrateDown(schema: string, count = 1): Promise<void> {
  await runner({
    databaseUrl: db.url,
    dir: MIGRATIONS_DIR,
    direction: 'down',
    count,
    schema,
    migrationsSchema: schema,
    migrationsTable: MIGRATIONS_TABLE,
    checkOrder: true,
    logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
  });
}

/** Whether the publication `name` names `relation` itself (pg_publication_rel). */
async function publishes(name: string, relation: string): Promise<boolean> {
  const { rows } = await bed.pool.query<{ ok: boolean }>(
    `select exists (select from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid where p.pubname = $1 and pr.prrelid = $2::regclass) as ok`,
    [name, relation],
  );
  return rows[0]!.ok;
}

async function createRoles(...roles: string[]): Promise<void> {
  for (const role of roles) {
    await bed.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role}; end if; end $$`);
  }
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
    await migrate(bed.pool, scratch, silentLogger); // every migration: a sync of this release fills it
    const loaded = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema: scratch, log: silentLogger }), { from: START, to: END });
    expect(loaded).toMatchObject({ status: 'succeeded', records: 700 });
    const previous = MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!;
    await migrateUpTo(bed.pool, schema, previous);
    for (const p of await partitionsOf(scratch)) {
      const [name, ...bound] = p.split(' ');
      await bed.pool.query(`create table ${schema}.${name} partition of ${schema}.records ${bound.join(' ')}`);
    }
    await bed.pool.query(
      `insert into ${schema}.records (id, source, payload, event_time, window_start, window_end, loaded_at, run_id) overriding system value
       select r.id, r.source, r.payload, r.event_time, r.window_start, w.window_end, w.loaded_at, w.run_id
         from ${scratch}.records r join ${scratch}.sync_windows w using (source, window_start)`,
    );
    await bed.pool.query(`select setval(pg_get_serial_sequence($1, 'id'), max(id)) from ${schema}.records`, [`${schema}.records`]);
    // The ledger's columns as the previous release had them (later migrations add more to scratch's).
    const { rows: ledgerColumns } = await bed.pool.query<{ list: string }>(
      `select string_agg(quote_ident(column_name), ', ' order by ordinal_position) as list
         from information_schema.columns where table_schema = $1 and table_name = 'sync_windows'`,
      [schema],
    );
    const ledger = ledgerColumns[0]!.list;
    await bed.pool.query(`insert into ${schema}.sync_windows (${ledger}) select ${ledger} from ${scratch}.sync_windows`);
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

    expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
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

    // A sync afterwards (with the later migrations it needs): every window replaced exactly, new ids
    // after the largest, records_typed with its fields again.
    await migrate(bed.pool, schema, silentLogger);
    const again = await runSync(pgDeps({ pool: bed.pool, client, ...syncSettings(SYNC_ENV), schema, log: silentLogger }), { from: START, to: END });
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
    await migrateDown(schema, LATER + 1);
    // run_id comes back last (20261201000000000_records_run_id's Down adds it in place, from the ledger).
    expect(await columnsOf(`${schema}.records`)).toEqual(['id', 'event_time', 'window_start', 'source', 'payload', 'run_id', 'window_end', 'loaded_at']);
    expect(await recordsDigest(schema, 'records')).toEqual(after);
    expect(await primaryKeys(schema)).toBeGreaterThan(0);
    // records_typed as the sync left it (it reads both from the ledger), its definition forgotten for the previous release to recreate.
    expect(await columnsOf(`${schema}.records_typed`)).toEqual(expect.arrayContaining(['window_end', 'loaded_at', 'event_type', 'customer_id']));
    const typedDown = await bed.pool.query<{ n: number }>(`select count(*)::int as n from ${schema}.records_typed where event_type is not null`);
    expect(typedDown.rows[0]!.n).toBe(700);
    expect((await bed.pool.query(`select 1 from ${schema}.derived_settings where name = 'typed_view'`)).rows).toEqual([]);
  });

  /** A database as the previous release left it, with `rows` records in one partition (October 2026), ids given by the identity. */
  async function previousRelease(schema: string, rows: number): Promise<void> {
    await migrateUpTo(bed.pool, schema, MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!);
    await bed.pool.query(
      `create table ${schema}.records_20261001_20261101 partition of ${schema}.records for values from ('2026-10-01T00:00:00Z') to ('2026-11-01T00:00:00Z')`,
    );
    await bed.pool.query(
      `insert into ${schema}.records (source, payload, event_time, window_start, window_end, run_id)
       select 'default', jsonb_build_object('n', n), '2026-10-02T00:00:00Z', '2026-10-02T00:00:00Z', '2026-10-03T00:00:00Z', 1 from generate_series(1, $1) n`,
      [rows],
    );
  }

  it('continues the identity after the last id the old one gave, also when the rows holding the largest ids were deleted', async () => {
    const schema = 'footprint_ids';
    await previousRelease(schema, 10);
    // The newest rows deleted (a window re-read empty, a partition RETENTION dropped): ids 8–10 were given, none holds them now.
    await bed.pool.query(`delete from ${schema}.records where id > 7`);
    const given = await bed.pool.query<{ max: string }>(`select max(id)::text as max from ${schema}.records`);
    expect(given.rows[0]!.max).toBe('7');

    expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
    const { rows } = await bed.pool.query<{ id: string }>(
      `insert into ${schema}.records (source, payload, event_time, window_start, run_id)
       values ('default', '{}', null, '2026-10-04T00:00:00Z', 2), ('default', '{}', null, '2026-10-04T00:00:00Z', 2) returning id::text`,
    );
    expect(rows.map((r) => r.id)).toEqual(['11', '12']);
    const kept = await bed.pool.query<{ ids: string }>(`select string_agg(id::text, ',' order by id) as ids from ${schema}.records where run_id = 1`);
    expect(kept.rows[0]!.ids).toBe('1,2,3,4,5,6,7');
  });

  it('continues after the largest id when a row was stored above the sequence, and from 1 on an empty table', async () => {
    await previousRelease('footprint_above', 3);
    await bed.pool.query(
      `insert into footprint_above.records (id, source, payload, window_start, window_end, run_id) overriding system value
       values (100, 'default', '{}', '2026-10-02T00:00:00Z', '2026-10-03T00:00:00Z', 1)`,
    );
    await migrateUpTo(bed.pool, 'footprint_empty', MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!);
    for (const [schema, next] of [
      ['footprint_above', '101'],
      ['footprint_empty', '1'],
    ] as const) {
      expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
      if (schema === 'footprint_empty') {
        await bed.pool.query(
          `create table ${schema}.records_20261001_20261101 partition of ${schema}.records for values from ('2026-10-01T00:00:00Z') to ('2026-11-01T00:00:00Z')`,
        );
      }
      const { rows } = await bed.pool.query<{ id: string }>(
        `insert into ${schema}.records (source, payload, window_start, run_id) values ('default', '{}', '2026-10-04T00:00:00Z', 2) returning id::text`,
      );
      expect(rows[0]!.id).toBe(next);
    }
  });

  it('keeps the owner and every grant of records and its partitions: with grant option, by its grantor, on columns; adds none from default privileges', async () => {
    const schema = 'footprint_grants';
    const roles = ['fp_lead', 'fp_analyst', 'fp_columns', 'fp_partition', 'fp_default', 'fp_partition_owner'];
    for (const role of roles) {
      await bed.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role}; end if; end $$`);
    }
    await previousRelease(schema, 5);
    const part = `${schema}.records_20261001_20261101`;
    await bed.pool.query(`grant usage on schema ${schema} to fp_lead, fp_partition_owner`);
    await bed.pool.query(`grant create on schema ${schema} to fp_partition_owner`);
    await bed.pool.query(`alter table ${part} owner to fp_partition_owner`);
    // Table-wide, with grant option; a grant made by that grantee (grantor fp_lead); one to PUBLIC.
    await bed.pool.query(`grant select, insert on ${schema}.records to fp_lead with grant option`);
    await bed.pool.query(`set role fp_lead`);
    await bed.pool.query(`grant select on ${schema}.records to fp_analyst`);
    await bed.pool.query(`reset role`);
    await bed.pool.query(`grant references on ${schema}.records to public`);
    // Column grants, one on a column the migration drops (it goes with the column).
    await bed.pool.query(`grant select (id, event_time, payload) on ${schema}.records to fp_columns`);
    await bed.pool.query(`grant update (run_id) on ${schema}.records to fp_columns with grant option`);
    await bed.pool.query(`grant select (window_end) on ${schema}.records to fp_columns`);
    // The partition's own grants (its owner's), table-wide and on a column.
    await bed.pool.query(`grant select, delete on ${part} to fp_partition with grant option`);
    await bed.pool.query(`grant update (source) on ${part} to fp_partition`);
    // Default privileges set after the old tables were created: the new ones must not gain them.
    await bed.pool.query(`alter default privileges in schema ${schema} grant insert on tables to fp_default`);
    await bed.pool.query(`alter default privileges for role fp_partition_owner in schema ${schema} grant truncate on tables to fp_default`);

    const grantsOf = () => privilegeLines(bed.pool, [`${schema}.records`, part]);
    const before = await grantsOf();
    // What the setup made, read back: the comparison below is of something.
    expect(before).toEqual(
      expect.arrayContaining([
        'records postgres - postgres fp_lead SELECT true',
        'records postgres - fp_lead fp_analyst SELECT false',
        'records postgres - postgres PUBLIC REFERENCES false',
        'records postgres run_id postgres fp_columns UPDATE true',
        'records postgres window_end postgres fp_columns SELECT false',
        'records_20261001_20261101 fp_partition_owner - fp_partition_owner fp_partition DELETE true',
        'records_20261001_20261101 fp_partition_owner source fp_partition_owner fp_partition UPDATE false',
      ]),
    );

    expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
    expect(await grantsOf()).toEqual(before.filter((line) => !line.includes(' window_end ')).sort());
    const role = await bed.pool.query<{ role: string }>(`select current_user as role`);
    expect(role.rows[0]!.role).toBe('postgres');
    const reads = await bed.pool.query<{ analyst: boolean; dflt: boolean }>(
      `select has_table_privilege('fp_analyst', $1, 'select') as analyst, has_table_privilege('fp_default', $1, 'insert') as dflt`,
      [`${schema}.records`],
    );
    expect(reads.rows[0]).toEqual({ analyst: true, dflt: false });
    await bed.pool.query(`alter default privileges in schema ${schema} revoke insert on tables from fp_default`);
    await bed.pool.query(`alter default privileges for role fp_partition_owner in schema ${schema} revoke truncate on tables from fp_default`);
  });

  it('run by the owner, no superuser: a grant by another grantor is kept, as the owner gives it; the migrating role stays the same', async () => {
    const schema = 'footprint_owner';
    for (const role of ['fp_exporter', 'fp_lead', 'fp_analyst']) {
      await bed.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role}; end if; end $$`);
    }
    await bed.pool.query(`create schema ${schema} authorization fp_exporter`);
    await bed.pool.query(`do $$ begin execute format('grant create on database %I to fp_exporter', current_database()); end $$`);
    // The exporter's own connection: every table its own, as in a deployment without a superuser.
    const exporter = db.pool({ options: '-c role=fp_exporter', max: 1 });
    await migrateUpTo(exporter, schema, MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!);
    await exporter.query(
      `create table ${schema}.records_20261001_20261101 partition of ${schema}.records for values from ('2026-10-01T00:00:00Z') to ('2026-11-01T00:00:00Z')`,
    );
    await exporter.query(
      `insert into ${schema}.records (source, payload, window_start, window_end, run_id) values ('default', '{}', '2026-10-02T00:00:00Z', '2026-10-03T00:00:00Z', 1)`,
    );
    await exporter.query(`grant usage on schema ${schema} to fp_lead`);
    await exporter.query(`grant select on ${schema}.records to fp_lead with grant option`);
    await bed.pool.query(`set role fp_lead`);
    await bed.pool.query(`grant select on ${schema}.records to fp_analyst`);
    await bed.pool.query(`reset role`);

    expect(await migrate(exporter, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
    const { rows } = await exporter.query<{ line: string }>(
      `select concat_ws(' ', pg_get_userbyid(c.relowner), pg_get_userbyid(a.grantor), pg_get_userbyid(a.grantee), a.privilege_type, a.is_grantable::text) as line
         from pg_class c cross join lateral aclexplode(c.relacl) a where c.oid = $1::regclass and a.grantee <> c.relowner order by 1`,
      [`${schema}.records`],
    );
    expect(rows.map((r) => r.line)).toEqual(['fp_exporter fp_exporter fp_analyst SELECT false', 'fp_exporter fp_exporter fp_lead SELECT true']);
    const role = await exporter.query<{ role: string }>(`select current_user as role`);
    expect(role.rows[0]!.role).toBe('fp_exporter');
  });
  it('keeps the owner and every grant of records_typed across Up and Down: to a role, with grant option, by its grantor, to PUBLIC, on a kept column', async () => {
    const schema = 'footprint_typed';
    await createRoles('fp_view_owner', 'fp_reader', 'fp_lead', 'fp_analyst', 'fp_columns', 'fp_default');
    await previousRelease(schema, 3);
    const view = `${schema}.records_typed`;
    // records_typed as the previous release created it: the base columns and a field.
    await bed.pool.query(
      `create view ${view} as select id, source, event_time, window_start, window_end, run_id, loaded_at, payload ->> 'eventType' as event_type from ${schema}.records`,
    );
    await bed.pool.query(`grant usage on schema ${schema} to fp_lead`);
    await bed.pool.query(`alter view ${view} owner to fp_view_owner`);
    await bed.pool.query(`grant select on ${view} to fp_reader`);
    await bed.pool.query(`grant select on ${view} to fp_lead with grant option`);
    await bed.pool.query(`set role fp_lead`);
    await bed.pool.query(`grant select on ${view} to fp_analyst`);
    await bed.pool.query(`reset role`);
    await bed.pool.query(`grant select on ${view} to public`);
    // One column the base view keeps, one it does not (its grant goes with it until the sync recreates the column).
    await bed.pool.query(`grant select (id, event_type) on ${view} to fp_columns`);
    await bed.pool.query(`alter default privileges in schema ${schema} grant insert on tables to fp_default`);

    const accessOf = () => privilegeLines(bed.pool, [view]);
    const before = await accessOf();
    expect(before).toEqual([
      'records_typed fp_view_owner - fp_lead fp_analyst SELECT false',
      'records_typed fp_view_owner - fp_view_owner PUBLIC SELECT false',
      'records_typed fp_view_owner - fp_view_owner fp_lead SELECT true',
      'records_typed fp_view_owner - fp_view_owner fp_reader SELECT false',
      'records_typed fp_view_owner event_type fp_view_owner fp_columns SELECT false',
      'records_typed fp_view_owner id fp_view_owner fp_columns SELECT false',
    ]);

    expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
    expect(await columnsOf(view)).toEqual(['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at']);
    const kept = before.filter((line) => !line.includes(' event_type '));
    expect(await accessOf()).toEqual(kept);
    await migrateDown(schema);
    expect(await accessOf()).toEqual(kept);
    expect([await holds(bed.pool, 'fp_analyst', view, 'select'), await holds(bed.pool, 'fp_default', view, 'insert')]).toEqual([true, false]);
    await bed.pool.query(`alter default privileges in schema ${schema} revoke insert on tables from fp_default`);
  });

  it('keeps records and its partitions in the publications that name them (column list, row filter, via the root), with a replica identity that lets the sync delete', async () => {
    const schema = 'footprint_pub';
    await previousRelease(schema, 4);
    const records = `${schema}.records`;
    const part = `${schema}.records_20261001_20261101`;
    const publications = ['fp_pub_root', 'fp_pub_via_root', 'fp_pub_part', 'fp_pub_filtered', 'fp_pub_all'];
    await bed.pool.query(`create publication fp_pub_root for table ${records}`);
    await bed.pool.query(`create publication fp_pub_via_root for table ${records} with (publish_via_partition_root = true)`);
    await bed.pool.query(`create publication fp_pub_part for table ${part}`);
    await bed.pool.query(
      `create publication fp_pub_filtered for table ${records} (id, source, payload, window_end) where (source <> 'private') with (publish_via_partition_root = true, publish = 'insert')`,
    );
    await bed.pool.query(`create publication fp_pub_all for all tables`);
    try {
      const membership = async (): Promise<string[]> => {
        const { rows } = await bed.pool.query<{ line: string }>(
          `select concat_ws(' ', p.pubname, c.relname,
                            (select string_agg(a.attname, ',' order by a.attnum) from pg_attribute a where a.attrelid = c.oid and a.attnum = any (pr.prattrs::int2[])),
                            pg_get_expr(pr.prqual, pr.prrelid)) as line
             from pg_publication_rel pr join pg_publication p on p.oid = pr.prpubid join pg_class c on c.oid = pr.prrelid
            order by 1`,
        );
        return rows.map((r) => r.line);
      };
      const published = async (): Promise<string[]> => {
        const { rows } = await bed.pool.query<{ line: string }>(
          `select pubname || ' ' || tablename as line from pg_publication_tables where schemaname = $1 and pubname = any ($2) order by 1`,
          [schema, publications],
        );
        return rows.map((r) => r.line);
      };
      const before = await membership();
      expect(before).toEqual([
        "fp_pub_filtered records id,payload,window_end,source (source <> 'private'::text)",
        'fp_pub_part records_20261001_20261101',
        'fp_pub_root records',
        'fp_pub_via_root records',
      ]);
      const publishedBefore = await published();
      expect(publishedBefore).toContain('fp_pub_all records_20261001_20261101');

      expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
      // window_end goes with the column; its place in the list follows the new column order.
      const after = ["fp_pub_filtered records id,source,payload (source <> 'private'::text)", ...before.slice(1)];
      expect(await membership()).toEqual(after);
      expect(await published()).toEqual(publishedBefore);
      // Without a primary key, FULL lets the published tables take a window's delete.
      const identity = await bed.pool.query<{ line: string }>(
        `select string_agg(relname || ' ' || relreplident::text, ', ' order by relname) as line from pg_class where oid in ($1::regclass, $2::regclass)`,
        [records, part],
      );
      expect(identity.rows[0]!.line).toBe('records f, records_20261001_20261101 f');
      await bed.pool.query(`delete from ${records} where window_start = '2026-10-02T00:00:00Z' and id = 1`);
      // A partition the sync creates afterwards takes FULL from records, and a window's delete there.
      const [created] = await withClient(bed.pool, (c) => ensurePartitions(c, new Tables(schema), [Date.parse('2026-11-02T00:00:00Z')], 'month'));
      const next = await bed.pool.query<{ identity: string }>(`select relreplident::text as identity from pg_class where oid = $1::regclass`, [
        `${schema}.${created!.name}`,
      ]);
      expect(next.rows[0]!.identity).toBe('f');
      await bed.pool.query(`insert into ${records} (source, payload, window_start, run_id) values ('default', '{}', '2026-11-02T00:00:00Z', 2)`);
      await bed.pool.query(`delete from ${records} where window_start >= '2026-11-02T00:00:00Z' and window_start < '2026-11-03T00:00:00Z'`);

      const publishedUp = await published();
      expect(publishedUp).toContain(`fp_pub_root ${created!.name}`);

      await migrateDown(schema);
      expect(await membership()).toEqual(after);
      expect(await published()).toEqual(publishedUp);
    } finally {
      for (const name of publications) await bed.pool.query(`drop publication if exists ${name}`);
    }
  });
  it('refuses a publication that publishes deletes of records with a column list (FULL would not fit it), naming it, and migrates once it publishes inserts only', async () => {
    const schema = 'footprint_pub_columns';
    await previousRelease(schema, 2);
    // Valid before: the list holds the primary key (id, window_start), the old replica identity.
    await bed.pool.query(`create publication fp_pub_columns for table ${schema}.records (id, window_start, payload) with (publish_via_partition_root = true)`);
    try {
      await expect(migrate(bed.pool, schema, silentLogger, { count: 1 })).rejects.toThrow(
        /publication fp_pub_columns publishes updates or deletes of .*records.* with a column list/,
      );
      // Rolled back whole: the previous shape, still in the publication.
      expect(await columnsOf(`${schema}.records`)).toContain('window_end');
      await bed.pool.query(`alter publication fp_pub_columns set (publish = 'insert, truncate')`);
      expect(await migrate(bed.pool, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
      expect(await publishes('fp_pub_columns', `${schema}.records`)).toBe(true);
    } finally {
      await bed.pool.query(`drop publication if exists fp_pub_columns`);
    }
  });

  it('run by a role that may not alter a publication of records: fails naming it, changes nothing; migrates once that role owns it', async () => {
    const schema = 'footprint_pub_owner';
    await createRoles('fp_exporter');
    await bed.pool.query(`create schema ${schema} authorization fp_exporter`);
    await bed.pool.query(`do $$ begin execute format('grant create on database %I to fp_exporter', current_database()); end $$`);
    const exporter = db.pool({ options: '-c role=fp_exporter', max: 1 });
    try {
      await migrateUpTo(exporter, schema, MIGRATIONS[MIGRATIONS.indexOf(FOOTPRINT) - 1]!);
      // A replication administrator's publication (here the superuser's).
      await bed.pool.query(`create publication fp_pub_foreign for table ${schema}.records`);
      await expect(migrate(exporter, schema, silentLogger, { count: 1 })).rejects.toThrow(
        /publication fp_pub_foreign cannot be given .*records again: must be owner of publication/,
      );
      expect(await columnsOf(`${schema}.records`)).toContain('window_end');
      await bed.pool.query(`alter publication fp_pub_foreign owner to fp_exporter`);
      expect(await migrate(exporter, schema, silentLogger, { count: 1 })).toEqual([FOOTPRINT]);
      expect(await publishes('fp_pub_foreign', `${schema}.records`)).toBe(true);
    } finally {
      await bed.pool.query(`drop publication if exists fp_pub_foreign`);
    }
  });
});
