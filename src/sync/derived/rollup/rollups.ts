/**
 * The rollup tables as one derived table of the window lifecycle: records_hourly and
 * records_hourly_distinct in one statement at a window's commit, then records_daily_distinct for the
 * days it touched. Each table rebuilds and prunes itself. Design: docs/design/derived-tables.md.
 */
import type { RollupConfig } from '../../../config.js';
import type { PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';
import { untimedHourOf } from '../sql.js';
import type { DerivedTable, Query, RollupTable, SchemaTables, WindowCommit } from '../table.js';
import type { RollupCounts } from './counts.js';
import { DistinctRollup } from './distinct.js';
import { HourlyRollup } from './hourly.js';

export class Rollups implements DerivedTable {
  readonly hourly: HourlyRollup;
  readonly distinct: DistinctRollup;
  /** In the order they are rebuilt and pruned. */
  readonly tables: readonly RollupTable[];

  constructor(t: SchemaTables, rollup: RollupConfig) {
    this.hourly = new HourlyRollup(t, rollup);
    this.distinct = new DistinctRollup(t, rollup);
    this.tables = [this.hourly, this.distinct];
  }

  clearWindowSql(): string[] {
    return this.tables.flatMap((table) => table.clearWindowSql());
  }

  restoreWindowSql(): string[] {
    return this.tables.flatMap((table) => table.restoreWindowSql?.() ?? []);
  }

  async commitWindow(db: PoolClient, commit: WindowCommit): Promise<void> {
    const { source, window, rollup } = commit;
    const query = this.windowQuery(source, window, rollup);
    if (query === undefined) return;
    const { rows } = await db.query<{ day: Date; cleared: boolean }>(query.text, query.values);
    if (this.distinct.enabled) await this.distinct.updateDays(db, source, window, rows, rollup.exact ? rollup.distinct : undefined);
  }

  /** From `counts` when exact, else grouped from the window's records. @returns undefined with ROLLUP_DIMENSIONS off. */
  windowQuery(source: string, window: Window, counts: RollupCounts | undefined): Query | undefined {
    if (!this.hourly.enabled) return undefined;
    const exact = counts?.exact === true ? counts : undefined;
    const untimedHour = untimedHourOf(window.start);
    const hourly = this.hourly.windowInsert(untimedHour, exact?.hourly);
    const values = [source, new Date(window.start), ...hourly.values];
    if (!this.distinct.enabled) return { text: hourly.text, values };
    const distinct = this.distinct.windowReplace(hourly.text, values.length + 1, window, untimedHour, exact?.distinct);
    return { text: distinct.text, values: [...values, ...distinct.values] };
  }
}
