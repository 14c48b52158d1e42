/**
 * `record_fields`: the catalogue of top-level payload fields per source (types seen, records
 * holding it, first and last seen, a short example). A page's fields are gathered while it waits
 * for the writer ({@link catalogueRecords}), merged per window ({@link mergeFields}) and into the
 * table at the window's commit ({@link FieldCatalogue.addWindow}); clearing a window subtracts its
 * records. FIELD_CATALOGUE=off stops maintaining it (left as it is). Nothing here assumes a field.
 */
import type { RollupConfig } from '../../../config.js';
import type { PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';
import type { FieldChange, KnownFields, WindowFields } from './field-types.js';
import { PageWalk } from '../page-walk.js';
import type { DerivedTable, Queryable, SchemaTables, WindowCommit } from '../table.js';

export {
  EXAMPLE_MAX_CHARS,
  ISO_DATE_TIME_PATTERN,
  jsonType,
  SECRET_FIELD_PATTERN,
  type FieldChange,
  type FieldStats,
  type KnownFields,
  type WindowFields,
} from './field-types.js';

/** The walk {@link catalogueRecords} runs: the catalogue's alone (it keeps only scratch arrays between pages). */
const CATALOGUE_WALK = new PageWalk();

/**
 * Adds the top-level fields of the kept records of a page to `into` (work done while the page
 * waits for the writer, so the window's transaction only merges the result): one walk of the
 * records, as the sync's own ({@link PageWalk}) without rollups.
 *
 * @param records the page's parsed records (E6 `data`).
 * @param keep positions of the records stored, ascending.
 * @param eventTimes per kept record, its event time in milliseconds or null.
 */
export function catalogueRecords(
  records: readonly unknown[],
  keep: readonly number[],
  eventTimes: readonly (number | null)[],
  into: WindowFields = new Map(),
): WindowFields {
  return CATALOGUE_WALK.observe(records, keep, eventTimes, true, into).fields;
}

/**
 * Takes records counted into `fields` by {@link catalogueRecords} back out of it (the records the
 * database then refused): each top-level field of each loses one record, and a field left with
 * none is removed. A type or an example only such a record showed stays with a field others hold.
 *
 * @param records each record's JSON text as E6 sent it; a text JSON.parse cannot read is skipped.
 */
export function uncatalogueRecords(fields: WindowFields, records: readonly { text: string }[]): void {
  for (const { text } of records) {
    let record: unknown;
    try {
      record = JSON.parse(text);
    } catch {
      continue;
    }
    if (typeof record !== 'object' || record === null || Array.isArray(record)) continue;
    for (const key of Object.keys(record)) {
      const stats = fields.get(key);
      if (stats !== undefined && --stats.records <= 0) fields.delete(key);
    }
  }
}

/** Merges `from` into `into` (the window's fields from its pages). */
export function mergeFields(into: WindowFields, from: WindowFields): void {
  for (const [key, f] of from) {
    const stats = into.get(key);
    if (stats === undefined) {
      into.set(key, { ...f, types: new Set(f.types) });
    } else {
      for (const t of f.types) stats.types.add(t);
      stats.records += f.records;
      stats.first = Math.min(stats.first, f.first);
      stats.last = Math.max(stats.last, f.last);
      stats.untimed ||= f.untimed;
      stats.example ??= f.example;
    }
  }
}

/** record_fields of one schema, maintained unless FIELD_CATALOGUE is off. */
export class FieldCatalogue implements DerivedTable {
  /** Whether record_fields is maintained (FIELD_CATALOGUE). */
  readonly enabled: boolean;

  constructor(
    private readonly t: SchemaTables,
    rollup: RollupConfig,
  ) {
    this.enabled = rollup.catalogue;
  }

  /** Clearing a window subtracts its deleted records (`gone`) from the source's counts of their fields. */
  clearWindowSql(): string[] {
    return this.#recountSql({ rows: 'gone', keys: 'keys', update: 'uncounted', sign: '-' });
  }

  /** Records inserted back (`back`) are counted again: their fields were catalogued when first stored. */
  restoreWindowSql(): string[] {
    return this.#recountSql({ rows: 'back', keys: 'back_keys', update: 'recounted', sign: '+' });
  }

  /**
   * CTEs adding (`+`) or subtracting (`-`) the records of the CTE `rows` to or from the source's
   * counts of their top-level fields; the CTE names are fixed by the caller (never input).
   */
  #recountSql(o: { rows: string; keys: string; update: string; sign: '+' | '-' }): string[] {
    if (!this.enabled) return [];
    return [
      `${o.keys} as (
           select k as path, count(*) as n
             from ${o.rows}, jsonb_object_keys(case when jsonb_typeof(payload) = 'object' then payload else '{}' end) as k group by k
         )`,
      `${o.update} as (update ${this.t.fields} f set records = f.records ${o.sign} ${o.keys}.n, updated_at = now() from ${o.keys} where f.source = $3 and f.path = ${o.keys}.path)`,
    ];
  }

  /** At a window's commit: its fields merged into the catalogue, and what they bring recorded. */
  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    if (await this.addWindow(db, commit.source, commit.window, commit.fields)) commit.catalogueChanged = true;
    if (commit.changes !== undefined) await this.addChanges(db, commit.source, commit.window, commit.runId, commit.changes);
  }

  /** `source`'s catalogue: each field name with the types seen (empty when it has none). */
  async readTypes(db: Queryable, source: string): Promise<KnownFields> {
    const { rows } = await db.query<{ path: string; types: string[] }>(`select path, types from ${this.t.fields} where source = $1`, [source]);
    return new Map(rows.map((r) => [r.path, new Set(r.types)]));
  }

  /**
   * Records in record_field_changes the fields and types `source`'s catalogue gains with `window`
   * (loaded by run `runId`), in the window's transaction; one that is there already stays as first
   * recorded.
   */
  private async addChanges(db: Queryable, source: string, window: Window, runId: number, changes: readonly FieldChange[]): Promise<void> {
    if (changes.length === 0) return;
    await db.query(
      `insert into ${this.t.fieldChanges} (source, path, type, new_field, window_start, window_end, run_id)
       select $1, path, type, new_field, $5, $6, $7 from unnest($2::text[], $3::text[], $4::boolean[]) as c(path, type, new_field)
       on conflict (source, path, type) do nothing`,
      [source, changes.map((c) => c.path), changes.map((c) => c.type), changes.map((c) => c.newField), new Date(window.start), new Date(window.end), runId],
    );
  }

  /**
   * At the commit of `source`'s `window`: merges `fields` (the top-level fields of the records
   * just inserted, see {@link catalogueRecords}) into the source's catalogue.
   *
   * @returns whether the catalogue gained a field or a field a type (records_typed may have to change).
   */
  private async addWindow(db: PoolClient, source: string, window: Window, fields: WindowFields): Promise<boolean> {
    if (!this.enabled || fields.size === 0) return false;
    const entries = [...fields];
    // `before` reads the catalogue as it was before this statement: a field new or with a new type
    // means records_typed may have to change.
    const { rows } = await db.query<{ changed: string }>(
      `with before as (
         select path, types from ${this.t.fields} where source = $7 and path = any($1::text[])
       ), merged as (
         insert into ${this.t.fields} as c (source, path, types, records, first_seen, last_seen, example)
         select $7, path, string_to_array(types, ','), records, first_seen, last_seen, example
           from unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::text[])
             as n(path, types, records, first_seen, last_seen, example)
         on conflict (source, path) do update set
           types = (select array_agg(distinct t order by t) from unnest(c.types || excluded.types) as t),
           records = c.records + excluded.records,
           first_seen = least(c.first_seen, excluded.first_seen),
           last_seen = greatest(c.last_seen, excluded.last_seen),
           example = coalesce(c.example, excluded.example),
           updated_at = now()
         returning path, types
       )
       select count(*) as changed from merged left join before using (path) where before.types is distinct from merged.types`,
      [
        entries.map(([path]) => path),
        entries.map(([, f]) => [...f.types].sort().join(',')),
        entries.map(([, f]) => f.records),
        entries.map(([, f]) => new Date(f.untimed ? Math.min(f.first, window.start) : f.first)),
        entries.map(([, f]) => new Date(f.untimed ? Math.max(f.last, window.start) : f.last)),
        entries.map(([, f]) => f.example),
        source,
      ],
    );
    return Number(rows[0]!.changed) > 0;
  }
}
