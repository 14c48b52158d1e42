/** derived_settings rows and relation checks: how a derived table knows what it was built for. */
import { isDeepStrictEqual } from 'node:util';
import type { Queryable, SchemaTables } from './table.js';

/** Compared as values: jsonb does not keep an object's key order. */
export async function settingIs(db: Queryable, t: SchemaTables, name: string, value: unknown): Promise<boolean> {
  const { rows } = await db.query<{ value: unknown }>(`select value from ${t.derivedSettings} where name = $1`, [name]);
  return rows[0]?.value !== undefined && isDeepStrictEqual(rows[0].value, value);
}

export async function saveSetting(db: Queryable, t: SchemaTables, name: string, value: unknown): Promise<void> {
  await db.query(
    `insert into ${t.derivedSettings} (name, value) values ($1, $2::jsonb)
         on conflict (name) do update set value = excluded.value, updated_at = now()`,
    [name, JSON.stringify(value)],
  );
}

export async function deleteSetting(db: Queryable, t: SchemaTables, name: string): Promise<void> {
  await db.query(`delete from ${t.derivedSettings} where name = $1`, [name]);
}

/** `qualified`: quoted. */
export async function relationExists(db: Queryable, qualified: string): Promise<boolean> {
  const { rows } = await db.query<{ exists: boolean }>('select to_regclass($1) is not null as exists', [qualified]);
  return rows[0]!.exists;
}
