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
import { PageWalk, type PageObservations } from './page-walk.js';
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
  /** The one walk of each page's records that feeds the catalogue and the rollups. */
  private readonly walk: PageWalk;
  /** Every derived table, in the order their statements run. */
  private readonly tables: readonly DerivedTable[];
  /** Those rebuilt from `records` and pruned by ROLLUP_RETENTION. */
  private readonly rollups: readonly RollupTable[];

  /** @param t the schema's tables (src/sync/store/pg/sql.ts's `Tables`). */
  constructor(
    private readonly t: SchemaTables,
    rollup: RollupConfig,
  ) {
    this.hourly = new HourlyRollup(t, rollup);
    this.distinct = new DistinctRollup(t, rollup);
    this.catalogue = new FieldCatalogue(t, rollup);
    this.view = new TypedView(t);
    this.walk = new PageWalk({
      dimensions: this.hourly.enabled ? rollup.dimensions : undefined,
      distinctBy: this.distinct.enabled ? rollup.distinctBy : [],
      distinct: this.distinct.enabled ? rollup.distinct : [],
    });
    this.tables = [this.hourly, this.distinct, this.catalogue, this.view];
    this.rollups = [this.hourly, this.distinct];
  }

  /**
   * Deletes `source`'s stored records of the windows inside `window` and, in the same statement,
   * what each derived table clears with them (records_hourly's rows by `window_start`, so also
   * those of windows whose records RETENTION dropped; the records subtracted from record_fields'
   * counts). records_hourly_distinct's rows are replaced at the window's end ({@link windowCountsQuery}).
   *
   * @returns the number of records deleted.
   */
  async deleteWindowRecords(db: PoolClient, source: string, window: Window, keep = false): Promise<number> {
    const parts = [
      `gone as (delete from ${this.t.records} where source = $3 and window_start >= $1 and window_start < $2 returning payload, event_time, run_id)`,
    ];
    // SYNC_SHRINK=keep: the records wait in the session's temporary table for restoreKeptRecords.
    if (keep) parts.push(`saved as (insert into pg_temp.sync_kept_records (payload, event_time, run_id) select payload, event_time, run_id from gone)`);
    for (const table of this.tables) parts.push(...table.clearWindowSql());
    const { rows } = await db.query<{ deleted: string }>(
      `with ${parts.join(',\n')}
       select count(*) as deleted from gone`,
      [new Date(window.start), new Date(window.end), source],
    );
    return Number(rows[0]!.deleted);
  }

  /**
   * SYNC_SHRINK=keep, once the window's records of this read are all in (before its derived rows
   * are added): inserts again each record {@link deleteWindowRecords} saved as many times as it was
   * stored beyond the copies of the same payload (`payload::text`) this read stored (or had refused
   * by a constraint or a trigger: quarantined with SQLSTATE class 23 or P0, so jsonb had read it, or
   * left out as its start's boundary set, which the window before owns: `pg_temp.sync_kept_owned`),
   * so the window holds the union of both; what the derived tables subtracted for those records is
   * added back in the same statement (the rollups are then grouped from the window's records: pass
   * inexact counts).
   *
   * @param only the saved records to insert again, by {@link keptRecordsBeyond}'s numbers, instead
   *   of those beyond this read's copies (which the first of several such inserts would change).
   * @returns the records inserted again.
   */
  async restoreKeptRecords(db: PoolClient, source: string, window: Window, only?: readonly number[]): Promise<number> {
    const parts =
      only === undefined
        ? [...this.keptBeyondSql(), `chosen as (select k.* from kept k left join loaded l on l.text = k.payload::text where k.copy > coalesce(l.n, 0))`]
        : // $2 (the window's end) is named only so that both forms take the same parameters.
          [`chosen as (select k.* from pg_temp.sync_kept_records k where k.n = any($4::bigint[]) and $2::timestamptz > $1)`];
    parts.push(`back as (
         insert into ${this.t.records} (source, payload, event_time, window_start, run_id)
         select $3, payload, event_time, $1, run_id from chosen order by n
         returning payload
       )`);
    for (const table of this.tables) parts.push(...(table.restoreWindowSql?.() ?? []));
    const { rows } = await db.query<{ kept: string }>(
      `with ${parts.join(',\n')}
       select count(*) as kept from back`,
      [new Date(window.start), new Date(window.end), source, ...(only === undefined ? [] : [only])],
    );
    return Number(rows[0]!.kept);
  }

  /**
   * The saved records {@link restoreKeptRecords} would insert again, by number, for inserting them
   * in parts when the database refuses some (a constraint added since they were stored).
   */
  async keptRecordsBeyond(db: PoolClient, source: string, window: Window): Promise<number[]> {
    const { rows } = await db.query<{ n: string }>(
      `with ${this.keptBeyondSql().join(',\n')}
       select k.n from kept k left join loaded l on l.text = k.payload::text where k.copy > coalesce(l.n, 0) order by k.n`,
      [new Date(window.start), new Date(window.end), source],
    );
    return rows.map((r) => Number(r.n));
  }

  /** The saved records numbered per payload (`kept`), and this read's copies per payload text (`loaded`). */
  private keptBeyondSql(): string[] {
    return [
      `kept as (select k.*, row_number() over (partition by k.payload::text order by k.n) as copy from pg_temp.sync_kept_records k)`,
      `loaded as (
         select text, count(*) as n from (
           select payload::text as text from ${this.t.records} where source = $3 and window_start >= $1 and window_start < $2
           union all
           select payload_text::jsonb::text from ${this.t.quarantine}
            where source = $3 and window_start >= $1 and window_start < $2 and left(sqlstate, 2) in ('23', 'P0')
           union all
           select payload::text from pg_temp.sync_kept_owned where payload is not null
         ) as now group by text
       )`,
    ];
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
   * What a page's kept records give the derived tables, in one walk of their top-level fields
   * (src/sync/derived/page-walk.ts), work done while the page waits for the writer: the field
   * catalogue's statistics (record_fields; see catalogueRecords) and the rollup groups
   * ({@link RollupCounts}: `exact` false, without groups, when a value's text is not one the
   * parsed record gives exactly).
   *
   * @param records the page's parsed records (E6 `data`).
   * @param keep positions of the records stored, ascending.
   * @param eventTimes per kept record, its event time in milliseconds or null.
   * @param catalogue FIELD_CATALOGUE: whether to gather the fields (else `fields` is empty).
   * @returns `rollup` undefined when ROLLUP_DIMENSIONS is off.
   */
  observePage(records: readonly unknown[], keep: readonly number[], eventTimes: readonly (number | null)[], catalogue: boolean): PageObservations {
    return this.walk.observe(records, keep, eventTimes, catalogue);
  }

  /**
   * Counts the kept records of a page into rollup groups ({@link RollupCounts}): {@link observePage}
   * without the catalogue.
   *
   * @returns undefined when ROLLUP_DIMENSIONS is off.
   */
  countRollup(records: readonly unknown[], keep: readonly number[], eventTimes: readonly (number | null)[]): RollupCounts | undefined {
    return this.walk.observe(records, keep, eventTimes, false).rollup;
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
   * @param counts the window's groups counted from its pages ({@link countRollup}, merged).
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
