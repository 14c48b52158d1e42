/**
 * `record_fields`: the catalogue of top-level payload fields per source (types seen, records
 * holding it, first and last seen, a short example). A page's fields are gathered while it waits
 * for the writer ({@link catalogueRecords}), merged per window ({@link mergeFields}) and into the
 * table at the window's commit ({@link FieldCatalogue.addWindow}); clearing a window subtracts its
 * records. FIELD_CATALOGUE=off stops maintaining it (left as it is). Nothing here assumes a field.
 */
import type { RollupConfig } from '../../config.js';
import type { PoolClient } from '../../db/pool.js';
import type { Window } from '../windows.js';
import type { DerivedTable, Queryable, SchemaTables } from './table.js';

/** Examples in the catalogue are cut to this many characters (of their JSON text). */
export const EXAMPLE_MAX_CHARS = 40;

/** Field names whose example is never kept: they suggest a secret or a credential. */
export const SECRET_FIELD_PATTERN = '(pass|secret|token|auth|cred|key|session|cookie|signature|ssn|card|iban|cvv)';

/**
 * An ISO 8601 date-time with a zone: a field whose strings all match it is typed timestamptz in
 * records_typed. A string matching it that is still no instant (February 30th) becomes null there.
 */
export const ISO_DATE_TIME_PATTERN =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])[T ]([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d+)?)?(Z|[+-]([01]\\d|2[0-3])(:?[0-5]\\d)?)$';

/** {@link ISO_DATE_TIME_PATTERN} for JavaScript. */
const ISO_DATE_TIME = new RegExp(ISO_DATE_TIME_PATTERN);
/** {@link SECRET_FIELD_PATTERN} for JavaScript, case-insensitive. */
const SECRET_FIELD = new RegExp(SECRET_FIELD_PATTERN, 'i');

/** What a window's records hold of one top-level field, merged into record_fields at commit. */
export interface FieldStats {
  /** JSON types seen (`date-time` for an ISO 8601 date-time string). */
  types: Set<string>;
  /** Records holding the field. */
  records: number;
  /** Earliest and latest event time of those records, in milliseconds (±Infinity when none had one). */
  first: number;
  last: number;
  /** Whether one of them had no event time (its window start counts then). */
  untimed: boolean;
  /** A non-null value's JSON text, cut to {@link EXAMPLE_MAX_CHARS}; null for a secret-like name. */
  example: string | null;
}

/** Field name → its stats over some records. */
export type WindowFields = Map<string, FieldStats>;

/** A source's catalogue as the contract reads it: field name (a top-level key) → the JSON types seen. */
export type KnownFields = Map<string, Set<string>>;

/** A field, or a JSON type of a field, that the catalogue did not hold. */
export interface FieldChange {
  /** The field's name (record_fields.path: a top-level key of the payload). */
  path: string;
  /** The JSON type, as record_fields names it (`string`, `date-time`, `number`, `boolean`, `object`, `array`, `null`). */
  type: string;
  /** Whether the field itself was new (else a known field got a new type). */
  newField: boolean;
}

/**
 * The JSON type of a parsed value as record_fields names it (`string`, `date-time`, `number`,
 * `boolean`, `object`, `array`, `null`); `known`, the types its field already has, spares the
 * date-time pattern when both `string` and `date-time` are among them (either answer then adds
 * nothing, so `string` is returned).
 */
export function jsonType(value: unknown, known?: ReadonlySet<string>): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  // The cheap checks first: most strings are not date-times.
  if (typeof value === 'string') {
    if (value.length < 16 || value.charCodeAt(4) !== 45) return 'string';
    if (known !== undefined && known.has('date-time') && known.has('string')) return 'string';
    return ISO_DATE_TIME.test(value) ? 'date-time' : 'string';
  }
  return typeof value === 'object' ? 'object' : typeof value; // number, boolean
}

/** A value's JSON text cut to {@link EXAMPLE_MAX_CHARS} characters (the last one an ellipsis when cut). */
function exampleOf(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > EXAMPLE_MAX_CHARS ? `${text.slice(0, EXAMPLE_MAX_CHARS - 1)}…` : text;
}

/**
 * Adds the top-level fields of the kept records of a page to `into` (work done while the page
 * waits for the writer, so the window's transaction only merges the result).
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
  for (let k = 0; k < keep.length; k++) {
    const record = records[keep[k]!];
    if (typeof record !== 'object' || record === null || Array.isArray(record)) continue;
    const seen = eventTimes[k] ?? null;
    // Object.keys rather than Object.entries: no array of pairs per record.
    const keys = Object.keys(record);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const value = (record as Record<string, unknown>)[key];
      const stats = into.get(key);
      const type = jsonType(value, stats?.types);
      if (stats === undefined) {
        into.set(key, {
          types: new Set([type]),
          records: 1,
          first: seen ?? Infinity,
          last: seen ?? -Infinity,
          untimed: seen === null,
          example: value === null || SECRET_FIELD.test(key) ? null : exampleOf(value),
        });
      } else {
        stats.types.add(type);
        stats.records++;
        if (seen === null) {
          stats.untimed = true;
        } else {
          if (seen < stats.first) stats.first = seen;
          if (seen > stats.last) stats.last = seen;
        }
        if (stats.example === null && value !== null && !SECRET_FIELD.test(key)) stats.example = exampleOf(value);
      }
    }
  }
  return into;
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
  async addChanges(db: Queryable, source: string, window: Window, runId: number, changes: readonly FieldChange[]): Promise<void> {
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
  async addWindow(db: PoolClient, source: string, window: Window, fields: WindowFields): Promise<boolean> {
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
