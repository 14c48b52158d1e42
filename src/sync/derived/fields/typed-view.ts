/**
 * `records_typed`: one view over every source's records, a typed column per scalar field of the
 * catalogue, recreated when the catalogue gains a field or a type widens, keeping its owner and
 * grants. derived_settings keeps its definition. Design: docs/design/derived-tables.md.
 */
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { mergeSources, readFields, type FieldRow } from './fields.js';
import { relationExists } from '../settings.js';
import type { DerivedTable, SchemaTables, WindowCommit } from '../table.js';
import { readViewAccess, restoreViewAccess } from './view-access.js';

const VIEW_SETTING = 'typed_view';

/** From `records` and the record's window in sync_windows; no field column takes these names. */
const VIEW_BASE_COLUMNS = ['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at'] as const;
/** `r` the record, `w` its window's ledger row. */
const VIEW_BASE_SELECT: Record<(typeof VIEW_BASE_COLUMNS)[number], string> = {
  id: 'r.id',
  source: 'r.source',
  event_time: 'r.event_time',
  window_start: 'r.window_start',
  window_end: 'w.window_end',
  run_id: 'r.run_id',
  loaded_at: 'w.loaded_at',
};

/** The name when a plain lower-case identifier, else sanitised (snake_case, cut short); `_2`, `_3`… while it collides with `taken`. */
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

/** With standard_conforming_strings, PostgreSQL's default since 9.1. */
function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** For these catalogue rows, their columns named. */
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

export class TypedView implements DerivedTable {
  constructor(private readonly t: SchemaTables) {}

  clearWindowSql(): string[] {
    return [];
  }

  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    if (commit.catalogueChanged) await this.refresh(db, commit.log);
  }

  /**
   * Names new fields' columns and recreates the view when its definition changed, its owner and
   * privileges kept (view-access.ts). When that fails (a dependent object, an owner or grant this
   * role may not give back) the view stays as it was, with a warning; the window still commits.
   */
  async refresh(db: PoolClient, log: Logger): Promise<void> {
    // Sources load at once: never two columns for one field, nor two fields for one column.
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

  /** When it exists: a release may change its definition (a new base column). */
  async refreshExisting(db: PoolClient, log: Logger): Promise<void> {
    if (await relationExists(db, this.t.typedView)) await this.refresh(db, log);
  }
}
