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
import { FieldCatalogue } from './fields/catalogue.js';
import type { KnownFields } from './fields/schema-changes.js';
import { Rollups } from './rollup/rollups.js';
import type { DerivedTable, Queryable, SchemaTables, WindowCommit } from './table.js';
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
 * The derived tables of one schema for one ROLLUP_* and FIELD_CATALOGUE setting: each stage of a
 * window's load is a loop over {@link tables}. Every statement runs in the caller's transaction.
 */
export class Derived {
  private readonly rollups: Rollups;
  private readonly catalogue: FieldCatalogue;
  private readonly view: TypedView;
  /** Every derived table, in the order their statements run. */
  private readonly tables: readonly DerivedTable[];

  /** @param t the schema's tables (store/pg/tables.ts). */
  constructor(
    private readonly t: SchemaTables,
    readonly rollup: RollupConfig,
  ) {
    this.rollups = new Rollups(t, rollup);
    this.catalogue = new FieldCatalogue(t, rollup);
    this.view = new TypedView(t);
    this.tables = [this.rollups, this.catalogue, this.view];
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

  /** At a window's commit, once its records are all in: each table's part, in order. */
  async commitWindow(db: PoolClient, commit: Omit<WindowCommit, 'catalogueChanged'>): Promise<void> {
    const state: WindowCommit = { ...commit, catalogueChanged: false };
    for (const table of this.tables) await table.commitWindow(db, state);
  }

  /** `source`'s field catalogue: each field name with the JSON types seen (empty when it has none). */
  readFieldTypes(db: Queryable, source: string): Promise<KnownFields> {
    return this.catalogue.readTypes(db, source);
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
    for (const table of this.rollups.tables) changed = (await table.ensureCurrent(db, log)) || changed;
    return changed;
  }

  /** Whether every rollup table is as these settings want it: built with this shape for them, or absent when off. */
  async isRollupCurrent(db: Queryable): Promise<boolean> {
    for (const table of this.rollups.tables) if (!(await table.isCurrent(db))) return false;
    return true;
  }

  /** Drops and recreates the rollup tables for these settings, filled from `records` (or only drops them when off); in the caller's transaction. */
  async rebuildRollup(db: PoolClient): Promise<void> {
    for (const table of this.rollups.tables) await table.rebuild(db);
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
    for (const table of this.rollups.tables) deleted += await table.prune(db, before);
    return deleted;
  }
}
