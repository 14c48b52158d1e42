/** SQL fragments and time units the rollup modules share. */
import type { SchemaTables } from './table.js';

/** An hour and a day in milliseconds: the rollups' buckets are UTC hours and days. */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The bucket of a stored row (its columns unqualified): the UTC hour of its event time, else of its window start. */
export const BUCKET_SQL = `date_trunc('hour', coalesce(event_time, window_start), 'UTC')`;

/** The hour bucket (ms) a window's records without an event time fall in: its start's hour. */
export function untimedHourOf(windowStart: number): number {
  return Math.floor(windowStart / HOUR_MS) * HOUR_MS;
}

/** `array_agg` of the distinct texts of `value`, sorted by code point (PostgreSQL's `collate "C"`, as compareCodePoints). */
export function valuesAgg(value: string): string {
  return `array_agg(distinct ${value} collate "C" order by ${value} collate "C")`;
}

/**
 * Unique-index expressions matching text columns null-safely: `coalesce(col, '')` and `col is null`
 * per column (PostgreSQL 13 has no `nulls not distinct`), a missing value its own group.
 */
export function nullMatchedKeys(cols: readonly string[]): string[] {
  return cols.flatMap((c) => [`(coalesce(${c}, ''))`, `((${c} is null))`]);
}

/** `, a, b` for columns `a` and `b`, each prefixed by `prefix` (an alias and its dot, or nothing). */
export function columnList(cols: readonly string[], prefix = ''): string {
  return cols.map((c) => `, ${prefix}${c}`).join('');
}

/** `, v0 text, …` for `n` values of a `json_to_recordset` row ({@link recordsetPick} reads them). */
export function recordsetColumns(n: number): string {
  return Array.from({ length: n }, (_, i) => `, v${i} text`).join('');
}

/** `, u.v0, …` for `n` values of the `json_to_recordset` rows aliased `alias`. */
export function recordsetPick(n: number, alias = 'u'): string {
  return Array.from({ length: n }, (_, i) => `, ${alias}.v${i}`).join('');
}

/** The records one window's load inserts (`source` $1, `window_start` $2), aliased `r`. */
export function windowRecordsSql(t: SchemaTables): string {
  return `(select * from ${t.records} where source = $1 and window_start = $2) as r`;
}
