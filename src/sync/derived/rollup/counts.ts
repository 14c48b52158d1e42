/**
 * A window's rollup groups, counted from the parsed records of its pages while each waits for the
 * writer, so that PostgreSQL only inserts them at the commit: records_hourly's groups and
 * records_hourly_distinct's, in one walk over each page's records (page-walk.ts).
 */
import type { DistinctGroup, RollupGroup } from './groups.js';

/** A window's (or a page's) rollup groups, keyed by their group key (hour and values). */
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

/** Counts nothing: {@link RollupCounts.exact} false, for a page with a value only PostgreSQL gives exactly. */
export function inexactCounts(): RollupCounts {
  return { exact: false, hourly: new Map(), distinct: new Map() };
}

/**
 * Adds `from` into `into` (a window's counts from its pages). `from` is consumed: `into` takes
 * over its groups (and their distinct values' sets) rather than copying them.
 */
export function mergeRollupCounts(into: RollupCounts, from: RollupCounts): void {
  into.exact &&= from.exact;
  if (!into.exact) return;
  for (const [key, g] of from.hourly) {
    const seen = into.hourly.get(key);
    if (seen === undefined) into.hourly.set(key, g);
    else seen.records += g.records;
  }
  for (const [key, g] of from.distinct) {
    const target = into.distinct.get(key);
    if (target === undefined) {
      into.distinct.set(key, g);
      continue;
    }
    // The smaller set is added to the larger, which the window keeps.
    const [small, large] = g.seen.size > target.seen.size ? [target.seen, g.seen] : [g.seen, target.seen];
    for (const v of small) large.add(v);
    target.seen = large;
  }
}
