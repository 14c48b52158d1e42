/**
 * Tables derived from `records`, kept in the transaction of each window so that they agree with
 * it at every commit:
 *
 * - `records_hourly`: the exact count of stored records per source, hour bucket, window start and
 *   ROLLUP_DIMENSIONS values (one table and one definition for every source). Bucket = the hour (UTC) of the record's event time, or of its
 *   window's start when it has none. Keyed by the window too, so that clearing a window removes
 *   exactly its rows (by `window_start` range) whether or not its records still exist: RETENTION
 *   drops records and keeps the rollup, and an expired window reloaded by `sync --from` must
 *   replace its hours, not add them a second time. A window's rows are grouped once all its
 *   records are inserted (one insert … select … group by … per window, {@link Derived.windowRollupQuery}). A missing or JSON-null dimension value is its own group
 *   (null), matched through a unique index on `coalesce(col, '')` and `col is null`, which
 *   PostgreSQL 13 supports (no `nulls not distinct`). Readers sum `records` over `window_start`.
 * - `records_hourly_distinct`: per source, hour bucket, window start, ROLLUP_DISTINCT_BY values and
 *   ROLLUP_DISTINCT field (`value_column` names the field by its column), one row holding the
 *   field's distinct non-null values (`distinct_values`, their texts sorted by code point, no
 *   duplicates; no per-value record counts: a distinct count needs none). So the count of distinct
 *   values of `unnest(distinct_values)` over a range of hours is exact; a record without the field
 *   (or with JSON null there) adds no value, and a group without any value has no row. A window's
 *   commit replaces its rows (by `window_start`, like records_hourly) in one statement with
 *   records_hourly's insert; no unique index: the statement deletes and inserts rows of the same
 *   key, and a duplicate row could not change a distinct count anyway.
 * - `records_daily_distinct`: per source, UTC day (`day`, its midnight), ROLLUP_DISTINCT_BY values
 *   and field, the union of the day's records_hourly_distinct arrays: a distinct count over whole
 *   days reads a row per day instead of one per hour. A union cannot be taken apart again, so
 *   whatever deletes hourly rows (a window's commit replacing its rows, ROLLUP_RETENTION) then
 *   RECOMPUTES each day it touched from records_hourly_distinct in the same transaction, and a
 *   window that only added rows to a day merges their values into it ({@link Derived.updateDays},
 *   {@link Derived.recomputeDays}): each of its rows always equals the union of the hourly rows of
 *   its day, whichever windows they came from. Windows of one source commit concurrently
 *   (SYNC_CONCURRENCY): an update first takes a transaction-level advisory lock per (schema,
 *   source, day), in one order, so a second window of the same day waits for the first's commit,
 *   and its statements (READ COMMITTED: a snapshot per statement) then see the first window's rows.
 * - `record_fields`: the catalogue of top-level payload fields per source (types seen, records
 *   holding it, first and last seen, a short example), and `records_typed`, one view over every
 *   source's records with one typed column per scalar field (its type from the types every source
 *   saw), recreated when the catalogue gains a field or a field's type widens.
 *
 * ROLLUP_DIMENSIONS=off keeps neither rollup table (they are dropped) and FIELD_CATALOGUE=off stops
 * maintaining record_fields and records_typed (left as they are), for an ETL without derived work.
 *
 * The record schema is not published: nothing here assumes a field, the dimensions are configured.
 */
import { isDeepStrictEqual } from 'node:util';
import type { RollupConfig, RollupDimension } from '../config.js';
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { Tables } from './store.js';
import type { Window } from './windows.js';

/** Name under which derived_settings keeps the shape and dimensions records_hourly was built for. */
const ROLLUP_SETTING = 'rollup_dimensions';
/**
 * Version of records_hourly's columns and key, stored with the dimensions: a table built with
 * another (or none: the first shape, without `window_start`) is rebuilt like one built for other
 * dimensions.
 */
const ROLLUP_SHAPE = 3;
/** Name under which derived_settings keeps what records_hourly_distinct was built for. */
const DISTINCT_SETTING = 'rollup_distinct';
/**
 * Version of records_hourly_distinct's columns and key, stored with its fields (2: a leading
 * `source` column; 3: with records_daily_distinct beside it; 4: a row per group with its distinct
 * values as an array, both tables).
 */
const DISTINCT_SHAPE = 4;
/** Name under which derived_settings keeps the definition records_typed was created with. */
const VIEW_SETTING = 'typed_view';

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

/**
 * The JSON type of a parsed value as record_fields names it; `known`, the types its field already
 * has, spares the date-time pattern when both `string` and `date-time` are among them (either
 * answer then adds nothing, so `string` is returned).
 */
function jsonType(value: unknown, known?: ReadonlySet<string>): string {
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

const HOUR_MS = 3_600_000;

/** What {@link textAt} returns for a value whose `#>>` text the parsed record cannot give exactly. */
const NOT_EXACT = Symbol('not exact');

/**
 * `payload #>> path` of a parsed record where the parsed value gives it exactly: the string at the
 * path, or null where the path ends at JSON null, runs past a missing key or into a scalar.
 * A number (its text as written: `1.10`, an id above 2^53), a boolean, an object or an array at
 * the path, or an array on the way (whose keys are indexes), give {@link NOT_EXACT}.
 */
function textAt(record: unknown, path: readonly string[]): string | null | typeof NOT_EXACT {
  let value = record;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return null;
    if (Array.isArray(value)) return NOT_EXACT;
    if (!Object.hasOwn(value, key)) return null;
    value = (value as Record<string, unknown>)[key];
  }
  if (value === null || value === undefined) return null;
  return typeof value === 'string' ? value : NOT_EXACT;
}

/**
 * A key of {@link RollupCounts}: the event hour then the values, each one token separated by
 * U+0000, which no stored string holds (the quarantine takes those): `''` for null, `s…` for a string.
 */
function groupKey(hour: number | null, values: readonly (string | null)[]): string {
  let key = hour === null ? '' : String(hour);
  for (const v of values) key += v === null ? '\u0000' : `\u0000s${v}`;
  return key;
}

/** One rollup group and its records. */
export interface RollupGroup {
  /** The UTC hour of the records' event time, in milliseconds; null for records without one (their window's start gives the hour). */
  hour: number | null;
  values: (string | null)[];
  records: number;
}

