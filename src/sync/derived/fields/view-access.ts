/**
 * A view's owner and privileges, read before it is dropped and given back to the view created in
 * its place, so a `grant select on records_typed to bi_reader` outlives the recreation. Design:
 * docs/design/derived-tables.md.
 */
import { quoteIdent, type PoolClient } from '../../../db/pool.js';

/** Of a role other than the owner; `column` null for the relation. */
interface ViewPrivilege {
  readonly column: string | null;
  /** Null for PUBLIC. */
  readonly grantee: string | null;
  /** As aclexplode names it (`SELECT`, …). */
  readonly privilege: string;
  /** WITH GRANT OPTION. */
  readonly grantable: boolean;
}

export interface ViewAccess {
  readonly owner: string;
  readonly privileges: readonly ViewPrivilege[];
}

/** Checked before a keyword from aclexplode goes into a statement. */
const PRIVILEGE = /^[A-Z]+$/;

/** Table-wide and per column, PUBLIC's included; `qualified` quoted. @returns null when no such relation exists. */
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

/** Without the grant option. */
function keyOf(p: ViewPrivilege): string {
  return JSON.stringify([p.column, p.grantee, p.privilege]);
}

/** `SELECT (col) on view to role`. */
function clause(p: ViewPrivilege, qualified: string, preposition: 'to' | 'from'): string {
  if (!PRIVILEGE.test(p.privilege)) throw new Error(`unexpected privilege ${JSON.stringify(p.privilege)} on ${qualified}`);
  const column = p.column === null ? '' : ` (${quoteIdent(p.column)})`;
  return `${p.privilege}${column} on ${qualified} ${preposition} ${p.grantee === null ? 'public' : quoteIdent(p.grantee)}`;
}

/**
 * Gives the new view `kept`'s owner and exactly its privileges (a column's when the view still has
 * it), revoking any beyond them; the owner becomes the grantor of each.
 * @throws the database's error when the role may not give the view to its owner or may not grant.
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
