/**
 * A view's owner and privileges, read before the view is dropped and given back to the view created
 * in its place (records_typed is recreated when the field catalogue changes: typed-view.ts), so that
 * a user's `grant select on records_typed to bi_reader` outlives the recreation.
 */
import { quoteIdent, type PoolClient } from '../../../db/pool.js';

/** One privilege on a relation (`column` null) or on one of its columns, of a role other than its owner. */
export interface ViewPrivilege {
  readonly column: string | null;
  /** The role holding it; null for PUBLIC. */
  readonly grantee: string | null;
  /** As aclexplode names it: `SELECT`, `INSERT`, `UPDATE`, `DELETE`, `TRUNCATE`, `REFERENCES`, `TRIGGER`… */
  readonly privilege: string;
  /** Held WITH GRANT OPTION. */
  readonly grantable: boolean;
}

/** The owner of a relation and every privilege others hold on it. */
export interface ViewAccess {
  readonly owner: string;
  readonly privileges: readonly ViewPrivilege[];
}

/** A privilege keyword from aclexplode, checked before it goes into a statement. */
const PRIVILEGE = /^[A-Z]+$/;

/**
 * The owner of the relation `qualified` (a quoted, schema-qualified name) and every privilege of
 * other roles on it, table-wide and on its columns (pg_class.relacl and pg_attribute.attacl through
 * aclexplode), PUBLIC's included; null when no such relation exists.
 */
export async function readViewAccess(db: PoolClient, qualified: string): Promise<ViewAccess | null> {
  const { rows } = await db.query<{ owner: string; privileges: ViewPrivilege[] }>(
    `select pg_get_userbyid(c.relowner) as owner,
            coalesce((select json_agg(json_build_object('column', x.col, 'grantee', case when a.grantee = 0 then null else pg_get_userbyid(a.grantee) end,
                                                        'privilege', a.privilege_type, 'grantable', a.is_grantable)
                                      order by x.col nulls first, a.grantee, a.privilege_type)
                        from (select null::name as col, c.relacl as acl
                              union all
                              select t.attname, t.attacl from pg_attribute t where t.attrelid = c.oid and t.attnum > 0 and not t.attisdropped) x
                        cross join lateral aclexplode(x.acl) a
                       where a.grantee <> c.relowner), '[]'::json) as privileges
       from pg_class c where c.oid = to_regclass($1)`,
    [qualified],
  );
  return rows[0] ?? null;
}

/** A privilege's key without its grant option: which column, which role, which privilege. */
function keyOf(p: ViewPrivilege): string {
  return JSON.stringify([p.column, p.grantee, p.privilege]);
}

/** `SELECT (col) on view to role` as GRANT and REVOKE spell it. */
function clause(p: ViewPrivilege, qualified: string, preposition: 'to' | 'from'): string {
  if (!PRIVILEGE.test(p.privilege)) throw new Error(`unexpected privilege ${JSON.stringify(p.privilege)} on ${qualified}`);
  const column = p.column === null ? '' : ` (${quoteIdent(p.column)})`;
  return `${p.privilege}${column} on ${qualified} ${preposition} ${p.grantee === null ? 'public' : quoteIdent(p.grantee)}`;
}

/**
 * Gives the view `qualified`, just created in place of the one `kept` was read from, that view's
 * owner (`alter view … owner to`, when the role running this is not it) and exactly its privileges:
 * each one of `kept` granted again (WITH GRANT OPTION kept, on a column when the new view has it),
 * and any the new view holds beyond them (from default privileges) revoked. PostgreSQL records the
 * view's owner as the grantor of every grant given here (the role recreating the view, or the owner
 * it acts as), whoever granted it before: a grant another grantee made with its grant option
 * becomes the owner's. Runs in the caller's transaction.
 * @throws the database's error when the role may not give the view to its owner (not a member of
 *   the owner's role) or may not grant; the caller rolls the recreation back.
 */
export async function restoreViewAccess(db: PoolClient, qualified: string, kept: ViewAccess): Promise<void> {
  const created = await readViewAccess(db, qualified);
  if (created === null) throw new Error(`${qualified} does not exist`);
  if (created.owner !== kept.owner) await db.query(`alter view ${qualified} owner to ${quoteIdent(kept.owner)}`);
  const now = created.owner === kept.owner ? created : await readViewAccess(db, qualified);
  const columns = new Set<string>(
    (
      await db.query<{ name: string }>('select attname as name from pg_attribute where attrelid = to_regclass($1) and attnum > 0 and not attisdropped', [
        qualified,
      ])
    ).rows.map((r) => r.name),
  );
  const wanted = new Map(kept.privileges.filter((p) => p.column === null || columns.has(p.column)).map((p) => [keyOf(p), p]));
  for (const held of now?.privileges ?? []) {
    const want = wanted.get(keyOf(held));
    if (want === undefined) await db.query(`revoke ${clause(held, qualified, 'from')} cascade`);
    else if (held.grantable && !want.grantable) await db.query(`revoke grant option for ${clause(held, qualified, 'from')} cascade`);
  }
  const held = new Map((now?.privileges ?? []).map((p) => [keyOf(p), p]));
  for (const [key, want] of wanted) {
    const has = held.get(key);
    if (has === undefined || (want.grantable && !has.grantable)) {
      await db.query(`grant ${clause(want, qualified, 'to')}${want.grantable ? ' with grant option' : ''}`);
    }
  }
}
