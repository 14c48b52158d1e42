/**
 * `records_typed`: one view over every source's records with one typed column per scalar field
 * of the catalogue (its type from the types every source saw: src/sync/derived/fields/fields.ts),
 * recreated when the catalogue gains a field or a field's type widens. derived_settings keeps the
 * definition it was created with, so an unchanged catalogue recreates nothing.
 */
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { mergeSources, readFields, type FieldRow } from './fields.js';
import { relationExists } from '../settings.js';
import type { DerivedTable, SchemaTables, WindowCommit } from '../table.js';
import { readViewAccess, restoreViewAccess } from './view-access.js';

/** Name under which derived_settings keeps the definition records_typed was created with. */
const VIEW_SETTING = 'typed_view';

/**
 * The columns records_typed takes from `records` itself and from the record's window in
 * sync_windows (its end and when it was loaded, kept once per window); a field column never takes
 * these names.
 */
const VIEW_BASE_COLUMNS = ['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at'] as const;
/** Each base column as records_typed selects it: `r` is the record, `w` its window's ledger row. */
const VIEW_BASE_SELECT: Record<(typeof VIEW_BASE_COLUMNS)[number], string> = {
  id: 'r.id',
  source: 'r.source',
  event_time: 'r.event_time',
  window_start: 'r.window_start',
  window_end: 'w.window_end',
  run_id: 'r.run_id',
  loaded_at: 'w.loaded_at',
};

/**
 * The column name of a field in records_typed: the name itself when it is a plain lower-case SQL
 * identifier, else a sanitised one (camelCase to snake_case, other characters to `_`, a leading
 * digit prefixed with `_`, cut to 63 bytes), with `_2`, `_3`… added while it collides with `taken`.
 */
export function columnName(field: string, taken: ReadonlySet<string>): string {
  let base = field
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '');
  if (base === '') base = 'field';
  if (/^[0-9]/.test(base)) base = `_${base}`;
  base = base.slice(0, 59);
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
  return name;
}

/** A string as an SQL literal (standard_conforming_strings, PostgreSQL's default since 9.1). */
function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** The `create view` statement of records_typed for these catalogue rows (columns named). */
export function typedViewSql(t: SchemaTables, fields: readonly FieldRow[]): string {
  const columns = fields.flatMap((f) => {
    if (f.column === null || f.viewType === null) return [];
    const key = quoteLiteral(f.path);
    const value = `r.payload -> ${key}`;
    const text = `r.payload ->> ${key}`;
    const expr =
      f.viewType === 'numeric'
        ? `case when jsonb_typeof(${value}) = 'number' then (${text})::numeric end`
        : f.viewType === 'boolean'
          ? `case when jsonb_typeof(${value}) = 'boolean' then (${text})::boolean end`
          : f.viewType === 'timestamptz'
            ? `case when jsonb_typeof(${value}) = 'string' then ${t.tryTimestamptz}(${text}) end`
            : text;
    return [`${expr} as ${quoteIdent(f.column)}`];
  });
  const base = VIEW_BASE_COLUMNS.map((c) => VIEW_BASE_SELECT[c]);
  return `create view ${t.typedView} as select ${[...base, ...columns].join(', ')} from ${t.records} r left join ${t.windows} w on w.source = r.source and w.window_start = r.window_start`;
}

/** records_typed of one schema. */
export class TypedView implements DerivedTable {
  constructor(private readonly t: SchemaTables) {}

  /** Nothing: a view holds no rows of its own. */
  clearWindowSql(): string[] {
    return [];
  }

  /** At a window's commit: recreated when the catalogue gained a field or a type. */
  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    if (commit.catalogueChanged) await this.refresh(db, commit.log);
  }

  /**
   * Names the catalogue's new fields' columns and recreates records_typed when its definition
   * changed. The recreated view keeps the old one's owner (given back with `alter view … owner to`
   * when it is not the role running the sync) and every privilege other roles held on it, PUBLIC's
   * and column grants included, WITH GRANT OPTION kept (view-access.ts); its owner becomes the
   * grantor of each. Objects depending on the view (a user's view over it), or an owner or a grant
   * this role may not give back, block the recreation: the window still commits, the view stays as
   * it was, and a warning says so.
   */
  async refresh(db: PoolClient, log: Logger): Promise<void> {
    // Sources load concurrently: one transaction at a time names columns and recreates the view
    // (until its commit), so two sources never give one field two columns or one column two fields.
    await db.query('select pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `typed_view:${this.t.schema}`]);
    const fields = mergeSources(await readFields(db, this.t));
    const unnamed = fields.filter((f) => f.column === null);
    if (unnamed.length > 0) {
      const taken = new Set<string>([...VIEW_BASE_COLUMNS, ...fields.flatMap((f) => (f.column === null ? [] : [f.column]))]);
      for (const field of unnamed) {
        field.column = columnName(field.path, taken);
        taken.add(field.column);
      }
      await db.query(`update ${this.t.fields} f set view_column = n.col from unnest($1::text[], $2::text[]) as n(path, col) where f.path = n.path`, [
        unnamed.map((f) => f.path),
        unnamed.map((f) => f.column),
      ]);
    }
    const definition = typedViewSql(this.t, fields);
    const { rows } = await db.query<{ value: string }>(`select value from ${this.t.derivedSettings} where name = $1`, [VIEW_SETTING]);
    if (rows[0]?.value === definition && (await relationExists(db, this.t.typedView))) return;
    await db.query('savepoint typed_view');
    try {
      const access = await readViewAccess(db, this.t.typedView);
      await db.query(`drop view if exists ${this.t.typedView}`);
      await db.query(definition);
      if (access !== null) await restoreViewAccess(db, this.t.typedView, access);
      await db.query(
        `insert into ${this.t.derivedSettings} (name, value) values ($1, to_jsonb($2::text))
           on conflict (name) do update set value = excluded.value, updated_at = now()`,
        [VIEW_SETTING, definition],
      );
      await db.query('release savepoint typed_view');
    } catch (err) {
      await db.query('rollback to savepoint typed_view');
      log.warn(
        { err },
        'records_typed could not be recreated for the new fields (does an object depend on it, or may this role not give it back to its owner?); it stays as it was',
      );
    }
  }

  /**
   * Recreates records_typed when it exists and its definition is not the one this release writes
   * (a release adding a base column such as `source`), without waiting for a new field.
   */
  async refreshExisting(db: PoolClient, log: Logger): Promise<void> {
    if (await relationExists(db, this.t.typedView)) await this.refresh(db, log);
  }
}