/** One group of records_hourly_distinct and the distinct values of its field. */
export interface DistinctGroup {
  /** As {@link RollupGroup.hour}. */
  hour: number | null;
  /** The ROLLUP_DISTINCT_BY values, then the field's position in ROLLUP_DISTINCT (its decimal text). */
  values: (string | null)[];
  /** The field's distinct non-null values (their `#>>` text). */
  seen: Set<string>;
}

/**
 * A window's rollup groups counted here from the parsed records, so that PostgreSQL only inserts
 * them ({@link Derived.windowCountsQuery}), keyed by {@link groupKey}.
 */
export interface RollupCounts {
  /**
   * Whether every dimension value counted is a string, JSON null or absent, whose `#>>` text the
   * parsed value gives exactly; when false the counts are incomplete and the window's rows are
   * grouped by PostgreSQL from its records.
   */
  exact: boolean;
  /** Groups of the hour and the ROLLUP_DIMENSIONS values. */
  hourly: Map<string, RollupGroup>;
  /** Groups of the hour, the ROLLUP_DISTINCT_BY values and the field's position in ROLLUP_DISTINCT. */
  distinct: Map<string, DistinctGroup>;
}

/**
 * Adds `from` into `into` (a window's counts from its pages). `from` is consumed: `into` takes
 * over its distinct groups' sets rather than copying them.
 */
export function mergeRollupCounts(into: RollupCounts, from: RollupCounts): void {
  into.exact &&= from.exact;
  if (!into.exact) return;
  for (const [key, g] of from.hourly) {
    const seen = into.hourly.get(key);
    if (seen === undefined) into.hourly.set(key, { ...g });
    else seen.records += g.records;
  }
  for (const [key, g] of from.distinct) {
    const target = into.distinct.get(key);
    if (target === undefined) into.distinct.set(key, g);
    else for (const v of g.seen) target.seen.add(v);
  }
}

/**
 * Maps nested by the hour, then by each value in order (null a key of its own), down to a leaf: a
 * page's groups found without building a {@link groupKey} per record (the values are the parsed
 * record's own strings, so a lookup allocates nothing; the key is built once per new group).
 */
type GroupTree = Map<number | string | null, unknown>;

/** The leaf of `hour` and `values` in `tree`, undefined when there is none yet. */
function findLeaf(tree: GroupTree, hour: number | null, values: readonly (string | null)[]): unknown {
  let node = tree.get(hour);
  for (let i = 0; i < values.length && node !== undefined; i++) node = (node as GroupTree).get(values[i]!);
  return node;
}

/** Sets the leaf of `hour` and `values` in `tree`, creating the maps on the way. */
function setLeaf(tree: GroupTree, hour: number | null, values: readonly (string | null)[], leaf: unknown): void {
  let map = tree;
  let key: number | string | null = hour;
  for (let i = 0; i < values.length; i++) {
    let next = map.get(key) as GroupTree | undefined;
    if (next === undefined) map.set(key, (next = new Map()));
    map = next;
    key = values[i]!;
  }
  map.set(key, leaf);
}

/** Adds one record to the group of `hour` and `values` (copied when the group is new), found through `tree`. */
function countGroup(groups: Map<string, RollupGroup>, tree: GroupTree, hour: number | null, values: readonly (string | null)[]): void {
  const seen = findLeaf(tree, hour, values) as RollupGroup | undefined;
  if (seen !== undefined) {
    seen.records++;
    return;
  }
  const group = { hour, values: [...values], records: 1 };
  groups.set(groupKey(hour, values), group);
  setLeaf(tree, hour, values, group);
}

/**
 * Orders strings by code point, as PostgreSQL's `collate "C"` orders their UTF-8 bytes (a plain
 * `<` compares UTF-16 code units, which puts U+10000 and above before U+E000–U+FFFF).
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800–DFFF) encode code points above FFFF: they sort after E000–FFFF.
    const rank = (c: number): number => (c >= 0xd800 && c <= 0xdfff ? c + 0x2000 : c >= 0xe000 ? c - 0x800 : c);
    return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** Code units from which UTF-16 order and code point order may differ (surrogates, then U+E000–U+FFFF). */
const NOT_BMP_ORDERED = /[\uD800-\uFFFF]/;

/**
 * Sorts `values` in place by code point ({@link compareCodePoints}): by the engine's own string
 * order (UTF-16 code units, the same order when no value holds a code unit from U+D800 up),
 * else by {@link compareCodePoints}.
 */
function sortCodePoints(values: string[]): string[] {
  for (const v of values) if (NOT_BMP_ORDERED.test(v)) return values.sort(compareCodePoints);
  return values.sort();
}

/**
 * The groups as JSON rows for `json_to_recordset`: `{"b": hour in ms, "v0": …, "n": records}`, a
 * group without an hour given `untimedHour` and merged with the timed group it then equals.
 */
function groupRows(groups: ReadonlyMap<string, RollupGroup>, untimedHour: number): string {
  const untimed = new Map<string, RollupGroup>();
  for (const g of groups.values()) {
    if (g.hour !== null) continue;
    const key = groupKey(untimedHour, g.values);
    const seen = untimed.get(key);
    if (seen === undefined) untimed.set(key, { hour: untimedHour, values: g.values, records: g.records });
    else seen.records += g.records;
  }
  const rows: Record<string, unknown>[] = [];
  const row = (hour: number, values: readonly (string | null)[], records: number): void => {
    const r: Record<string, unknown> = { b: hour, n: records };
    for (let i = 0; i < values.length; i++) r[`v${i}`] = values[i];
    rows.push(r);
  };
  for (const [key, g] of groups) {
    if (g.hour === null) continue;
    const extra = untimed.get(key);
    if (extra !== undefined) untimed.delete(key);
    row(g.hour, g.values, g.records + (extra?.records ?? 0));
  }
  for (const g of untimed.values()) row(untimedHour, g.values, g.records);
  return JSON.stringify(rows);
}

/**
 * The distinct groups as JSON rows for `json_to_recordset`: `{"b": hour in ms, "v0": …, "a": [values
 * sorted by code point]}`, a group without an hour given `untimedHour` and merged with the timed
 * group it then equals.
 */
function distinctRows(groups: ReadonlyMap<string, DistinctGroup>, untimedHour: number): string {
  return unionRows(groups, (g) => g.hour ?? untimedHour);
}

const DAY_MS = 86_400_000;

/**
 * The distinct groups' values per UTC day (the `day` of records_daily_distinct), as JSON rows like
 * {@link distinctRows}'s with `b` the day's midnight in milliseconds: what a window adds to each
 * day's records_daily_distinct rows.
 */
