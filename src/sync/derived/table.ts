/**
 * What every derived table shares: the tables it may name and the window lifecycle (clear,
 * restore, commit). A new derived table is one module implementing {@link DerivedTable}
 * ({@link RollupTable} when rebuilt from `records`), listed in the facade (index.ts). Design:
 * docs/design/derived-tables.md.
 */
import type { PoolClient } from '../../db/pool.js';
import type { Logger } from '../../log.js';
import type { Window } from '../windows.js';
import type { FieldChange, WindowFields } from './fields/field-types.js';
import type { RollupCounts } from './rollup/counts.js';

/** Inside the caller's transaction. */
export type Queryable = Pick<PoolClient, 'query'>;

/** Qualified, quoted names; structural, so this folder never imports the store (whose `Tables` is one). */
export interface SchemaTables {
  readonly schema: string;
  readonly records: string;
  readonly quarantine: string;
  /** records_typed takes each record's window end and load time from it. */
  readonly windows: string;
  readonly hourly: string;
  readonly hourlyDistinct: string;
  readonly fields: string;
  readonly fieldChanges: string;
  readonly derivedSettings: string;
  readonly typedView: string;
  readonly tryTimestamptz: string;
}

export interface Query {
  text: string;
  values: unknown[];
}

/** What a window's pages gave the derived tables, at its commit. */
export interface WindowCommit {
  source: string;
  window: Window;
  runId: number;
  /** Inexact: grouped from the window's records instead. */
  rollup: RollupCounts;
  fields: WindowFields;
  /** For record_field_changes. */
  changes: readonly FieldChange[] | undefined;
  log: Logger;
  /** Set by the catalogue when it gained a field or a type. */
  catalogueChanged: boolean;
}

/** One derived table (or tables that change together). Every statement runs in the caller's transaction. */
export interface DerivedTable {
  /** Expressions after `gone` (the deleted records) in the clearing statement: $1 start, $2 end (timestamptz), $3 source. */
  clearWindowSql(): string[];
  /** Expressions after `back` (records inserted back) undoing the clearing; none: rebuilt at commit instead. */
  restoreWindowSql?(): string[];
  /** After the tables before it in the facade's list. */
  commitWindow(db: PoolClient, commit: WindowCommit): Promise<void>;
}

/** A derived table rebuilt from `records` when its settings change, pruned by ROLLUP_RETENTION. */
export interface RollupTable {
  clearWindowSql(): string[];
  restoreWindowSql?(): string[];
  /** Built for these settings with this release's shape, or absent when they keep none. */
  isCurrent(db: Queryable): Promise<boolean>;
  /** The caller holds the schema's sync lock. @returns whether it rebuilt. */
  ensureCurrent(db: PoolClient, log: Logger): Promise<boolean>;
  /** Filled from `records`; only dropped when the settings keep none. */
  rebuild(db: PoolClient): Promise<void>;
  /** Every source's buckets before `before` (ms). @returns the rows the run reports (0 but records_hourly's). */
  prune(db: PoolClient, before: number): Promise<number>;
}
