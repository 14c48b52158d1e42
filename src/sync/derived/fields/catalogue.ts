/**
 * `record_fields`: the catalogue of top-level payload fields per source. A page's fields are
 * gathered while it waits for the writer, merged per window and into the table at its commit;
 * clearing a window subtracts its records. FIELD_CATALOGUE=off leaves it as it is. Design:
 * docs/design/derived-tables.md.
 */
import type { RollupConfig } from '../../../config.js';
import type { PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';
import type { FieldChange, KnownFields, WindowFields } from './field-types.js';
import { PageWalk } from '../page-walk.js';
import type { DerivedTable, Queryable, SchemaTables, WindowCommit } from '../table.js';

export { jsonType, type FieldChange, type KnownFields, type WindowFields } from './field-types.js';

/** The catalogue's walk alone. */
const CATALOGUE_WALK = new PageWalk();

/** @param keep positions of the records stored, ascending; `eventTimes` per kept record, ms or null. */
export function catalogueRecords(
  records: readonly unknown[],
  keep: readonly number[],
  eventTimes: readonly (number | null)[],
  into: WindowFields = new Map(),
): WindowFields {
  return CATALOGUE_WALK.observe(records, keep, eventTimes, true, into).fields;
}

/**
 * Takes records the database then refused back out of `fields`; a type or an example only they
 * showed stays with a field others hold. A text JSON.parse cannot read is skipped.
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

export class FieldCatalogue implements DerivedTable {
  /** FIELD_CATALOGUE. */
  readonly enabled: boolean;

  constructor(
    private readonly t: SchemaTables,
    rollup: RollupConfig,
  ) {
    this.enabled = rollup.catalogue;
  }

  clearWindowSql(): string[] {
    return this.#recountSql({ rows: 'gone', keys: 'keys', update: 'uncounted', sign: '-' });
  }

  restoreWindowSql(): string[] {
    return this.#recountSql({ rows: 'back', keys: 'back_keys', update: 'recounted', sign: '+' });
  }

  /** The CTE names are fixed by the caller, never input. */
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

  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    if (await this.addWindow(db, commit.source, commit.window, commit.fields)) commit.catalogueChanged = true;
    if (commit.changes !== undefined) await this.addChanges(db, commit.source, commit.window, commit.runId, commit.changes);
  }

  async readTypes(db: Queryable, source: string): Promise<KnownFields> {
    const { rows } = await db.query<{ path: string; types: string[] }>(`select path, types from ${this.t.fields} where source = $1`, [source]);
    return new Map(rows.map((r) => [r.path, new Set(r.types)]));
  }

  /** One recorded before stays as first recorded. */
  private async addChanges(db: Queryable, source: string, window: Window, runId: number, changes: readonly FieldChange[]): Promise<void> {
    if (changes.length === 0) return;
    await db.query(
      `insert into ${this.t.fieldChanges} (source, path, type, new_field, window_start, window_end, run_id)
       select $1, path, type, new_field, $5, $6, $7 from unnest($2::text[], $3::text[], $4::boolean[]) as c(path, type, new_field)
       on conflict (source, path, type) do nothing`,
      [source, changes.map((c) => c.path), changes.map((c) => c.type), changes.map((c) => c.newField), new Date(window.start), new Date(window.end), runId],
    );
  }

  /** @returns whether the catalogue gained a field or a type. */
  private async addWindow(db: PoolClient, source: string, window: Window, fields: WindowFields): Promise<boolean> {
    if (!this.enabled || fields.size === 0) return false;
    const entries = [...fields];
    // `before` sees the catalogue as it was before this statement.
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