function dailyRows(groups: ReadonlyMap<string, DistinctGroup>, untimedHour: number): string {
  return unionRows(groups, (g) => Math.floor((g.hour ?? untimedHour) / DAY_MS) * DAY_MS);
}

/** The groups merged by `bucketOf` and their values, as {@link distinctRows} describes; `groups` stays as it was. */
function unionRows(groups: ReadonlyMap<string, DistinctGroup>, bucketOf: (g: DistinctGroup) => number): string {
  const merged = new Map<string, DistinctGroup>();
  // Merged groups whose set is still one of `groups`' (copied before it takes other values).
  const borrowed = new Set<DistinctGroup>();
  for (const g of groups.values()) {
    const hour = bucketOf(g);
    const key = groupKey(hour, g.values);
    const seen = merged.get(key);
    if (seen === undefined) {
      const group = { hour, values: g.values, seen: g.seen };
      merged.set(key, group);
      borrowed.add(group);
      continue;
    }
    if (borrowed.delete(seen)) seen.seen = new Set(seen.seen);
    for (const v of g.seen) seen.seen.add(v);
  }
  const rows: Record<string, unknown>[] = [];
  for (const g of merged.values()) {
    const r: Record<string, unknown> = { b: g.hour };
    for (let i = 0; i < g.values.length; i++) r[`v${i}`] = g.values[i];
    r.a = sortCodePoints([...g.seen]);
    rows.push(r);
  }
  return JSON.stringify(rows);
}

/** The bucket of a stored row (its columns unqualified): the UTC hour of its event time, else of its window start. */
const BUCKET_SQL = `date_trunc('hour', coalesce(event_time, window_start), 'UTC')`;

/** The columns records_typed takes from `records` itself; a field column never takes these names. */
const VIEW_BASE_COLUMNS = ['id', 'source', 'event_time', 'window_start', 'window_end', 'run_id', 'loaded_at'] as const;

/** A catalogue row as {@link readFields} returns it. */
export interface FieldRow {
  /** The source whose records hold the field. */
  source: string;
  /** The field's name (a top-level key of the payload). */
  path: string;
  /** Its column in records_typed (null until the field is first catalogued). */
  column: string | null;
  /** JSON types seen, sorted (`date-time` for an ISO 8601 date-time string). */
  types: string[];
  /** The column's type in records_typed; null when the field has no column (only objects or arrays seen). */
  viewType: 'text' | 'numeric' | 'boolean' | 'timestamptz' | null;
  records: number;
  firstSeen: Date;
  lastSeen: Date;
  example: string | null;
}

/**
 * SQL of the derived tables of one schema for one ROLLUP_DIMENSIONS. Every statement runs inside
 * the caller's transaction and takes the dimension paths as parameters.
 */
export class Derived {
  private readonly enabled: boolean;
  private readonly catalogue: boolean;
  private readonly dims: readonly RollupDimension[];
  private readonly cols: string[];
  private readonly distinct: readonly RollupDimension[];
  private readonly by: readonly RollupDimension[];
  private readonly byCols: string[];

  constructor(
    private readonly t: Tables,
    rollup: RollupConfig,
  ) {
    this.enabled = rollup.enabled;
    this.catalogue = rollup.catalogue;
    this.dims = rollup.dimensions;
    this.cols = rollup.dimensions.map((d) => quoteIdent(d.column));
    this.distinct = rollup.enabled ? rollup.distinct : [];
    this.by = rollup.distinctBy;
    this.byCols = rollup.distinctBy.map((d) => quoteIdent(d.column));
  }

  /** records_daily_distinct of this schema, qualified. */
  private get daily(): string {
    return `${quoteIdent(this.t.schema)}.records_daily_distinct`;
  }

  /** Whether records_hourly_distinct is kept (rollups on and ROLLUP_DISTINCT not `none`). */
  private get hasDistinct(): boolean {
    return this.distinct.length > 0;
  }

  /** `payload #>> $n::text[]` of each dimension, its parameters numbered from `first`. */
  private dimensionValues(first: number): string[] {
    return this.dims.map((_, i) => `payload #>> $${first + i}::text[]`);
  }

  private get paths(): string[][] {
    return this.dims.map((d) => d.path);
  }

  /**
   * The key expressions of records_hourly's unique index: the source and the window start first, so
   * that clearing a source's window (a `window_start` range) reads the index rather than the whole table.
   */
  private keyExpressions(): string[] {
    return ['source', 'window_start', 'bucket', ...this.cols.flatMap((c) => [`(coalesce(${c}, ''))`, `((${c} is null))`])];
  }

  /** The key expressions of records_daily_distinct's unique index: the source, the day, the ROLLUP_DISTINCT_BY columns (null-matched like records_hourly's) and the field. */
  private dailyKeyExpressions(): string[] {
    return ['source', 'day', ...this.byCols.flatMap((c) => [`(coalesce(${c}, ''))`, `((${c} is null))`]), 'value_column'];
  }

  /** `array_agg` of the distinct texts of `value`, sorted by code point (PostgreSQL's `collate "C"`, as {@link compareCodePoints}). */
  private static valuesAgg(value: string): string {
    return `array_agg(distinct ${value} collate "C" order by ${value} collate "C")`;
  }

  /**
   * `insert into records_daily_distinct … select …`: the union of the records_hourly_distinct rows
   * of each day of `days`, a relation (`days` aliased `d`, with the columns `source` and `day`);
   * all days of every source when undefined (a rebuild).
   */
  private fillDaysSql(days: string | undefined): string {
    const cols = this.byCols.map((c) => `, h.${c}`).join('');
    const from =
      days === undefined
        ? `${this.t.hourlyDistinct} as h`
        : `${days} join ${this.t.hourlyDistinct} as h on h.source = d.source and h.bucket >= d.day and h.bucket < d.day + interval '24 hours'`;
    return `insert into ${this.daily} (source, day${this.byCols.map((c) => `, ${c}`).join('')}, value_column, distinct_values)
      select h.source, date_trunc('day', h.bucket, 'UTC')${cols}, h.value_column, ${Derived.valuesAgg('v.value')}
        from ${from} cross join lateral unnest(h.distinct_values) as v(value)
       group by h.source, date_trunc('day', h.bucket, 'UTC')${cols}, h.value_column`;
  }

