/**
 * Rollup groups counted from parsed records: a value's `#>>` text where the parsed record gives it
 * exactly and the key of a group (page-walk.ts finds a record's group through nested maps, without
 * building that key per record).
 */

/** What {@link textAt} returns for a value whose `#>>` text the parsed record cannot give exactly. */
export const NOT_EXACT = Symbol('not exact');

/**
 * `payload #>> path` of a parsed record where the parsed value gives it exactly: the string at the
 * path, or null where the path ends at JSON null, runs past a missing key or into a scalar.
 * A number (its text as written: `1.10`, an id above 2^53), a boolean, an object or an array at
 * the path, or an array on the way (whose keys are indexes), give {@link NOT_EXACT}.
 */
export function textAt(record: unknown, path: readonly string[]): string | null | typeof NOT_EXACT {
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
 * A key of a group map: the event hour then the values, each one token separated by U+0000,
 * which no stored string holds (the quarantine takes those): `''` for null, `s…` for a string.
 */
export function groupKey(hour: number | null, values: readonly (string | null)[]): string {
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
