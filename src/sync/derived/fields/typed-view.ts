/**
 * `records_typed`: one view over every source's records, a typed column per scalar field of the
 * catalogue, for the TYPED_VIEW_MAX_FIELDS fields most records carry (the rest stay in
 * record_fields and payload), recreated when that set or a type changes, keeping its owner and
 * grants. derived_settings keeps its definition. Design: docs/design/derived-tables.md.
 */
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../../../db/pool.js';
import { asSchemaOwner } from '../../../db/schema-owner.js';
import type { Logger } from '../../../log.js';
import { mergeSources, readFields, type FieldRow } from './fields.js';
import { compareCodePoints } from '../rollup/code-points.js';
import { deleteSetting, relationExists, saveSetting } from '../settings.js';
import type { DerivedTable, Queryable, SchemaTables, WindowCommit } from '../table.js';
import { readViewAccess, restoreViewAccess } from './view-access.js';

const VIEW_SETTING = 'typed_view';
/** The limit at which the view last left fields out (warned once), absent while it holds them all. */
const LIMIT_SETTING = 'typed_view_limit';
/** PostgreSQL's columns of a relation, a view's too (MaxHeapAttributeNumber): more fail with SQLSTATE 54011. */
const PG_MAX_COLUMNS = 1600;

/** From `records` and the record's window in sync_windows; no field column takes these names. */
const VIEW_BASE_COLUMNS = ['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at'] as const;
/** `r` the record, `w` its window's ledger row. */
const VIEW_BASE_SELECT: Record<(typeof VIEW_BASE_COLUMNS)[number], string> = {
  id: 'r.id',
  source: 'r.source',
  event_time: 'r.event_time',
  window_start: 'r.window_start',
  window_end: 'w.window_end',
  run_id: 'w.run_id',
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

/** What records_typed holds of the catalogue's fields with a column type. */
export interface ViewFields {
  /** In path order, as the view's columns. */
  held: FieldRow[];
  /** With a column type, beyond the limit. */
  leftOut: number;
}

/** The `max` fields with a column type that most records carry, ties by path in code point order (stable from run to run). */
export function viewFields(fields: readonly FieldRow[], max: number): ViewFields {
  const typed = fields.filter((f) => f.viewType !== null);
  if (typed.length <= max) return { held: typed, leftOut: 0 };
  const ranked = [...typed].sort((a, b) => b.records - a.records || compareCodePoints(a.path, b.path));
  const kept = new Set(ranked.slice(0, max));
  return { held: typed.filter((f) => kept.has(f)), leftOut: typed.length - max };
}

/** Why a recreation failed, by SQLSTATE: the owner's or a dependent object's, else the error alone says. */
function refusalMessage(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === '2BP01') return 'records_typed could not be recreated for the new fields: an object depends on it; it stays as it was';
  if (code === '42501') return 'records_typed could not be recreated for the new fields: this role may not give it back to its owner; it stays as it was';
  return 'records_typed could not be recreated for the new fields; it stays as it was';
}

/** The columns records_typed has now (none when it does not exist). */
async function viewColumns(db: Queryable, t: SchemaTables): Promise<Set<string>> {
  const { rows } = await db.query<{ name: string }>(
    'select attname as name from pg_attribute where attrelid = to_regclass($1) and attnum > 0 and not attisdropped',
    [t.typedView],
  );
  return new Set(rows.map((r) => r.name));
}

/**
 * `fields` with `column` null where records_typed has no such column: left out at
 * TYPED_VIEW_MAX_FIELDS, or not recreated since the field came.
 * @throws the database's error.
 */
export async function inViewColumns(db: Queryable, t: SchemaTables, fields: readonly FieldRow[]): Promise<FieldRow[]> {
  const columns = await viewColumns(db, t);
  return fields.map((f) => (f.column !== null && !columns.has(f.column) ? { ...f, column: null } : f));
}

/** A source's catalogue fields by their place in records_typed. */
export interface FieldPlaces {
  /** A column of the view. */
  column: number;
  /** With a column type, but not in the view (beyond TYPED_VIEW_MAX_FIELDS, or the view not recreated). */
  leftOut: number;
  /** Objects or arrays only, in every source: no column type. */
  none: number;
}

/** @throws the database's error. */
export async function fieldPlaces(db: Queryable, t: SchemaTables, source: string): Promise<FieldPlaces> {
  const all = await readFields(db, t);
  const viewTypes = new Map(mergeSources(all).map((f) => [f.path, f.viewType]));
  const columns = await viewColumns(db, t);
  const places: FieldPlaces = { column: 0, leftOut: 0, none: 0 };
  for (const f of all) {
    if (f.source !== source) continue;
    if (f.column !== null && columns.has(f.column)) places.column++;
    else if (viewTypes.get(f.path) === null) places.none++;
    else places.leftOut++;
  }
  return places;
}