  /**
   * `insert into records_hourly_distinct … select …, array_agg(distinct value) from <source>, (each
   * distinct field's column and value) group by …`, returning each row's bucket unless `returning`
   * is false. Its parameters from `firstParam`: the ROLLUP_DISTINCT_BY paths, then per distinct
   * field its column name and path ({@link distinctParams}).
   */
  private addDistinctSql(source: string, firstParam: number, returning = true): string {
    const by = this.by.map((_, i) => `, payload #>> $${firstParam + i}::text[]`).join('');
    const base = firstParam + this.by.length;
    const fields = this.distinct.map((_, j) => `($${base + 2 * j}::text, payload #>> $${base + 2 * j + 1}::text[])`).join(', ');
    const groups = this.byCols.map((_, i) => `, ${i + 4}`).join('');
    const n = this.byCols.length;
    return `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${this.byCols.map((c) => `, ${c}`).join('')}, value_column, distinct_values)
      select source, ${BUCKET_SQL}, window_start${by}, f.col, ${Derived.valuesAgg('f.value')}
        from ${source} cross join lateral (values ${fields}) as f(col, value)
       where f.value is not null
       group by 1, 2, 3${groups}, ${n + 4}
      ${returning ? 'returning bucket' : ''}`;
  }

  /** `insert into records_hourly … select …, count(*) from <rows> group by source, bucket, window_start, dimensions … on conflict add`. */
  private addGroupsSql(rows: string, where: string, firstParam: number, add = true): string {
    const groups = this.cols.map((_, i) => `, ${i + 4}`).join('');
    const values = this.dimensionValues(firstParam)
      .map((v) => `, ${v}`)
      .join('');
    return `insert into ${this.t.hourly} as h (source, bucket, window_start${this.cols.map((c) => `, ${c}`).join('')}, records)
      select source, ${BUCKET_SQL}, window_start${values}, count(*) from ${rows} ${where} group by 1, 2, 3${groups}
      ${add ? `on conflict (${this.keyExpressions().join(', ')}) do update set records = h.records + excluded.records` : ''}`;
  }

  /**
   * Deletes `source`'s stored records of the windows inside `window`, their records_hourly rows (by
   * `window_start`, so also those of windows whose records RETENTION dropped), and subtracts the
   * records from the source's record_fields counts, in one statement. (Their records_hourly_distinct
   * rows are replaced at the window's end: {@link windowCountsQuery}.)
   *
   * @returns the number of records deleted.
   */
  async deleteWindowRecords(db: PoolClient, source: string, window: Window): Promise<number> {
    const parts = [`gone as (delete from ${this.t.records} where source = $3 and window_start >= $1 and window_start < $2 returning payload)`];
    if (this.enabled) parts.push(`cleared as (delete from ${this.t.hourly} where source = $3 and window_start >= $1 and window_start < $2)`);
    if (this.catalogue)
      parts.push(
        `keys as (
           select k as path, count(*) as n
             from gone, jsonb_object_keys(case when jsonb_typeof(payload) = 'object' then payload else '{}' end) as k group by k
         )`,
        `uncounted as (update ${this.t.fields} f set records = f.records - keys.n, updated_at = now() from keys where f.source = $3 and f.path = keys.path)`,
      );
    const { rows } = await db.query<{ deleted: string }>(
      `with ${parts.join(',\n')}
       select count(*) as deleted from gone`,
      [new Date(window.start), new Date(window.end), source],
    );
    return Number(rows[0]!.deleted);
  }

  /**
   * Wraps `hourly` (the insert into records_hourly) and `distinct` (an insert into
   * records_hourly_distinct returning its rows' buckets) into one statement that first deletes the
   * source's records_hourly_distinct rows of the windows inside [$2, $`endParam`) and returns the UTC
   * days (`day`) of the rows it deleted or inserted, ascending, each with whether rows of it were
   * deleted (`cleared`): the days {@link updateDays} must update. The delete and the insert share a
   * snapshot, so the insert's rows are never deleted.
   */
  private replaceDistinctSql(hourly: string, distinct: string, endParam: number): string {
    return `with cleared as (delete from ${this.t.hourlyDistinct} where source = $1 and window_start >= $2 and window_start < $${endParam} returning bucket),
      hourly as (${hourly}),
      added as (${distinct})
      select date_trunc('day', bucket, 'UTC') as day, bool_or(cleared) as cleared
        from (select bucket, true as cleared from cleared union all select bucket, false from added) as b group by 1 order by 1`;
  }

  /**
   * The statement replacing `source`'s rows of records_hourly_distinct of the windows inside
   * `window`, and adding the records of `window` (those whose `window_start` is the window's
   * start: what one window's load inserts) to records_hourly and records_hourly_distinct,
   * grouped by PostgreSQL once per window rather than once per page: run after the window's
   * records are all inserted, in the same transaction, after {@link deleteWindowRecords} cleared the
   * window's records_hourly rows, so the rollups again equal the same grouping over records when it
   * commits. With distinct fields it returns the days whose records_daily_distinct rows must be
   * recomputed (`day`; see {@link addWindowRollup}).
   *
   * @returns the statement and its parameters (the source, the window's start, the dimension paths,
   *   then with distinct fields {@link distinctParams} and the window's end), or undefined when
   *   ROLLUP_DIMENSIONS is off.
   */
  windowRollupQuery(source: string, window: Window): { text: string; values: unknown[] } | undefined {
    if (!this.enabled) return undefined;
    const rows = `(select * from ${this.t.records} where source = $1 and window_start = $2) as r`;
    // Plain inserts: the window's rows were deleted first and are keyed by its start, so none can
    // conflict (one would fail the window rather than double its counts); `on conflict` checks cost.
    const hourly = this.addGroupsSql(rows, '', 3, false);
    if (!this.hasDistinct) return { text: hourly, values: [source, new Date(window.start), ...this.paths] };
    const params = [...this.paths, ...this.distinctParams()];
    const text = this.replaceDistinctSql(hourly, this.addDistinctSql(rows, 3 + this.dims.length), 3 + params.length);
    return { text, values: [source, new Date(window.start), ...params, new Date(window.end)] };
  }

