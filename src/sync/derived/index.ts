/**
 * Tables derived from `records`, kept in each window's transaction so that they agree with it at
 * every commit: records_hourly (rollup/hourly.ts), records_hourly_distinct and
 * records_daily_distinct (rollup/distinct.ts, daily.ts), record_fields (fields/catalogue.ts) and
 * records_typed (fields/typed-view.ts). {@link Derived} is the one entry the store uses: each stage
 * of a window's load a loop over the tables. Nothing assumes a field. Design:
 * docs/design/derived-tables.md.
 */
import type { RollupConfig } from '../../config.js';
import { quoteIdent, type PoolClient } from '../../db/pool.js';
import { asSchemaOwner } from '../../db/schema-owner.js';
import type { Logger } from '../../log.js';
import { FieldCatalogue } from './fields/catalogue.js';
import { readFields, type FieldRow } from './fields/fields.js';
import type { KnownFields } from './fields/schema-changes.js';
import { Rollups } from './rollup/rollups.js';
import type { DerivedTable, Queryable, SchemaTables, WindowCommit } from './table.js';
import { fieldPlaces, inViewColumns, TypedView, type FieldPlaces } from './fields/typed-view.js';
import type { Window } from '../windows.js';

export { catalogueRecords, mergeFields, uncatalogueRecords } from './fields/catalogue.js';
export type { WindowFields } from './fields/catalogue.js';
export { inexactCounts, mergeRollupCounts, type RollupCounts } from './rollup/counts.js';
export type { FieldRow } from './fields/fields.js';
export type { FieldPlaces } from './fields/typed-view.js';

/** One schema's derived tables for one ROLLUP_* and FIELD_CATALOGUE setting, in the caller's transaction. */
export class Derived {
  private readonly rollups: Rollups;
  private readonly catalogue: FieldCatalogue;
  private readonly view: TypedView;
  /** In the order their statements run. */
  private readonly tables: readonly DerivedTable[];

  constructor(
    private readonly t: SchemaTables,
    readonly rollup: RollupConfig,
  ) {
    this.rollups = new Rollups(t, rollup);
    this.catalogue = new FieldCatalogue(t, rollup);
    this.view = new TypedView(t, rollup.typedViewMaxFields);
    this.tables = [this.rollups, this.catalogue, this.view];
  }

  /**
   * One statement: the windows' records deleted and each table's rows cleared.
   * @param saveSql an expression on the deleted records (`gone`): SYNC_SHRINK=keep sets them aside.
   * @returns the records deleted.
   */
  async deleteWindowRecords(db: PoolClient, source: string, window: Window, saveSql?: string): Promise<number> {
    const ctes = [`gone as (delete from ${this.t.records} where source = $3 and window_start >= $1 and window_start < $2 returning payload, event_time)`];
    if (saveSql !== undefined) ctes.push(saveSql);
    for (const table of this.tables) ctes.push(...table.clearWindowSql());
    const { rows } = await db.query<{ deleted: string }>(
      `with ${ctes.join(',\n')}
       select count(*) as deleted from gone`,
      [new Date(window.start), new Date(window.end), source],
    );
    return Number(rows[0]!.deleted);
  }

  /** Expressions undoing the tables' clearing for records inserted back (`back`). */
  restoreWindowSql(): string[] {
    return this.tables.flatMap((table) => table.restoreWindowSql?.() ?? []);
  }

  /** Once the window's records are all in. */
  async commitWindow(db: PoolClient, commit: Omit<WindowCommit, 'catalogueChanged'>): Promise<void> {
    const state: WindowCommit = { ...commit, catalogueChanged: false };
    for (const table of this.tables) await table.commitWindow(db, state);
  }

  readFieldTypes(db: Queryable, source: string): Promise<KnownFields> {
    return this.catalogue.readTypes(db, source);
  }

  /**
   * The catalogue by field name then source (`sources` undefined: all), `column` null for a field
   * records_typed has no column of (left out at TYPED_VIEW_MAX_FIELDS, or objects only).
   * @throws the database's error (a schema not migrated).
   */
  async listFields(db: Queryable, sources?: readonly string[]): Promise<FieldRow[]> {
    return inViewColumns(db, this.t, await readFields(db, this.t, sources));
  }

  /** `source`'s catalogue fields by their place in records_typed. @throws the database's error. */
  fieldPlaces(db: Queryable, source: string): Promise<FieldPlaces> {
    return fieldPlaces(db, this.t, source);
  }

  /** Recreates records_typed when its definition is not this release's, without waiting for a new field. */
  async ensureTypedViewCurrent(db: PoolClient, log: Logger): Promise<void> {
    await this.view.refreshExisting(db, log);
  }

  /** The caller holds the schema's sync lock. @returns whether one was rebuilt. */
  async ensureRollup(db: PoolClient, log: Logger): Promise<boolean> {
    if (await this.isRollupCurrent(db)) return false;
    return this.#asOwner(db, async () => {
      let changed = false;
      for (const table of this.rollups.tables) changed = (await table.ensureCurrent(db, log)) || changed;
      return changed;
    });
  }

  async isRollupCurrent(db: Queryable): Promise<boolean> {
    for (const table of this.rollups.tables) if (!(await table.isCurrent(db))) return false;
    return true;
  }

  async rebuildRollup(db: PoolClient): Promise<void> {
    await this.#asOwner(db, async () => {
      for (const table of this.rollups.tables) await table.rebuild(db);
    });
  }

  /** The rollup tables created as the schema's owner, unless one is another role's (schema-owner.ts). */
  #asOwner<T>(db: PoolClient, fn: () => Promise<T>): Promise<T> {
    const q = quoteIdent(this.t.schema);
    const tables = [this.t.hourly, this.t.hourlyDistinct, `${q}.records_daily_distinct`, `${q}.records_hourly_distinct_per_value`];
    return asSchemaOwner(db, this.t.schema, tables, fn);
  }

  /** ROLLUP_RETENTION, every source's; `before` in ms. @returns the records_hourly rows deleted. */
  async pruneRollup(db: PoolClient, before: number): Promise<number> {
    let deleted = 0;
    for (const table of this.rollups.tables) deleted += await table.prune(db, before);
    return deleted;
  }
}
