/**
 * The context of one source's sync run, built once when the run starts and passed first to each of
 * its steps (plan.ts, read.ts, load-window.ts, report.ts, retention.ts) instead of positional
 * parameters: who the run is for, its settings, its store and E6, its logger and observer, and the
 * tables derived from `records`, built once per run.
 */
import { DEFAULT_SOURCE, type Config, type SourceConfig, type SyncConfig, type TablesConfig } from '../../config.js';
import type { Pool } from '../../db/pool.js';
import type { Logger } from '../../log.js';
import type { FieldContract } from './field-contract.js';
import { Derived } from '../derived/index.js';
import type { E6Pages, StoreSession, SyncStore } from '../store/ports.js';
import type { PreparedPage } from '../read/prepare.js';
import type { WindowReader } from '../read/reader.js';
import { PgSyncStore } from '../store/pg/session.js';
import { Tables } from '../store/pg/sql.js';
import type { SyncObserver } from './summary.js';
import type { Window } from '../windows.js';

interface SyncDepsBase {
  /** E6 (API reference, E6): the source's analytics client. */
  client: E6Pages;
  /** The source's name: the `source` of every row the run reads and writes; default {@link DEFAULT_SOURCE}. */
  source?: string;
  /** The source's sync settings. */
  config: SyncConfig;
  /** The schema's settings, the same for every source: how `records` is partitioned and kept, and its derived tables. */
  tables: TablesConfig;
  schema: string;
  /** The source's logger (a child carrying `source`). */
  log: Logger;
  observer?: SyncObserver;
}

/** What a run of one source is given: its store, as a PostgreSQL pool or any {@link SyncStore} (tests). */
export type SyncDeps = SyncDepsBase & ({ pool: Pool; store?: undefined } | { store: SyncStore; pool?: undefined });

/**
 * The deps of a run of `source` (one of `config.sources`) over a PostgreSQL pool, as `sync`,
 * `verify` and serve's schedules build them.
 */
export function sourceSyncDeps(
  config: Config,
  source: SourceConfig,
  io: { pool: Pool; client: E6Pages; log: Logger; observer?: SyncObserver | undefined },
): SyncDeps {
  const { pool, client, log, observer } = io;
  return {
    pool,
    client,
    source: source.name,
    config: source.sync,
    tables: config.tables,
    schema: config.database.schema,
    log,
    ...(observer ? { observer } : {}),
  };
}

export interface SyncOptions {
  /** Start of the range; default: resume from the watermark minus the lookback. */
  from?: Date;
  /** End of the range; default: now minus the settle time. */
  to?: Date;
  /** Wait for a run holding the lock instead of returning `{ status: 'locked' }`. */
  wait?: boolean;
  /** Stops the run: the window being loaded is rolled back, committed windows stay. */
  signal?: AbortSignal;
  now?: () => number;
  /**
   * Apply RETENTION after the run (default true) when no other source's run holds the schema
   * (tried, not waited for: a busy schema leaves it to a later run). `sync` of several sources
   * passes false and applies it once, after all of them (retention.ts applyRetention).
   */
  retention?: boolean;
}

/** One source's run, before it has a session: the same for all its steps. */
export interface RunContext {
  source: string;
  schema: string;
  /** The source's sync settings. */
  settings: SyncConfig;
  /** The schema's settings. */
  tables: TablesConfig;
  log: Logger;
  observer: SyncObserver | undefined;
  store: SyncStore;
  e6: E6Pages;
  /** The derived tables' counting and SQL, built once per run. */
  derived: Derived;
  options: SyncOptions;
  /** The clock (ms since the epoch). */
  now: () => number;
  /**
   * Whether a progress bar shows the run (`sync` on a terminal): then the success line is logged at
   * debug (the bar's summary says it) and no `sync progress` lines (src/sync/run/progress-log.ts).
   */
  showsProgress: boolean;
}

/** A run that started loading: its session, its id in the ledger, its E6 reader and its field contract. */
export interface LoadContext extends RunContext {
  session: StoreSession;
  runId: number;
  reader: WindowReader<PreparedPage>;
  /** FIELD_CONTRACT over the source's catalogue (contract.ts); undefined with FIELD_CATALOGUE=off. */
  contract: FieldContract | undefined;
}

/** One window of a run: the window and its position in the run's plan (the reader's index). */
export interface WindowJob {
  window: Window;
  index: number;
}

/** Name of the advisory lock one source's runs take exclusively. */
export function sourceLockName(schema: string, source: string): string {
  return `sync:${schema}:${source}`;
}

/** Name of the schema-wide advisory lock: shared by every source's run, exclusive for a rollup rebuild or RETENTION. */
export function schemaLockName(schema: string): string {
  return `sync:${schema}`;
}

/**
 * Builds the run's context: the derived tables once, and the store (PostgreSQL on `deps.pool`
 * unless `deps.store` is given).
 */
export function runContext(deps: SyncDeps, options: SyncOptions): RunContext {
  const source = deps.source ?? DEFAULT_SOURCE;
  const { tables } = deps;
  const qualified = new Tables(deps.schema);
  const derived = new Derived(qualified, tables.rollup);
  const store =
    deps.store ?? new PgSyncStore({ pool: deps.pool, tables: qualified, source, derived, partitionInterval: tables.partitionInterval, log: deps.log });
  return {
    source,
    schema: deps.schema,
    settings: deps.config,
    tables,
    log: deps.log,
    observer: deps.observer,
    store,
    e6: deps.client,
    derived,
    options,
    now: options.now ?? Date.now,
    showsProgress: deps.observer?.showsProgress === true,
  };
}
