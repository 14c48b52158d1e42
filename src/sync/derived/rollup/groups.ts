/** Rollup groups counted from parsed records: a value's `#>>` text where exact, and a group's key. */

export const NOT_EXACT = Symbol('not exact');

/**
 * `payload #>> path` where the parsed record gives it exactly: a string, a boolean (`true`,
 * `false`), or null (JSON null, a missing key, a scalar on the way). A number (`1.10`, an id
 * above 2^53), an object or an array at the path, or an array on the way, give {@link NOT_EXACT}.
 */
export function textAt(record: unknown, path: readonly string[]): string | null | typeof NOT_EXACT {
  let value = record;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return null;
    if (Array.isArray(value)) return NOT_EXACT;
    if (!Object.hasOwn(value, key)) return null;
    value = (value as Record<string, unknown>)[key];
  }
  return scalarText(value);
}

/** `#>>`'s text of a value reached: a string as is, a boolean as `true` or `false`, null for null or nothing. */
export function scalarText(value: unknown): string | null | typeof NOT_EXACT {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return NOT_EXACT;
}

/** The hour then the values, separated by U+0000, which no stored string holds: `''` for null, `s…` a string. */
export function groupKey(hour: number | null, values: readonly (string | null)[]): string {
  let key = hour === null ? '' : String(hour);
  for (const v of values) key += v === null ? '\u0000' : `\u0000s${v}`;
  return key;
}

export interface RollupGroup {
  /** UTC hour, ms; null without an event time (the window's start gives the hour). */
  hour: number | null;
  values: (string | null)[];
  records: number;
}

export interface DistinctGroup {
  hour: number | null;
  /** The ROLLUP_DISTINCT_BY values, then the field's position in ROLLUP_DISTINCT (decimal text). */
  values: (string | null)[];
  /** The field's distinct non-null `#>>` texts. */
  seen: Set<string>;
}
