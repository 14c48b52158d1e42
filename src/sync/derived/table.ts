/**
 * What every derived table of src/sync/derived/ shares: the tables it may name, what runs its
 * statements, and the window lifecycle it takes part in (clear, restore, commit). A new derived
 * table is one module implementing {@link DerivedTable} ({@link RollupTable} when it is rebuilt
 * from `records`), listed in the facade (index.ts), which loops over its tables at each stage.
 * What a table learns of each page comes from the one walk of its records (page-walk.ts).
 */
import type { PoolClient } from '../../db/pool.js';
import type { Logger } from '../../log.js';
import type { Window } from '../windows.js';
import type { FieldChange, WindowFields } from './fields/field-types.js';
import type { RollupCounts } from './rollup/counts.js';

/** What runs a derived table's statements: a client, inside the caller's transaction. */
export type Queryable = Pick<PoolClient, 'query'>;

/**
 * The qualified, quoted names of one schema's tables that derived tables read and write
 * (src/sync/store/pg/sql.ts's `Tables` is one: a structural type, so this folder never imports the store).
 */
export interface SchemaTables {
  readonly schema: string;
  readonly records: string;
  readonly quarantine: string;
  /** The ledger (sync_windows): records_typed takes each record's window end and load time from it. */
  readonly windows: string;
  readonly hourly: string;
  readonly hourlyDistinct: string;
  readonly fields: string;
  readonly fieldChanges: string;
  readonly derivedSettings: string;
  readonly typedView: string;
  readonly tryTimestamptz: string;
}

/** A statement text and its parameters, ready for `db.query(text, values)`. */
export interface Query {
  text: string;
  values: unknown[];
}

/** A window's commit, once its records are all in: what its pages gave the derived tables. */
export interface WindowCommit {
  source: string;
  window: Window;
  runId: number;
  /** The window's rollup groups, merged over its pages (inexact: grouped from its records instead). */
  rollup: RollupCounts;
  /** The top-level fields of its records (FIELD_CATALOGUE). */
  fields: WindowFields;
  /** The fields and types it brings that the catalogue did not hold (record_field_changes). */
  changes: readonly FieldChange[] | undefined;
  log: Logger;
  /** Set by the catalogue when it gained a field or a type: records_typed may have to change. */
  catalogueChanged: boolean;
}

/** One derived table (or tables that change together) of a schema. Every statement runs in the caller's transaction. */
export interface DerivedTable {
  /**
   * When a source's windows are cleared before a reload: the common table expressions the
   * clearing statement adds after `gone` (the deleted records, with `payload`); its parameters are
   * $1 the windows' start, $2 their end (timestamptz), $3 the source. None: nothing to clear then.
   */
  clearWindowSql(): string[];
  /**
   * When records a window's clearing deleted are inserted back (SYNC_SHRINK=keep keeps what E6 no
   * longer returns): the common table expressions that statement adds after `back` (those records,
   * with `payload`), undoing the table's part of {@link clearWindowSql} for them; same parameters.
   * None: the table is rebuilt from the window's records at its commit instead.
   */
  restoreWindowSql?(): string[];
  /** At a window's commit, after the tables before it in the facade's list. */
  commitWindow(db: PoolClient, commit: WindowCommit): Promise<void>;
}

/**
 * A derived table built from `records` for settings that may change (the rollups): it knows
 * whether it is current, rebuilds itself, and ROLLUP_RETENTION prunes it.
 */
export interface RollupTable {
  clearWindowSql(): string[];
  restoreWindowSql?(): string[];
  /** Whether it is as these settings want it: built for them with this release's shape, or absent when they keep none. */
  isCurrent(db: Queryable): Promise<boolean>;
  /** Rebuilds it when it is not current, saying so in the log. The caller holds the schema's sync lock. @returns whether it rebuilt. */
  ensureCurrent(db: PoolClient, log: Logger): Promise<boolean>;
  /** Drops and recreates it filled from `records` (or only drops it when the settings keep none). */
  rebuild(db: PoolClient): Promise<void>;
  /**
   * ROLLUP_RETENTION: deletes every source's rows of hour buckets starting before `before`
   * (milliseconds). @returns the rows deleted that the run reports (records_hourly's buckets; 0 for the others).
   */
  prune(db: PoolClient, before: number): Promise<number>;
}
