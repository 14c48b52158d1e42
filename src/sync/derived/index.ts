/**
 * Tables derived from `records`, kept in the transaction of each window so that they agree with
 * it at every commit; one module each in src/sync/derived/, behind the interfaces of
 * src/sync/derived/table.ts:
 *
 * - `records_hourly` (hourly.ts): records per source, hour, window start and ROLLUP_DIMENSIONS values.
 * - `records_hourly_distinct` and `records_daily_distinct` (distinct.ts, daily.ts): the distinct
 *   values of the ROLLUP_DISTINCT fields per hour, and their union per day.
 * - `record_fields` (catalogue.ts, read back by fields.ts): the catalogue of top-level payload fields.
 * - `records_typed` (typed-view.ts): one view with a typed column per scalar field of the catalogue.
 *
 * ROLLUP_DIMENSIONS=off keeps neither rollup table (they are dropped) and FIELD_CATALOGUE=off stops
 * maintaining record_fields and records_typed (left as they are), for an ETL without derived work.
 * This file is the one entry the sync uses: {@link Derived} runs each stage of a window's load
 * over the modules. The record schema is not published: nothing here assumes a field.
 */
import type { RollupConfig } from '../../config.js';
import type { PoolClient } from '../../db/pool.js';
import type { Logger } from '../../log.js';
import { FieldCatalogue, type WindowFields } from './fields/catalogue.js';
import type { FieldChange, KnownFields } from './fields/schema-changes.js';
import type { RollupCounts } from './rollup/counts.js';
import { DistinctRollup } from './rollup/distinct.js';
import { HourlyRollup } from './rollup/hourly.js';
import { untimedHourOf } from './sql.js';
import type { DerivedTable, Query, Queryable, RollupTable, SchemaTables } from './table.js';
import { TypedView } from './fields/typed-view.js';
import type { Window } from '../windows.js';

export { catalogueRecords, mergeFields, uncatalogueRecords, EXAMPLE_MAX_CHARS, ISO_DATE_TIME_PATTERN, SECRET_FIELD_PATTERN } from './fields/catalogue.js';
export type { FieldStats, WindowFields } from './fields/catalogue.js';
export { compareCodePoints } from './rollup/code-points.js';
export { inexactCounts, mergeRollupCounts, type RollupCounts } from './rollup/counts.js';
export { mergeSources, readFields, viewType, type FieldRow } from './fields/fields.js';
export type { DistinctGroup, RollupGroup } from './rollup/groups.js';
export type { PageObservations } from './page-walk.js';
export { columnName, typedViewSql } from './fields/typed-view.js';

/**
 * The derived tables of one schema for one ROLLUP_* and FIELD_CATALOGUE setting. Every statement
 * runs inside the caller's transaction.
 */
export class Derived {
  private readonly hourly: HourlyRollup;
  private readonly distinct: DistinctRollup;
  private readonly catalogue: FieldCatalogue;
  private readonly view: TypedView;
  /** Every derived table, in the order their statements run. */
  private readonly tables: readonly DerivedTable[];
  /** Those rebuilt from `records` and pruned by ROLLUP_RETENTION. */
  private readonly rollups: readonly RollupTable[];

  /** @param t the schema's tables (src/sync/store/pg/sql.ts's `Tables`). */
  constructor(
    private readonly t: SchemaTables,
    readonly rollup: RollupConfig,
  ) {
    this.hourly = new HourlyRollup(t, rollup);
    this.distinct = new DistinctRollup(t, rollup);
    this.catalogue = new FieldCatalogue(t, rollup);
    this.view = new TypedView(t);
    this.tables = [this.hourly, this.distinct, this.catalogue, this.view];
    this.rollups = [this.hourly, this.distinct];
  }

  /**
   * Deletes `source`'s records of the windows inside `window` and, in the same statement, what
   * each derived table clears with them.
   *
   * @param saveSql a common table expression run on the deleted records (`gone`): SYNC_SHRINK=keep
   *   sets them aside (store/pg/keep.ts).
   * @returns the number of records deleted.
   */
  async deleteWindowRecords(db: PoolClient, source: string, window: Window, saveSql?: string): Promise<number> {
    const ctes = [
      `gone as (delete from ${this.t.records} where source = $3 and window_start >= $1 and window_start < $2 returning payload, event_time, run_id)`,
    ];
    if (saveSql !== undefined) ctes.push(saveSql);
    for (const table of this.tables) ctes.push(...table.clearWindowSql());
    const { rows } = await db.query<{ deleted: string }>(
      `with ${ctes.join(',\n')}
       select count(*) as deleted from gone`,
      [new Date(window.start), new Date(window.end), source],
    );
    return Number(rows[0]!.deleted);
  }

  /** The derived tables' common table expressions undoing their clearing for records inserted back (`back`). */
  restoreWindowSql(): string[] {
    return this.tables.flatMap((table) => table.restoreWindowSql?.() ?? []);
  }

  /**
   * The statement adding the records of `window` (those whose `window_start` is its start: what
   * one window's load inserts) to records_hourly and replacing `source`'s records_hourly_distinct
   * rows of the windows inside it, grouped by PostgreSQL from the records: {@link windowCountsQuery}
   * without counts.
   */
  windowRollupQuery(source: string, window: Window): Query | undefined {
    return this.windowCountsQuery(source, window, undefined);
  }