  /**
   * Counts the kept records of a page into rollup groups ({@link RollupCounts}), work done while
   * the page waits for the writer. Stops counting (`exact` false) at the first value whose text
   * the parsed record cannot give exactly.
   *
   * @param records the page's parsed records (E6 `data`).
   * @param keep positions of the records stored, ascending.
   * @param eventTimes per kept record, its event time in milliseconds or null.
   * @returns undefined when ROLLUP_DIMENSIONS is off.
   */
  countRollup(records: readonly unknown[], keep: readonly number[], eventTimes: readonly (number | null)[]): RollupCounts | undefined {
    if (!this.enabled) return undefined;
    const counts: RollupCounts = { exact: true, hourly: new Map(), distinct: new Map() };
    const inexact = (): RollupCounts => ({ exact: false, hourly: new Map(), distinct: new Map() });
    const dims: (string | null)[] = new Array<string | null>(this.dims.length);
    const by: (string | null)[] = new Array<string | null>(this.by.length);
    const hourlyTree: GroupTree = new Map();
    // Leaves: per ROLLUP_DISTINCT field (by position), its group once the record's values gave one.
    const distinctTree: GroupTree = new Map();
    for (let k = 0; k < keep.length; k++) {
      const record = records[keep[k]!];
      const ms = eventTimes[k] ?? null;
      // The stored event_time keeps whole milliseconds (toward zero), and date_trunc floors it.
      const hour = ms === null ? null : Math.floor(Math.trunc(ms) / HOUR_MS) * HOUR_MS;
      for (let i = 0; i < this.dims.length; i++) {
        const v = textAt(record, this.dims[i]!.path);
        if (v === NOT_EXACT) return inexact();
        dims[i] = v;
      }
      countGroup(counts.hourly, hourlyTree, hour, dims);
      if (!this.hasDistinct) continue;
      for (let i = 0; i < this.by.length; i++) {
        const v = textAt(record, this.by[i]!.path);
        if (v === NOT_EXACT) return inexact();
        by[i] = v;
      }
      let fields: (DistinctGroup | undefined)[] | undefined;
      for (let j = 0; j < this.distinct.length; j++) {
        const v = textAt(record, this.distinct[j]!.path);
        if (v === NOT_EXACT) return inexact();
        if (v === null) continue;
        if (fields === undefined) {
          fields = findLeaf(distinctTree, hour, by) as (DistinctGroup | undefined)[] | undefined;
          if (fields === undefined) setLeaf(distinctTree, hour, by, (fields = new Array<DistinctGroup | undefined>(this.distinct.length)));
        }
        const group = fields[j];
        if (group !== undefined) {
          group.seen.add(v);
          continue;
        }
        const values = [...by, String(j)];
        const created = { hour, values, seen: new Set([v]) };
        counts.distinct.set(groupKey(hour, values), created);
        fields[j] = created;
      }
    }
    return counts;
  }

  /**
   * The statement adding a window's rows to records_hourly and replacing them in
   * records_hourly_distinct, in the window's transaction after its records are inserted: from
   * `counts` when they are exact (the groups counted here, as JSON), else grouped by PostgreSQL
   * from the window's records ({@link windowRollupQuery}, whose parameters and result it shares).
   *
   * @returns undefined when ROLLUP_DIMENSIONS is off.
   */
  windowCountsQuery(source: string, window: Window, counts: RollupCounts | undefined): { text: string; values: unknown[] } | undefined {
    if (!this.enabled) return undefined;
    if (counts === undefined || !counts.exact) return this.windowRollupQuery(source, window);
    const untimedHour = Math.floor(window.start / HOUR_MS) * HOUR_MS;
    const columns = (n: number): string => Array.from({ length: n }, (_, i) => `, v${i} text`).join('');
    const pick = (n: number): string => Array.from({ length: n }, (_, i) => `, u.v${i}`).join('');
    const hourlyText = `insert into ${this.t.hourly} (source, bucket, window_start${this.cols.map((c) => `, ${c}`).join('')}, records)
      select $1, to_timestamp(u.b / 1000), $2${pick(this.dims.length)}, u.n
        from json_to_recordset($3::json) as u(b bigint${columns(this.dims.length)}, n bigint)`;
    const values: unknown[] = [source, new Date(window.start), groupRows(counts.hourly, untimedHour)];
    if (!this.hasDistinct) return { text: hourlyText, values };
    // v<by> is the field's position in ROLLUP_DISTINCT, `a` its values.
    const n = this.by.length;
    const distinctText = `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${this.byCols.map((c) => `, ${c}`).join('')}, value_column, distinct_values)
      select $1, to_timestamp(u.b / 1000), $2${pick(n)}, ($5::text[])[u.v${n}::int + 1], u.a
        from json_to_recordset($4::json) as u(b bigint${columns(n + 1)}, a text[])
      returning bucket`;
    values.push(
      distinctRows(counts.distinct, untimedHour),
      this.distinct.map((d) => d.column),
      new Date(window.end),
    );
    return { text: this.replaceDistinctSql(hourlyText, distinctText, 6), values };
  }

  /** The ROLLUP_DISTINCT_BY paths, then each distinct field's column name and path, in order (none without distinct fields). */
  private distinctParams(): (string | string[])[] {
    return this.hasDistinct ? [...this.by.map((d) => d.path), ...this.distinct.flatMap((d) => [d.column, d.path])] : [];
  }

  /**
   * At the commit of `source`'s `window`, once its records are all inserted: runs
   * {@link windowCountsQuery} (records_hourly's rows added, records_hourly_distinct's replaced) and
   * updates records_daily_distinct for the days whose hourly rows that changed ({@link updateDays}).
   * In the window's transaction.
   *
   * @param counts the window's groups counted from its pages ({@link countRollup}, merged).
   */
  async addWindowRollup(db: PoolClient, source: string, window: Window, counts: RollupCounts | undefined): Promise<void> {
    const query = this.windowCountsQuery(source, window, counts);
    if (query === undefined) return;
    const { rows } = await db.query<{ day: Date; cleared: boolean }>(query.text, query.values);
    if (!this.hasDistinct) return;
    const added = counts?.exact === true ? dailyRows(counts.distinct, Math.floor(window.start / HOUR_MS) * HOUR_MS) : undefined;
    await this.updateDays(db, source, window, rows, added);
  }

