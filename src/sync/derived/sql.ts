/** SQL fragments and time units the rollup modules share. */
import type { SchemaTables } from './table.js';

/** The rollups' buckets are UTC hours and days. */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The UTC hour of a stored row's event time, else of its window start. */
export const BUCKET_SQL = `date_trunc('hour', coalesce(event_time, window_start), 'UTC')`;

/** The hour (ms) of a window's records without an event time. */
export function untimedHourOf(windowStart: number): number {
  return Math.floor(windowStart / HOUR_MS) * HOUR_MS;
}

/** Distinct texts sorted by code point (`collate "C"`, as compareCodePoints). */
export function valuesAgg(value: string): string {
  return `array_agg(distinct ${value} collate "C" order by ${value} collate "C")`;
}

/** Null-safe unique-index expressions (PostgreSQL 13 has no `nulls not distinct`): a missing value its own group. */
export function nullMatchedKeys(cols: readonly string[]): string[] {
  return cols.flatMap((c) => [`(coalesce(${c}, ''))`, `((${c} is null))`]);
}

/** `, a, b`, each prefixed by `prefix`. */
export function columnList(cols: readonly string[], prefix = ''): string {
  return cols.map((c) => `, ${prefix}${c}`).join('');
}

/** `, v0 text, …` of a `json_to_recordset` row. */
export function recordsetColumns(n: number): string {
  return Array.from({ length: n }, (_, i) => `, v${i} text`).join('');
}

/** `, u.v0, …` of the rows aliased `alias`. */
export function recordsetPick(n: number, alias = 'u'): string {
  return Array.from({ length: n }, (_, i) => `, ${alias}.v${i}`).join('');
}

/** A window's records (`source` $1, `window_start` $2), aliased `r`. */
export function windowRecordsSql(t: SchemaTables): string {
  return `(select * from ${t.records} where source = $1 and window_start = $2) as r`;
}