  /**
   * The one statement of a window's commit that adds its rows to records_hourly and replaces them
   * in records_hourly_distinct (returning the days records_daily_distinct must update: `day`,
   * `cleared`), run once its records are all inserted, after {@link deleteWindowRecords}: from
   * `counts` when they are exact (the groups counted from its pages), else grouped by PostgreSQL
   * from its records. Parameters: $1 the source, $2 the window's start, then records_hourly's,
   * then records_hourly_distinct's (the window's end last).
   *
   * @returns undefined when ROLLUP_DIMENSIONS is off.
   */
  windowCountsQuery(source: string, window: Window, counts: RollupCounts | undefined): Query | undefined {
    if (!this.hourly.enabled) return undefined;
    const exact = counts?.exact === true ? counts : undefined;
    const untimedHour = untimedHourOf(window.start);
    const hourly = this.hourly.windowInsert(untimedHour, exact?.hourly);
    const values = [source, new Date(window.start), ...hourly.values];
    if (!this.distinct.enabled) return { text: hourly.text, values };
    const distinct = this.distinct.windowReplace(hourly.text, values.length + 1, window, untimedHour, exact?.distinct);
    return { text: distinct.text, values: [...values, ...distinct.values] };
  }

  /**
   * At the commit of `source`'s `window`, once its records are all inserted: runs
   * {@link windowCountsQuery} and updates records_daily_distinct for the days it touched.
   *
   * @param counts the window's groups counted from its pages (page-walk.ts, merged).
   */
  async addWindowRollup(db: PoolClient, source: string, window: Window, counts: RollupCounts | undefined): Promise<void> {
    const query = this.windowCountsQuery(source, window, counts);
    if (query === undefined) return;
    const { rows } = await db.query<{ day: Date; cleared: boolean }>(query.text, query.values);
    if (this.distinct.enabled) await this.distinct.updateDays(db, source, window, rows, counts?.exact === true ? counts.distinct : undefined);
  }

  /**
   * Brings records_daily_distinct's rows of `source`'s `days` up to date with the hourly rows
   * {@link windowCountsQuery} just replaced for `window`, under the days' locks (src/sync/derived/rollup/daily.ts).
   *
   * @param days as {@link windowCountsQuery}'s statement returns them.
   * @param added the window's values per day as JSON rows (`{"b": day in ms, "v0": …, "a": [values]}`):
   *   merged as they are; undefined to read its hourly rows back.
   */
  async updateDays(db: PoolClient, source: string, window: Window, days: readonly { day: Date; cleared: boolean }[], added?: string): Promise<void> {
    await this.distinct.daily.update(db, source, window, days, added);
  }

  /**
   * Sets records_daily_distinct's rows of each (source, UTC day) in `days` to the union of that
   * day's records_hourly_distinct rows, under the days' locks.
   *
   * @param days `day` a UTC midnight in milliseconds.
   */
  async recomputeDays(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    await this.distinct.daily.recompute(db, days);
  }

  /**
   * At the commit of `source`'s `window`: merges `fields` (see catalogueRecords) into the source's
   * catalogue, and recreates records_typed when the catalogue gained a field or a type; records
   * `changes` (what it gains, as src/sync/run/field-contract.ts reports it) in record_field_changes.
   */
  async addWindowRecords(
    db: PoolClient,
    source: string,
    window: Window,
    fields: WindowFields,
    log: Logger,
    changes?: { runId: number; list: readonly FieldChange[] },
  ): Promise<void> {
    if (await this.catalogue.addWindow(db, source, window, fields)) await this.view.refresh(db, log);
    if (changes !== undefined) await this.catalogue.addChanges(db, source, window, changes.runId, changes.list);
  }

  /** `source`'s field catalogue: each field name with the JSON types seen (empty when it has none). */
  readFieldTypes(db: Queryable, source: string): Promise<KnownFields> {
    return this.catalogue.readTypes(db, source);
  }

  /** Names the catalogue's new fields' columns and recreates records_typed when its definition changed (src/sync/derived/fields/typed-view.ts). */
  async refreshTypedView(db: PoolClient, log: Logger): Promise<void> {
    await this.view.refresh(db, log);
  }

  /** Recreates records_typed when it exists and its definition is not the one this release writes, without waiting for a new field. */
  async ensureTypedViewCurrent(db: PoolClient, log: Logger): Promise<void> {
    await this.view.refreshExisting(db, log);
  }

  /**
   * Rebuilds each rollup table that was built for other settings or another shape, or not yet
   * (dropping those the settings keep none of). The caller holds the schema's sync lock.
   *
   * @returns whether one was rebuilt.
   */
  async ensureRollup(db: PoolClient, log: Logger): Promise<boolean> {
    let changed = false;
    for (const table of this.rollups) changed = (await table.ensureCurrent(db, log)) || changed;
    return changed;
  }

  /** Whether every rollup table is as these settings want it: built with this shape for them, or absent when off. */
  async isRollupCurrent(db: Queryable): Promise<boolean> {
    for (const table of this.rollups) if (!(await table.isCurrent(db))) return false;
    return true;
  }

  /** Drops and recreates the rollup tables for these settings, filled from `records` (or only drops them when off); in the caller's transaction. */
  async rebuildRollup(db: PoolClient): Promise<void> {
    for (const table of this.rollups) await table.rebuild(db);
  }

  /**
   * Deletes the rollup tables' buckets that start before `before` (ROLLUP_RETENTION), every
   * source's, and recomputes records_daily_distinct's rows of the days they were in, in the
   * caller's transaction (which holds the days' locks until it ends).
   *
   * @returns the number of records_hourly rows deleted.
   */
  async pruneRollup(db: PoolClient, before: number): Promise<number> {
    let deleted = 0;
    for (const table of this.rollups) deleted += await table.prune(db, before);
    return deleted;
  }
}
