/** A page's rollup groups as a run counts them (the run's page walk without the catalogue). */
import type { Derived, RollupCounts } from '../../src/sync/derived/index.js';
import { pageWalkFor } from '../../src/sync/derived/page-walk.js';

export function countRollup(
  derived: Derived,
  records: readonly unknown[],
  keep: readonly number[],
  times: readonly (number | null)[],
): RollupCounts | undefined {
  return pageWalkFor(derived.rollup).observe(records, keep, times, false).rollup;
}
