/**
 * `check`'s database lines beyond the connection: whether it takes writes, whether migrations are
 * pending (and whether this role may apply them), and each privilege the sync's work needs that
 * the role lacks, with the statement that grants it. Reads the catalogue only. The list is
 * docs/deploy.md's (Database roles), found by running sync as restricted roles.
 */
import type { Config } from '../config.js';
import { pendingMigrations } from '../db/migrate.js';
import { describeError } from '../errors.js';
import { quoteIdent, type Pool } from '../db/pool.js';

/** One line of `check` after the `database` one. */
export interface DatabaseFinding {
  step: 'writable' | 'migrations' | 'privileges';
  status: 'ok' | 'FAIL' | 'skip';
  detail: string;
}

/** What the role's session says of itself. */
interface Session {
  role: string;
  database: string;
  readOnly: string;
  standby: boolean;
  /** Whether the schema exists, and whether this role has its owner's rights and CREATE on the database. */
  schemaExists: boolean;
  ownsSchema: boolean;
  createOnDatabase: boolean;
}

/**
 * The findings in order: writable, migrations, then privileges (skipped until migrated); a
 * catalogue that cannot be read is one failed finding. Never throws.
 */
export async function inspectDatabase(pool: Pool, config: Config): Promise<DatabaseFinding[]> {
  try {
    return await inspect(pool, config);
  } catch (err) {
    return [{ step: 'privileges', status: 'FAIL', detail: `the catalogue could not be read: ${describeError(err)}` }];
  }
}

async function inspect(pool: Pool, config: Config): Promise<DatabaseFinding[]> {
  const schema = config.database.schema;
  const { rows } = await pool.query<Session>(
    `select current_user as role, current_database() as database, current_setting('transaction_read_only') as "readOnly",
            pg_is_in_recovery() as standby, n.oid is not null as "schemaExists",
            coalesce(pg_has_role(n.nspowner, 'USAGE'), false) as "ownsSchema",
            has_database_privilege(current_database(), 'CREATE') as "createOnDatabase"
       from (select 1) one left join pg_namespace n on n.nspname = $1`,
    [schema],
  );
  const s = rows[0]!;
  const findings: DatabaseFinding[] = [writable(s)];
  const usage = s.schemaExists && !s.ownsSchema ? await hasSchemaUsage(pool, schema) : true;
  if (!usage) {
    findings.push({
      step: 'privileges',
      status: 'FAIL',
      detail: lacks(s, `USAGE on schema ${schema}`, `grant usage on schema ${quoteIdent(schema)} to ${quoteIdent(s.role)}`),
    });
    return findings;
  }
  const pending = await pendingMigrations(pool, schema);
  findings.push(migrations(s, schema, pending, config.database.migrate));
  if (pending.length > 0) return [...findings, { step: 'privileges', status: 'skip', detail: `checked once schema ${schema} is migrated` }];
  const missing = await missingPrivileges(pool, s, config);
  if (missing.length === 0)
    findings.push({ step: 'privileges', status: 'ok', detail: `role ${s.role} holds every privilege sync and serve need on schema ${schema}` });
  else findings.push(...missing.map((detail) => ({ step: 'privileges' as const, status: 'FAIL' as const, detail })));
  return findings;
}

function writable(s: Session): DatabaseFinding {
  if (s.readOnly !== 'on' && !s.standby)
    return { step: 'writable', status: 'ok', detail: 'transactions are read-write (transaction_read_only off, not a hot standby)' };
  const why = s.standby ? 'the server is a hot standby (pg_is_in_recovery())' : 'transaction_read_only is on';
  return {
    step: 'writable',
    status: 'FAIL',
    detail:
      `the database is read-only (default_transaction_read_only / hot standby): ${why}; sync, serve and migrate cannot write: ` +
      `point DATABASE_URL at the primary${s.standby ? '' : `, or alter database ${quoteIdent(s.database)} set default_transaction_read_only = off`}`,
  };
}

function migrations(s: Session, schema: string, pending: readonly string[], mode: 'auto' | 'off'): DatabaseFinding {
  if (pending.length === 0) return { step: 'migrations', status: 'ok', detail: `schema ${schema} is migrated` };
  const names = `schema ${schema} has ${pending.length} pending migration${pending.length === 1 ? '' : 's'} (${pending.join(', ')})`;
  const mayApply = s.schemaExists ? s.ownsSchema : s.createOnDatabase;
  if (mode === 'auto' && mayApply) return { step: 'migrations', status: 'ok', detail: `${names}: sync, serve or migrate applies them (MIGRATE=auto)` };
  const why =
    mode === 'off'
      ? 'MIGRATE=off'
      : s.schemaExists
        ? `role ${s.role} is not the owner of schema ${schema}`
        : `role ${s.role} has no CREATE on database ${s.database}`;
  return { step: 'migrations', status: 'FAIL', detail: `${names}, not applied at start (${why}): run 'analytics-exporter migrate' as the schema's owner` };
}