export class TypedView implements DerivedTable {
  /** Field columns, never past PostgreSQL's limit. */
  readonly #max: number;

  constructor(
    private readonly t: SchemaTables,
    maxFields: number,
  ) {
    this.#max = Math.min(maxFields, PG_MAX_COLUMNS - VIEW_BASE_COLUMNS.length);
  }

  clearWindowSql(): string[] {
    return [];
  }

  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    if (commit.catalogueChanged) await this.refresh(db, commit.log);
  }

  /**
   * Names the held fields' new columns and recreates the view when its definition changed, its
   * owner and privileges kept (view-access.ts). When that fails (a dependent object, an owner or
   * grant this role may not give back) the view stays as it was, with a warning; the window still
   * commits. A change of the fields left out is logged once (#reportLimit).
   */
  async refresh(db: PoolClient, log: Logger): Promise<void> {
    // Sources load at once: never two columns for one field, nor two fields for one column.
    await db.query('select pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `typed_view:${this.t.schema}`]);
    const fields = mergeSources(await readFields(db, this.t));
    const view = viewFields(fields, this.#max);
    await this.#nameColumns(db, fields, view.held);
    const definition = typedViewSql(this.t, view.held);
    const { rows } = await db.query<{ value: string }>(`select value from ${this.t.derivedSettings} where name = $1`, [VIEW_SETTING]);
    const current = rows[0]?.value === definition && (await relationExists(db, this.t.typedView));
    if (current || (await this.#recreate(db, log, definition))) await this.#reportLimit(db, log, view);
  }

  /** A name once per field, kept while it is left out; `taken` counts every field's. */
  async #nameColumns(db: PoolClient, fields: readonly FieldRow[], held: readonly FieldRow[]): Promise<void> {
    const unnamed = held.filter((f) => f.column === null);
    if (unnamed.length === 0) return;
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

  /** @returns whether the view now has `definition`. */
  async #recreate(db: PoolClient, log: Logger, definition: string): Promise<boolean> {
    await db.query('savepoint typed_view');
    try {
      // The schema owner's view, unless an existing one is another role's (kept as it was).
      await asSchemaOwner(db, this.t.schema, [this.t.typedView], async () => {
        const access = await readViewAccess(db, this.t.typedView);
        await db.query(`drop view if exists ${this.t.typedView}`);
        await db.query(definition);
        if (access !== null) await restoreViewAccess(db, this.t.typedView, access);
      });
      await db.query(
        `insert into ${this.t.derivedSettings} (name, value) values ($1, to_jsonb($2::text))
           on conflict (name) do update set value = excluded.value, updated_at = now()`,
        [VIEW_SETTING, definition],
      );
      await db.query('release savepoint typed_view');
      return true;
    } catch (err) {
      await db.query('rollback to savepoint typed_view');
      log.warn({ err }, refusalMessage(err));
      return false;
    }
  }

  /** A warning when the view starts leaving fields out at a limit (not again while it stays at it), a note when it holds all again. */
  async #reportLimit(db: PoolClient, log: Logger, view: ViewFields): Promise<void> {
    const { rows } = await db.query<{ value: unknown }>(`select value from ${this.t.derivedSettings} where name = $1`, [LIMIT_SETTING]);
    const warned = rows[0]?.value;
    const line = { setting: 'TYPED_VIEW_MAX_FIELDS', limit: this.#max, fields: view.held.length + view.leftOut, leftOut: view.leftOut };
    if (view.leftOut > 0 && warned !== this.#max) {
      log.warn(
        line,
        'records_typed has columns for the TYPED_VIEW_MAX_FIELDS fields most records carry and leaves the others out (they stay in record_fields and payload); raise TYPED_VIEW_MAX_FIELDS, up to 1593, for more',
      );
      await saveSetting(db, this.t, LIMIT_SETTING, this.#max);
    } else if (view.leftOut === 0 && warned !== undefined) {
      log.info(line, 'records_typed has a column for every field again');
      await deleteSetting(db, this.t, LIMIT_SETTING);
    }
  }

  /** When it exists: a release may change its definition (a new base column), a setting the fields it holds. */
  async refreshExisting(db: PoolClient, log: Logger): Promise<void> {
    if (await relationExists(db, this.t.typedView)) await this.refresh(db, log);
  }
}
