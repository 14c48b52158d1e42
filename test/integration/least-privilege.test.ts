/**
 * The database as DBAs run it (real PostgreSQL, the simulator, the CLI): a role that owns the
 * schema and all in it but has no CREATE on the database (sync exact, state show, verify, check
 * ok); a DML-only role and a SELECT-only role (check names what is missing with its GRANT; the
 * read-only commands work); a read-only database (check and sync say so); MIGRATE=off with a
 * pending migration (every command refuses, naming it) and an invalid MIGRATE (exit 2); and
 * docs/deploy.md's owner, runtime and reader roles: what sync (and racing replicas) or migrate
 * creates as a member of the schema's owner stays the owner's.
 */
import { describe, expect, it } from 'vitest';
import { quoteIdent } from '../../src/db/pool.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import type { Partition } from '../../src/sync/store/ports.js';
import { runCli, runCliInProcess } from '../helpers/cli.js';
import { MIGRATIONS, migrateUpTo } from '../helpers/migrations.js';
import { expectExactDataset } from '../helpers/sync.js';
import { SYNC_START, useSyncCli } from '../helpers/sync-cli.js';

const h = useSyncCli();
/** Ten one-day windows from SYNC_START. */
const TEN_DAYS_END = '2026-10-12T00:00:00Z';

/** A login role (roles are the cluster's: names unique to this file). */
async function createRole(role: string): Promise<void> {
  await h.pool.query(`do $$ begin if not exists (select from pg_roles where rolname = '${role}') then create role ${role} login; end if; end $$`);
}

/** ensurePartitions on a session of its own as `role`. */
async function partitionsAs(role: string, schema: string, starts: number[]): Promise<Partition[]> {
  const client = await h.pool.connect();
  try {
    await client.query(`set role ${role}`);
    return await ensurePartitions(client, new Tables(schema), starts, 'month');
  } finally {
    await client.query('reset role');
    client.release();
  }
}

/** The file's database (or `database`) as `role`: the cluster trusts local connections. */
function urlAs(role: string, database?: string): string {
  const url = new URL(h.url);
  url.username = role;
  url.password = '';
  if (database !== undefined) url.pathname = `/${database}`;
  return url.toString();
}

const databaseName = () => decodeURIComponent(new URL(h.url).pathname.slice(1));

