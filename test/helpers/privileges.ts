/** The privileges on relations as the catalogue holds them, for tests of what keeps them (migrations, records_typed). */
import type pg from 'pg';

/**
 * Every privilege of a role other than the owner on `relations` (schema-qualified names), table-wide
 * and on columns, one line each, sorted: relation name, owner, column (`-` table-wide), grantor,
 * grantee (`PUBLIC`), privilege, grant option (`true`/`false`), e.g.
 * `records postgres - postgres fp_lead SELECT true`.
 */
export async function privilegeLines(pool: pg.Pool, relations: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ line: string }>(
    `select concat_ws(' ', c.relname, pg_get_userbyid(c.relowner), coalesce(x.col, '-'), pg_get_userbyid(a.grantor),
                      case when a.grantee = 0 then 'PUBLIC' else pg_get_userbyid(a.grantee) end, a.privilege_type, a.is_grantable::text) as line
       from pg_class c
      cross join lateral (select null::name as col, c.relacl as acl
                          union all select t.attname, t.attacl from pg_attribute t where t.attrelid = c.oid and t.attnum > 0 and not t.attisdropped) x
      cross join lateral aclexplode(x.acl) a
      where c.oid = any ($1::regclass[]) and a.grantee <> c.relowner
      order by 1`,
    [relations],
  );
  return rows.map((r) => r.line);
}

/** Whether `role` may use `privilege` (`select`, `insert`…) on `relation`, directly, through PUBLIC or a role it belongs to (has_table_privilege). */
export async function holds(pool: pg.Pool, role: string, relation: string, privilege: string): Promise<boolean> {
  const { rows } = await pool.query<{ ok: boolean }>('select has_table_privilege($1, $2, $3) as ok', [role, relation, privilege]);
  return rows[0]!.ok;
}