  /**
   * Brings records_daily_distinct's rows of `source`'s `days` up to date with the hourly rows
   * {@link windowCountsQuery} just replaced for `window`, in the caller's transaction, under the
   * days' locks ({@link lockDays}). A day the window deleted hourly rows of is recomputed from all
   * its hourly rows (a value may have gone); a day it only added rows to gets their values merged
   * into its rows, the same union for the cost of the window's rows instead of the whole day's
   * (loading a day in 1-hour windows would otherwise re-read the day's hours 24 times).
   *
   * @param days as {@link windowCountsQuery}'s statement returns them.
   * @param added the window's values per day ({@link dailyRows} of its exact counts): merged as
   *   they are, without reading its hourly rows back; undefined to read them.
   */
  async updateDays(db: PoolClient, source: string, window: Window, days: readonly { day: Date; cleared: boolean }[], added?: string): Promise<void> {
    if (days.length === 0) return;
    await this.lockDays(
      db,
      days.map((d) => ({ source, day: d.day.getTime() })),
    );
    const recomputed = days.filter((d) => d.cleared).map((d) => d.day);
    if (recomputed.length > 0)
      await this.fillDays(
        db,
        recomputed.map(() => source),
        recomputed,
      );
    const merged = days.filter((d) => !d.cleared).map((d) => d.day);
    if (merged.length === 0) return;
    const conflict = `on conflict (${this.dailyKeyExpressions().join(', ')}) do update
         set distinct_values = (select ${Derived.valuesAgg('u')} from unnest(x.distinct_values || excluded.distinct_values) as u)`;
    if (added !== undefined) {
      // v<by> is the field's position in ROLLUP_DISTINCT, `a` its values sorted (distinctRows).
      const n = this.by.length;
      const columns = Array.from({ length: n + 1 }, (_, i) => `, v${i} text`).join('');
      const pick = Array.from({ length: n }, (_, i) => `, r.v${i}`).join('');
      await db.query(
        `insert into ${this.daily} as x (source, day${this.byCols.map((c) => `, ${c}`).join('')}, value_column, distinct_values)
         select $1, to_timestamp(r.b / 1000)${pick}, ($3::text[])[r.v${n}::int + 1], r.a
           from json_to_recordset($2::json) as r(b bigint${columns}, a text[])
          where to_timestamp(r.b / 1000) = any($4::timestamptz[])
         ${conflict}`,
        [source, added, this.distinct.map((d) => d.column), merged],
      );
      return;
    }
    const cols = this.byCols.map((c) => `, h.${c}`).join('');
    await db.query(
      `insert into ${this.daily} as x (source, day${this.byCols.map((c) => `, ${c}`).join('')}, value_column, distinct_values)
       select h.source, d.day${cols}, h.value_column, ${Derived.valuesAgg('v.value')}
         from unnest($4::timestamptz[]) as d(day)
         join ${this.t.hourlyDistinct} as h
           on h.source = $1 and h.window_start >= $2 and h.window_start < $3 and h.bucket >= d.day and h.bucket < d.day + interval '24 hours'
         cross join lateral unnest(h.distinct_values) as v(value)
        group by h.source, d.day${cols}, h.value_column
       ${conflict}`,
      [source, new Date(window.start), new Date(window.end), merged],
    );
  }

  /**
   * Takes a transaction-level advisory lock per (schema, source, day) of `days`, in the ascending
   * order of their keys, so that two transactions updating a day take turns without ever
   * deadlocking; in READ COMMITTED a statement that starts once the locks are held sees every
   * hourly and daily row committed before, the other transaction's included.
   */
  private async lockDays(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    // Output expressions not named by ORDER BY are evaluated after the sort (SELECT's reference
    // page): the locks are taken in the order of their keys.
    await db.query(`select pg_advisory_xact_lock($1, k) from (select distinct hashtext(n) as k from unnest($2::text[]) as n) as keys order by k`, [
      ADVISORY_LOCK_NAMESPACE,
      days.map((d) => `distinct_day:${this.t.schema}:${d.source}:${new Date(d.day).toISOString().slice(0, 10)}`),
    ]);
  }

  /** Sets records_daily_distinct's rows of each (`sources[i]`, `days[i]`) to the union of its hourly rows (the caller holds the days' locks). */
  private async fillDays(db: PoolClient, sources: readonly string[], days: readonly Date[]): Promise<void> {
    const pairs = 'unnest($1::text[], $2::timestamptz[]) as d(source, day)';
    await db.query(`delete from ${this.daily} as x using ${pairs} where x.source = d.source and x.day = d.day`, [sources, days]);
    await db.query(this.fillDaysSql(pairs), [sources, days]);
  }

  /**
   * Sets records_daily_distinct's rows of each (source, UTC day) in `days` to the union of that
   * day's records_hourly_distinct rows (deleting them when it has none), in the caller's
   * transaction, under the days' locks ({@link lockDays}).
   *
   * @param days `day` a UTC midnight in milliseconds.
   */
  async recomputeDays(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    if (days.length === 0) return;
    await this.lockDays(db, days);
    await this.fillDays(
      db,
      days.map((d) => d.source),
      days.map((d) => new Date(d.day)),
    );
  }

  /**
   * At the commit of `source`'s `window`: merges `fields` (the top-level fields of the records
   * just inserted, see {@link catalogueRecords}) into the source's catalogue, and recreates
   * records_typed when the catalogue gained a field or a type.
   */
  async addWindowRecords(db: PoolClient, source: string, window: Window, fields: WindowFields, log: Logger): Promise<void> {
    if (!this.catalogue || fields.size === 0) return;
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
    if (Number(rows[0]!.changed) > 0) await this.refreshTypedView(db, log);
  }