async function hasSchemaUsage(pool: Pool, schema: string): Promise<boolean> {
  const { rows } = await pool.query<{ ok: boolean }>(`select has_schema_privilege($1, 'USAGE') as ok`, [schema]);
  return rows[0]!.ok;
}

function lacks(s: Session, what: string, statement: string): string {
  return `role ${s.role} lacks ${what}: ${statement}`;
}

/** One line per missing privilege (or ownership), each with its statement. */
async function missingPrivileges(pool: Pool, s: Session, config: Config): Promise<string[]> {
  const schema = config.database.schema;
  const q = { schema: quoteIdent(schema), role: quoteIdent(s.role) };
  const { rows } = await pool.query<{ name: string; owner: string; owns: boolean; missing: string[] }>(
    `select c.relname as name, pg_get_userbyid(c.relowner) as owner, pg_has_role(c.relowner, 'USAGE') as owns,
            array(select p from unnest(case when c.relname = 'pgmigrations' then array['SELECT']
                                            when c.relkind = 'v' then array[]::text[]
                                            else array['SELECT', 'INSERT', 'UPDATE', 'DELETE'] end) p
                   where not has_table_privilege(c.oid, p)) as missing
       from pg_class c
      where c.relnamespace = $1::regnamespace and c.relkind in ('r', 'p', 'v') and not c.relispartition
      order by c.relname`,
    [schema],
  );
  const lines: string[] = [];
  // Sequences need nothing: the ids are identity columns, drawn with INSERT on the table.
  const dml = rows.filter((r) => r.missing.length > 0);
  if (dml.length > 0) {
    const list = dml.map((r) => `${r.missing.join(', ')} on ${schema}.${r.name}`).join('; ');
    lines.push(lacks(s, list, `grant select, insert, update, delete on all tables in schema ${q.schema} to ${q.role}`));
  }
  const { rows: create } = await pool.query<{ ok: boolean }>(`select has_schema_privilege($1, 'CREATE') as ok`, [schema]);
  if (!create[0]!.ok)
    lines.push(
      lacks(
        s,
        `CREATE on schema ${schema} (partitions of records created ahead of loading, rollup rebuilds, records_typed)`,
        `grant create on schema ${q.schema} to ${q.role}`,
      ),
    );
  for (const need of ownershipNeeds()) {
    const rel = rows.find((r) => r.name === need.name);
    if (rel === undefined || rel.owns) continue;
    lines.push(lacks(s, `the rights of ${schema}.${rel.name}'s owner ${rel.owner} (${need.why})`, `grant ${quoteIdent(rel.owner)} to ${q.role}`));
  }
  if (config.tables.retentionMs !== undefined) lines.push(...(await partitionOwners(pool, s, schema)));
  return lines;
}

/** RETENTION drops partitions, which only their owner may: one line per owner whose rights the role lacks. */
async function partitionOwners(pool: Pool, s: Session, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ owner: string }>(
    `select distinct pg_get_userbyid(c.relowner) as owner
       from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = $1::regclass and not pg_has_role(c.relowner, 'USAGE')
      order by 1`,
    [`${quoteIdent(schema)}.records`],
  );
  return rows.map((r) =>
    lacks(
      s,
      `the rights of ${r.owner}, owner of partitions of ${schema}.records (RETENTION drops them)`,
      `grant ${quoteIdent(r.owner)} to ${quoteIdent(s.role)}`,
    ),
  );
}

/** The relations whose owner's rights the sync's DDL needs. */
function ownershipNeeds(): { name: string; why: string }[] {
  return [
    { name: 'records', why: 'partitions created ahead of loading' },
    { name: 'records_hourly', why: 'rebuilt when ROLLUP_* change' },
    { name: 'records_hourly_distinct', why: 'rebuilt when ROLLUP_* change' },
    { name: 'records_daily_distinct', why: 'rebuilt when ROLLUP_* change' },
    { name: 'records_typed', why: 'recreated when a new field arrives' },
  ];
}
