/** A window's rollup groups, counted from its pages while each waits for the writer (page-walk.ts). */
import type { DistinctGroup, RollupGroup } from './groups.js';

/** Keyed by group key (hour and values). */
export interface RollupCounts {
  /** False: a value's `#>>` text is one only PostgreSQL gives exactly; the counts are incomplete. */
  exact: boolean;
  hourly: Map<string, RollupGroup>;
  distinct: Map<string, DistinctGroup>;
}

export function inexactCounts(): RollupCounts {
  return { exact: false, hourly: new Map(), distinct: new Map() };
}

/** `from` is consumed: `into` takes over its groups and sets rather than copying them. */
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
    const [small, large] = g.seen.size > target.seen.size ? [target.seen, g.seen] : [g.seen, target.seen];
    for (const v of small) large.add(v);
    target.seen = large;
  }
}