  /**
   * Names the catalogue's new fields' columns and recreates records_typed when its definition
   * changed. Objects depending on the view (a user's view over it) block the recreation: the
   * window still commits, the view stays as it was, and a warning says so.
   */
  async refreshTypedView(db: PoolClient, log: Logger): Promise<void> {
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
      await db.query(`drop view if exists ${this.t.typedView}`);
      await db.query(definition);
      await db.query(
        `insert into ${this.t.derivedSettings} (name, value) values ($1, to_jsonb($2::text))
           on conflict (name) do update set value = excluded.value, updated_at = now()`,
        [VIEW_SETTING, definition],
      );
      await db.query('release savepoint typed_view');
    } catch (err) {
      await db.query('rollback to savepoint typed_view');
      log.warn({ err }, 'records_typed could not be recreated for the new fields (does an object depend on it?); it stays as it was');
    }
  }

  /**
   * Recreates records_typed when it exists and its definition is not the one this release writes
   * (a release adding a base column such as `source`), without waiting for a new field.
   */
  async ensureTypedViewCurrent(db: PoolClient, log: Logger): Promise<void> {
    if (await relationExists(db, this.t.typedView)) await this.refreshTypedView(db, log);
  }

  /**
   * Rebuilds records_hourly when it was built for other dimensions than these, or with another
   * shape ({@link ROLLUP_SHAPE}), or not yet: drops it, creates it with these dimension columns
   * and fills it from `records`.
   * The caller holds the schema's sync lock.
   *
   * @returns whether it rebuilt.
   */
  async ensureRollup(db: PoolClient, log: Logger): Promise<boolean> {
    let changed = false;
    if (!(await this.isHourlyCurrent(db))) {
      await this.rebuildHourly(db);
      log.info(this.setting(), this.enabled ? 'rebuilt records_hourly from records for ROLLUP_DIMENSIONS' : 'dropped records_hourly: ROLLUP_DIMENSIONS is off');
      changed = true;
    }
    if (!(await this.isDistinctCurrent(db))) {
      const convert = this.hasDistinct && (await this.isDistinctPerValue(db));
      await this.rebuildDistinct(db, convert);
      log.info(
        this.distinctSetting(),
        !this.hasDistinct
          ? 'dropped records_hourly_distinct and records_daily_distinct: no ROLLUP_DISTINCT'
          : convert
            ? 'converted records_hourly_distinct and records_daily_distinct to a row per group with its values as an array'
            : 'rebuilt records_hourly_distinct and records_daily_distinct from records for ROLLUP_DISTINCT',
      );
      changed = true;
    }
    return changed;
  }

  /**
   * Whether records_hourly and records_hourly_distinct are as these settings want them: built
   * with this shape for these dimensions and fields, or absent when off.
   */
  async isRollupCurrent(db: Pick<PoolClient, 'query'>): Promise<boolean> {
    return (await this.isHourlyCurrent(db)) && (await this.isDistinctCurrent(db));
  }

  private async isHourlyCurrent(db: Pick<PoolClient, 'query'>): Promise<boolean> {
    if (!this.enabled) return !(await relationExists(db, this.t.hourly));
    return (await settingIs(db, this.t, ROLLUP_SETTING, this.setting())) && (await relationExists(db, this.t.hourly));
  }

  private async isDistinctCurrent(db: Pick<PoolClient, 'query'>): Promise<boolean> {
    if (!this.hasDistinct) return !(await relationExists(db, this.t.hourlyDistinct)) && !(await relationExists(db, this.daily));
    return (
      (await settingIs(db, this.t, DISTINCT_SETTING, this.distinctSetting())) &&
      (await relationExists(db, this.t.hourlyDistinct)) &&
      (await relationExists(db, this.daily))
    );
  }

  /**
   * Drops and recreates records_hourly and records_hourly_distinct for these settings, filled from
   * `records` (or only drops them: ROLLUP_DIMENSIONS=off, ROLLUP_DISTINCT=none); in the caller's transaction.
   */
  async rebuildRollup(db: PoolClient): Promise<void> {
    await this.rebuildHourly(db);
    await this.rebuildDistinct(db);
  }

  /**
   * Drops records_hourly_distinct and records_daily_distinct and, unless there is no distinct
   * field, recreates them, the first filled from `records` (or with `convert`, from its own rows
   * of a value each, grouped: see {@link isDistinctPerValue}), the second from the first.
   */
  private async rebuildDistinct(db: PoolClient, convert = false): Promise<void> {
    const perValue = `${quoteIdent(this.t.schema)}.records_hourly_distinct_per_value`;
    if (convert) await db.query(`alter table ${this.t.hourlyDistinct} rename to records_hourly_distinct_per_value`);
    await db.query(`drop table if exists ${this.t.hourlyDistinct}`);
    await db.query(`drop table if exists ${this.daily}`);
    await db.query(`delete from ${this.t.derivedSettings} where name = $1`, [DISTINCT_SETTING]);
    if (!this.hasDistinct) return;
    const byColumns = this.byCols.map((c) => `, ${c} text`).join('');
    await db.query(
      `create table ${this.t.hourlyDistinct} (source text not null, bucket timestamptz not null, window_start timestamptz not null${byColumns}, value_column text not null, distinct_values text[] not null check (cardinality(distinct_values) > 0))`,
    );
    // A window's commit replaces its rows by window start; the Users panel, a day's recompute and
    // ROLLUP_RETENTION select by bucket.
    await db.query(`create index on ${this.t.hourlyDistinct} (source, window_start)`);
    await db.query(`create index on ${this.t.hourlyDistinct} (source, bucket)`);
    if (convert) {
      const cols = this.byCols.map((c) => `, ${c}`).join('');
      await db.query(
        `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${cols}, value_column, distinct_values)
         select source, bucket, window_start${cols}, value_column, ${Derived.valuesAgg('value')}
           from ${perValue} group by source, bucket, window_start${cols}, value_column`,
      );
      await db.query(`drop table ${perValue}`);
    } else {
      await db.query(this.addDistinctSql(this.t.records, 1, false), this.distinctParams());
    }
    await db.query(
      `create table ${this.daily} (source text not null, day timestamptz not null${byColumns}, value_column text not null, distinct_values text[] not null)`,
    );
    // The Users panel selects by source and day range; unique: a day recomputed twice at once would fail rather than count twice.
    await db.query(`create unique index on ${this.daily} (${this.dailyKeyExpressions().join(', ')})`);
    await db.query(this.fillDaysSql(undefined));
    await db.query(
      `insert into ${this.t.derivedSettings} (name, value) values ($1, $2::jsonb)
         on conflict (name) do update set value = excluded.value, updated_at = now()`,
      [DISTINCT_SETTING, JSON.stringify(this.distinctSetting())],
    );
  }

  /**
   * Whether records_hourly_distinct holds a row per value (shape 3: `value` and `records` columns)
   * built for these fields and grouping: it is then converted, not rebuilt from `records`, so the
   * hours whose records RETENTION dropped are kept.
   */
  private async isDistinctPerValue(db: Pick<PoolClient, 'query'>): Promise<boolean> {
    return (await settingIs(db, this.t, DISTINCT_SETTING, { ...this.distinctSetting(), shape: 3 })) && (await relationExists(db, this.t.hourlyDistinct));
  }

  /** Drops records_hourly and, unless ROLLUP_DIMENSIONS is off, recreates and fills it from `records`. */
  private async rebuildHourly(db: PoolClient): Promise<void> {
    await db.query(`drop table if exists ${this.t.hourly}`);
    if (!this.enabled) {
      await db.query(`delete from ${this.t.derivedSettings} where name = $1`, [ROLLUP_SETTING]);
      return;
    }
    await db.query(
      `create table ${this.t.hourly} (source text not null, bucket timestamptz not null, window_start timestamptz not null${this.cols.map((c) => `, ${c} text`).join('')}, records bigint not null check (records > 0))`,
    );
    await db.query(`create unique index on ${this.t.hourly} (${this.keyExpressions().join(', ')})`);
    // Readers and ROLLUP_RETENTION select by bucket; the unique index leads with the window start.
    await db.query(`create index on ${this.t.hourly} (bucket)`);
    await db.query(this.addGroupsSql(this.t.records, '', 1), this.paths);
    await db.query(
      `insert into ${this.t.derivedSettings} (name, value) values ($1, $2::jsonb)
         on conflict (name) do update set value = excluded.value, updated_at = now()`,
      [ROLLUP_SETTING, JSON.stringify(this.setting())],
    );
  }

  /**
   * Deletes records_hourly and records_hourly_distinct buckets that start before `before`
   * (ROLLUP_RETENTION), every source's, and recomputes records_daily_distinct's rows of the days
   * they were in ({@link recomputeDays}), in the caller's transaction (which holds the days' locks
   * until it ends).
   *
   * @returns the number of rows deleted.
   */
  async pruneRollup(db: PoolClient, before: number): Promise<number> {
    if (!this.enabled) return 0;
    const { rowCount } = await db.query(`delete from ${this.t.hourly} where bucket < $1`, [new Date(before)]);
    if (this.hasDistinct) {
      const { rows } = await db.query<{ source: string; day: Date }>(
        `with pruned as (delete from ${this.t.hourlyDistinct} where bucket < $1 returning source, bucket)
         select distinct source, date_trunc('day', bucket, 'UTC') as day from pruned`,
        [new Date(before)],
      );
      await this.recomputeDays(
        db,
        rows.map((r) => ({ source: r.source, day: r.day.getTime() })),
      );
    }
    return rowCount ?? 0;
  }

  /**
   * What derived_settings keeps for records_hourly: its shape ({@link ROLLUP_SHAPE}) and the
   * dimensions as `column=dotted.path` strings, in order (an array: jsonb keeps its order).
   */
  private setting(): { shape: number; dimensions: string[] } {
    return { shape: ROLLUP_SHAPE, dimensions: this.dims.map((d) => `${d.column}=${d.path.join('.')}`) };
  }

  /**
   * What derived_settings keeps for records_hourly_distinct: its shape ({@link DISTINCT_SHAPE}),
   * its grouping columns as `column=dotted.path`, and its fields (`distinct`) the same way. The
   * dashboard's "User column" lists the columns of `distinct`.
   */
  private distinctSetting(): { shape: number; by: string[]; distinct: string[] } {
    return {
      shape: DISTINCT_SHAPE,
      by: this.by.map((d) => `${d.column}=${d.path.join('.')}`),
      distinct: this.distinct.map((d) => `${d.column}=${d.path.join('.')}`),
    };
  }
}

