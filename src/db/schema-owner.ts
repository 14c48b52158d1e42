/**
 * DDL as the schema's owner: what a run (partitions, rollup rebuilds, records_typed) or `migrate`
 * creates is that role's, with its default privileges, even when a member of it runs them
 * (docs/deploy.md, Database roles). Invariants: the role changes only when the session may SET ROLE
 * to the owner and is not it, and no relation named is another role's (an earlier release's, a
 * DBA's choice). The embedded database's one role owns its schema: never a change.
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

/** `fn` as the owner of `schema` (SET LOCAL ROLE when `local`, else SET ROLE), the role set back once it succeeded. */
async function asOwner<T>(db: Queryable, schema: string, relations: readonly string[] | null, local: boolean, fn: () => Promise<T>): Promise<T> {
  const change = await ownerSwitch(db, schema, relations);
  if (change === undefined) return fn();
  await db.query(setRole(change.owner, local));
  const result = await fn();
  await db.query(setRole(change.back, local));
  return result;
}

/**
 * Runs `fn` as the owner of `schema` (SET LOCAL ROLE), the role set back once it succeeded.
 * Inside the caller's transaction: when `fn` throws, its rollback (or a rollback to a savepoint
 * taken before this call) undoes the change.
 * @param relations qualified, quoted: existing ones `fn` alters or drops; one owned by another role keeps the session's role.
 * @throws the database's error, `fn`'s.
 */
export function asSchemaOwner<T>(db: Queryable, schema: string, relations: readonly string[], fn: () => Promise<T>): Promise<T> {
  return asOwner(db, schema, relations, true, fn);
}

/**
 * {@link asSchemaOwner} for a session (each migration is a transaction), unless any relation of the
 * schema is another role's. When `fn` throws the role stays: the caller ends the session (withClient does).
 * @throws the database's error, `fn`'s.
 */
export function asSchemaOwnerSession<T>(db: Queryable, schema: string, fn: () => Promise<T>): Promise<T> {
  return asOwner(db, schema, null, false, fn);
}