describe('least privilege (real PostgreSQL)', () => {
  it('a role owning the schema and all in it, without CREATE on the database: sync exact, state show, verify and check pass', async () => {
    const s = await h.sim({ records: 20_000 });
    const schema = h.schema();
    await createRole('lp_owner');
    const env = h.env(s, schema, { DATABASE_URL: urlAs('lp_owner'), SYNC_WINDOW: '1d', LOG_LEVEL: 'warn' });
    // Migrated once by its owner, which may then create nothing more in the database.
    await h.pool.query(`grant create on database ${quoteIdent(databaseName())} to lp_owner`);
    expect((await runCliInProcess(['migrate'], env)).code).toBe(0);
    await h.pool.query(`revoke create on database ${quoteIdent(databaseName())} from lp_owner`);
    const { rows } = await h.pool.query<{ create: boolean; owner: string }>(
      `select has_database_privilege('lp_owner', current_database(), 'CREATE') as create, pg_get_userbyid(nspowner) as owner from pg_namespace where nspname = $1`,
      [schema],
    );
    expect(rows[0]).toEqual({ create: false, owner: 'lp_owner' });

    const synced = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env);
    expect(synced.stderr).not.toContain('permission denied');
    expect(synced.code).toBe(0);
    expect(await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(TEN_DAYS_END))).toBeGreaterThan(5_000);

    const shown = await runCliInProcess(['state', 'show'], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^ {2}watermark +2026-10-12T00:00:00\.000Z$/m);
    const verified = await runCliInProcess(['verify'], { ...env, LOG_LEVEL: 'info' });
    expect(verified.stderr).toContain('audit: the stored windows match E6');
    expect(verified.code).toBe(0);
    const checked = await runCliInProcess(['check'], env);
    expect(checked.stdout).toMatch(/^ok +writable /m);
    expect(checked.stdout).toMatch(new RegExp(`^ok +migrations +schema ${schema} is migrated$`, 'm'));
    expect(checked.stdout).toMatch(/^ok +privileges +role lp_owner holds every privilege/m);
    expect(checked.code).toBe(0);
  }, 180_000);

  it('a DML-only role: check exits 1 naming each missing privilege with its GRANT; state show, fields and verify work, as with SELECT alone', async () => {
    const s = await h.sim({ records: 20_000 });
    const schema = h.schema();
    const ownerEnv = h.env(s, schema, { SYNC_WINDOW: '1d', LOG_LEVEL: 'warn' });
    expect((await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], ownerEnv)).code).toBe(0);
    await createRole('lp_dml');
    await createRole('lp_reader');
    await h.pool.query(`grant usage on schema ${schema} to lp_dml, lp_reader`);
    await h.pool.query(`grant select, insert, update, delete on all tables in schema ${schema} to lp_dml`);
    await h.pool.query(`grant select on all tables in schema ${schema} to lp_reader`);

    const dml = { ...ownerEnv, DATABASE_URL: urlAs('lp_dml') };
    const checked = await runCliInProcess(['check'], dml);
    expect(checked.stdout).toMatch(/^ok +writable /m);
    expect(checked.stdout).toMatch(/^ok +migrations /m);
    expect(checked.stdout).toMatch(
      new RegExp(
        `^FAIL +privileges +role lp_dml lacks CREATE on schema ${schema} \\(partitions of records created ahead of loading.*\\): grant create on schema "${schema}" to "lp_dml"$`,
        'm',
      ),
    );
    expect(checked.stdout).toMatch(
      new RegExp(
        `^FAIL +privileges +role lp_dml lacks the rights of ${schema}\\.records's owner postgres \\(partitions created ahead of loading\\): grant "postgres" to "lp_dml"$`,
        'm',
      ),
    );
    // Granted all it needs on the tables, and the identity columns need nothing on their sequences.
    expect(checked.stdout).not.toMatch(/lacks (SELECT|INSERT|UPDATE|DELETE|USAGE)/);
    expect(checked.code).toBe(1);

    for (const [role, env] of [
      ['lp_dml', dml],
      ['lp_reader', { ...ownerEnv, DATABASE_URL: urlAs('lp_reader') }],
    ] as const) {
      const shown = await runCliInProcess(['state', 'show'], env);
      expect(shown.stderr, role).toBe('');
      expect(shown.stdout, role).toMatch(/^ {2}watermark +2026-10-12T00:00:00\.000Z$/m);
      expect(shown.code, role).toBe(0);
      const fields = await runCliInProcess(['fields', '--json'], env);
      expect(fields.code, role).toBe(0);
      expect(
        (JSON.parse(fields.stdout) as { path: string }[]).map((f) => f.path),
        role,
      ).toContain('timestamp');
      const verified = await runCliInProcess(['verify'], { ...env, LOG_LEVEL: 'info' });
      expect(verified.stderr, role).toContain('audit: the stored windows match E6');
      // The reader may not record its audit's verified-through, and says so.
      if (role === 'lp_reader') expect(verified.stderr).toContain('verified-through not recorded');
      else expect(verified.stderr).not.toContain('verified-through not recorded');
      expect(verified.code, role).toBe(0);
    }
  }, 240_000);

  it("docs/deploy.md's layout: what sync creates as the runtime role is the schema owner's, readable by the reader, alterable by the owner", async () => {
    const s = await h.sim({ records: 20_000 });
    const schema = h.schema();
    for (const role of ['lp_schema_owner', 'lp_runtime', 'lp_read', 'lp_rw']) await createRole(role);
    await h.pool.query(`create schema ${schema} authorization lp_schema_owner`);
    await h.pool.query('grant lp_schema_owner to lp_runtime');
    await h.pool.query(`grant usage on schema ${schema} to lp_read`);
    await h.pool.query(`grant select on all tables in schema ${schema} to lp_read`);
    await h.pool.query(`alter default privileges for role lp_schema_owner in schema ${schema} grant select on tables to lp_read`);
    const base = h.env(s, schema, { SYNC_WINDOW: '1d', LOG_LEVEL: 'warn' });
    expect((await runCliInProcess(['migrate'], { ...base, DATABASE_URL: urlAs('lp_schema_owner') })).code).toBe(0);

    // Other rollup settings than migrate's: the run rebuilds the rollup tables too.
    const runtime = { ...base, DATABASE_URL: urlAs('lp_runtime'), MIGRATE: 'off', ROLLUP_DIMENSIONS: 'event_type=eventType', ROLLUP_DISTINCT_BY: 'none' };
    const synced = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], runtime);
    expect(synced.stderr).not.toContain('permission denied');
    expect(synced.stderr).not.toContain('could not be recreated');
    expect(synced.code).toBe(0);
    expect(await expectExactDataset(h.pool, schema, s, new Date(SYNC_START), new Date(TEN_DAYS_END))).toBeGreaterThan(5_000);
    // Replicas racing for one partition, as the runtime role and as the owner: one creates it.
    const december = [Date.parse('2026-12-15T00:00:00Z')];
    const created = await Promise.all(['lp_runtime', 'lp_schema_owner', 'lp_runtime'].map((role) => partitionsAs(role, schema, december)));
    expect(created.flat().map((p) => p.name)).toEqual(['records_20261201_20270101']);

    const { rows: relations } = await h.pool.query<{ name: string; kind: string; owner: string }>(
      `select relname as name, relkind::text as kind, pg_get_userbyid(relowner) as owner from pg_class where relnamespace = $1::regnamespace order by 1`,
      [schema],
    );
    const names = relations.map((r) => r.name);
    expect(names).toContain('records_typed');
    expect(names.filter((n) => /^records_\d{8}_\d{8}$/.test(n)).length).toBeGreaterThan(0);
    expect(names).toContain('records_hourly');
    expect(names).toContain('records_daily_distinct');
    expect(relations.filter((r) => r.owner !== 'lp_schema_owner')).toEqual([]);

    const client = await h.pool.connect();
    try {
      for (const [role, sql] of [
        ['lp_read', `select count(*) from ${schema}.records_typed`],
        ['lp_read', `select count(*) from ${schema}.records`],
        ['lp_schema_owner', `alter table ${schema}.records add column x int`],
      ] as const) {
        await client.query('begin');
        try {
          await client.query(`set local role ${role}`);
          await client.query(sql);
        } finally {
          await client.query('rollback');
        }
      }
    } finally {
      client.release();
    }

    // A DML-only role given what docs/deploy.md gives the runtime role: every owner's rights, RETENTION's included.
    await h.pool.query(`grant usage on schema ${schema} to lp_rw`);
    await h.pool.query(`grant select, insert, update, delete on all tables in schema ${schema} to lp_rw`);
    await h.pool.query('grant lp_schema_owner to lp_rw');
    const checked = await runCliInProcess(['check'], { ...runtime, DATABASE_URL: urlAs('lp_rw'), RETENTION: '3650d' });
    expect(checked.stdout).toMatch(/^ok +privileges +role lp_rw holds every privilege/m);
    expect(checked.stdout).not.toMatch(/^FAIL +privileges/m);
  }, 240_000);

  it("migrate run by a member of the schema's owner: the tables are the owner's", async () => {
    const schema = h.schema();
    for (const role of ['lp_schema_owner', 'lp_runtime']) await createRole(role);
    await h.pool.query(`create schema ${schema} authorization lp_schema_owner`);
    await h.pool.query('grant lp_schema_owner to lp_runtime');
    const env = { DATABASE_URL: urlAs('lp_runtime'), DATABASE_SCHEMA: schema, LOG_LEVEL: 'warn' };
    expect((await runCliInProcess(['migrate'], env)).code).toBe(0);
    const { rows } = await h.pool.query<{ owner: string; n: string }>(
      `select pg_get_userbyid(relowner) as owner, count(*) as n from pg_class where relnamespace = $1::regnamespace group by 1`,
      [schema],
    );
    expect(rows.map((r) => r.owner)).toEqual(['lp_schema_owner']);
    expect(Number(rows[0]!.n)).toBeGreaterThan(10);
  }, 60_000);

  it('a read-only database: check exits 1 saying read-only, and so does sync, with SQLSTATE 25006', async () => {
    const s = await h.sim({ records: 5_000 });
    const name = `${databaseName()}_ro`;
    await h.pool.query(`create database ${quoteIdent(name)}`);
    h.defer(() => h.pool.query(`drop database if exists ${quoteIdent(name)} with (force)`));
    const env = h.env(s, 'analytics', { DATABASE_URL: urlAs('postgres', name), SYNC_WINDOW: '1d', LOG_LEVEL: 'warn' });
    expect((await runCliInProcess(['migrate'], env)).code).toBe(0);
    await h.pool.query(`alter database ${quoteIdent(name)} set default_transaction_read_only = on`);

    const checked = await runCliInProcess(['check'], env);
    expect(checked.stdout).toMatch(/^ok +database +PostgreSQL /m);
    expect(checked.stdout).toMatch(
      /^FAIL +writable +the database is read-only \(default_transaction_read_only \/ hot standby\): transaction_read_only is on; sync, serve and migrate cannot write/m,
    );
    expect(checked.code).toBe(1);
    const synced = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env);
    expect(synced.stderr).toContain('the database is read-only (default_transaction_read_only / hot standby): transaction_read_only is on');
    expect(synced.stderr).toContain('[25006]');
    expect(synced.stderr).not.toContain('migrating schema');
    expect(synced.code).toBe(1);
  }, 120_000);

  it('MIGRATE=off with a pending migration: sync, serve and check exit 1 naming it; state show never migrates; MIGRATE=maybe exits 2', async () => {
    const s = await h.sim({ records: 5_000 });
    const schema = h.schema();
    const last = MIGRATIONS[MIGRATIONS.length - 1]!;
    await migrateUpTo(h.pool, schema, MIGRATIONS[MIGRATIONS.length - 2]!);
    const env = h.env(s, schema, { MIGRATE: 'off', SYNC_WINDOW: '1d', LOG_LEVEL: 'warn' });
    const applied = async () => (await h.pool.query(`select name from ${schema}.pgmigrations where name = $1`, [last])).rowCount;

    const synced = await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env);
    expect(synced.stderr).toContain(`schema ${schema} has 1 pending migration (${last})`);
    expect(synced.stderr).toContain("apply them with 'analytics-exporter migrate'");
    expect(synced.code).toBe(1);
    const shown = await runCliInProcess(['state', 'show'], { ...env, MIGRATE: 'auto' });
    expect(shown.stderr).toContain(`pending migration (${last})`);
    expect(shown.code).toBe(1);
    const checked = await runCliInProcess(['check'], env);
    expect(checked.stdout).toMatch(
      new RegExp(`^FAIL +migrations +schema ${schema} has 1 pending migration \\(${last}\\), not applied at start \\(MIGRATE=off\\)`, 'm'),
    );
    expect(checked.code).toBe(1);
    const served = await runCli(['serve'], { ...env, METRICS_LISTEN: '127.0.0.1:0' }, 30_000);
    expect(served.stderr).toContain(`pending migration (${last})`);
    expect(served.code).toBe(1);
    expect(await applied()).toBe(0);

    const invalid = await runCliInProcess(['sync'], { ...env, MIGRATE: 'maybe' });
    expect(invalid.stderr).toContain("MIGRATE must be 'auto' or 'off'");
    expect(invalid.code).toBe(2);

    expect((await runCliInProcess(['migrate'], env)).code).toBe(0);
    expect(await applied()).toBe(1);
    expect((await runCliInProcess(['sync', '--from', SYNC_START, '--to', TEN_DAYS_END], env)).code).toBe(0);
  }, 180_000);
});