/** Whether derived_settings holds `value` under `name` (compared as values: jsonb does not keep an object's key order). */
async function settingIs(db: Pick<PoolClient, 'query'>, t: Tables, name: string, value: unknown): Promise<boolean> {
  const { rows } = await db.query<{ value: unknown }>(`select value from ${t.derivedSettings} where name = $1`, [name]);
  return rows[0]?.value !== undefined && isDeepStrictEqual(rows[0].value, value);
}

/** Whether a table or view exists (its name qualified and quoted). */
async function relationExists(db: Pick<PoolClient, 'query'>, qualified: string): Promise<boolean> {
  const { rows } = await db.query<{ exists: boolean }>('select to_regclass($1) is not null as exists', [qualified]);
  return rows[0]!.exists;
}

/**
 * One row per field name over every source's catalogue rows (sorted by field name): the types
 * every source saw (so one records_typed column serves them all), the records summed, the widest
 * first and last seen, the first example; `source` is the sources' names joined by commas.
 */
export function mergeSources(rows: readonly FieldRow[]): FieldRow[] {
  const byPath = new Map<string, FieldRow>();
  for (const r of rows) {
    const m = byPath.get(r.path);
    if (m === undefined) {
      byPath.set(r.path, { ...r, types: [...r.types] });
      continue;
    }
    m.source = `${m.source},${r.source}`;
    m.column ??= r.column;
    m.types = [...new Set([...m.types, ...r.types])].sort();
    m.viewType = viewType(m.types);
    m.records += r.records;
    if (r.firstSeen < m.firstSeen) m.firstSeen = r.firstSeen;
    if (r.lastSeen > m.lastSeen) m.lastSeen = r.lastSeen;
    m.example ??= r.example;
  }
  return [...byPath.values()];
}

/**
 * The catalogue, ordered by field name then source, with each field's column type in
 * records_typed (from that source's types: {@link mergeSources} gives the view's).
 *
 * @param sources only these sources' rows; default: every source's.
 * @throws the database's error (a schema not migrated: record_fields does not exist).
 */
export async function readFields(db: Pick<PoolClient, 'query'>, t: Tables, sources?: readonly string[]): Promise<FieldRow[]> {
  const { rows } = await db.query<{
    source: string;
    path: string;
    column: string | null;
    types: string[];
    records: string;
    firstSeen: Date;
    lastSeen: Date;
    example: string | null;
  }>(
    `select source, path, view_column as "column", types, records, first_seen as "firstSeen", last_seen as "lastSeen", example
       from ${t.fields} where $1::text[] is null or source = any($1::text[]) order by path collate "C", source collate "C"`,
    [sources === undefined ? null : [...sources]],
  );
  return rows.map((r) => ({ ...r, records: Number(r.records), viewType: viewType(r.types) }));
}

/**
 * The type of a field's column in records_typed from the JSON types seen: one scalar type gives
 * numeric, boolean, timestamptz (date-time strings) or text; a mix widens to text; only nulls give
 * text; only objects or arrays give no column (null).
 */
export function viewType(types: readonly string[]): FieldRow['viewType'] {
  const scalar = types.filter((x) => x === 'string' || x === 'date-time' || x === 'number' || x === 'boolean');
  const nested = types.some((x) => x === 'object' || x === 'array');
  if (scalar.length === 0) return nested ? null : 'text';
  if (scalar.length > 1 || nested) return 'text';
  return scalar[0] === 'number' ? 'numeric' : scalar[0] === 'boolean' ? 'boolean' : scalar[0] === 'date-time' ? 'timestamptz' : 'text';
}

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
export function typedViewSql(t: Tables, fields: readonly FieldRow[]): string {
  const columns = fields.flatMap((f) => {
    if (f.column === null || f.viewType === null) return [];
    const key = quoteLiteral(f.path);
    const value = `payload -> ${key}`;
    const text = `payload ->> ${key}`;
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
  return `create view ${t.typedView} as select ${[...VIEW_BASE_COLUMNS, ...columns].join(', ')} from ${t.records}`;
}
