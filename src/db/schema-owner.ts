/**
 * DDL as the schema's owner: what a run creates in the schema (partitions of `records`, rebuilt
 * rollup tables, records_typed) and what `migrate` creates belong to that role and take its default
 * privileges, even when a member of it runs them (docs/deploy.md, Database roles). Invariants: the
 * role changes only when the session may SET ROLE to the owner and is not it, and only while no
 * relation named is owned by another role (left by an earlier release, or a DBA's choice); else
 * nothing changes. The embedded database has one role, the owner: never a change.
 */
import { quoteIdent, type PoolClient } from './pool.js';

type Queryable = Pick<PoolClient, 'query'>;

/** The owner to become, and the `role` setting to go back to; undefined when the role stays. */
interface Switch {
  owner: string;
  back: string;
}

/** PostgreSQL 16 tells SET ROLE apart from membership; before it every member may SET ROLE. */
const MAY_SET_ROLE = `pg_has_role(n.nspowner, case when current_setting('server_version_num')::int >= 160000 then 'SET' else 'MEMBER' end)`;

/** @param relations null: every relation of the schema. */
async function ownerSwitch(db: Queryable, schema: string, relations: readonly string[] | null): Promise<Switch | undefined> {
  const { rows } = await db.query<{ owner: string; back: string; change: boolean }>(
    `select pg_get_userbyid(n.nspowner) as owner, current_setting('role') as back,
            pg_get_userbyid(n.nspowner) <> current_user and ${MAY_SET_ROLE}
              and not exists (select from pg_class c
                               where c.relnamespace = n.oid and c.relowner <> n.nspowner and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f')
                                 and ($2::text[] is null or c.oid = any (select to_regclass(r) from unnest($2::text[]) r))) as change
       from pg_namespace n where n.nspname = $1`,
    [schema, relations],
  );
  const row = rows[0];
  return row?.change === true ? { owner: row.owner, back: row.back } : undefined;
}

function setRole(role: string, local: boolean): string {
  return `set${local ? ' local' : ''} role ${role === 'none' ? 'none' : quoteIdent(role)}`;
}

/**
 * Runs `fn` as the owner of `schema` (SET LOCAL ROLE), the role set back once it succeeded.
 * Inside the caller's transaction: when `fn` throws, its rollback (or a rollback to a savepoint
 * taken before this call) undoes the change.
 * @param relations qualified, quoted: existing ones `fn` alters or drops; one owned by another role keeps the session's role.
 * @throws the database's error, `fn`'s.
 */
export async function asSchemaOwner<T>(db: Queryable, schema: string, relations: readonly string[], fn: () => Promise<T>): Promise<T> {
  const change = await ownerSwitch(db, schema, relations);
  if (change === undefined) return fn();
  await db.query(setRole(change.owner, true));
  const result = await fn();
  await db.query(setRole(change.back, true));
  return result;
}

/**
 * {@link asSchemaOwner} for a whole session (migrations run in transactions of their own), unless
 * a relation of the schema is owned by another role. When
 * `fn` throws the role is not set back: the caller must end the session (withClient does).
 * @throws the database's error, `fn`'s.
 */
export async function asSchemaOwnerSession<T>(db: Queryable, schema: string, fn: () => Promise<T>): Promise<T> {
  const change = await ownerSwitch(db, schema, null);
  if (change === undefined) return fn();
  await db.query(setRole(change.owner, false));
  const result = await fn();
  await db.query(setRole(change.back, false));
  return result;
}
