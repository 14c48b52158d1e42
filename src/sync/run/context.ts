/**
 * The context of one source's sync run, built once when the run starts and passed first to each of
 * its steps (plan, open-reader, load-window, report, retention) instead of positional parameters:
 * who the run is for, its settings, its store and E6, its logger and observer.
 */
import { DEFAULT_SOURCE, type Config, type SourceConfig, type SyncConfig, type TablesConfig } from '../../config.js';
import type { Logger } from '../../log.js';
import type { FieldContract } from './field-contract.js';
import { pageWalkFor, type PageWalk } from '../derived/page-walk.js';
import type { E6Pages, StoreSession, SyncStore } from '../store/ports.js';
import type { PreparedPage } from '../read/prepare.js';
import type { WindowReader } from '../read/reader.js';
import type { SyncObserver } from './summary.js';
import type { Window } from '../windows.js';

/** What a run of one source is given. */
export interface SyncDeps {
  /** The source's store (the app layer builds it: store/pg/store.ts for PostgreSQL). */
  store: SyncStore;
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

/** The deps of a run of `source` (one of `config.sources`), as `sync`, `verify` and serve's schedules build them. */
export function sourceSyncDeps(
  config: Config,
  source: SourceConfig,
  io: { store: SyncStore; client: E6Pages; log: Logger; observer?: SyncObserver | undefined },
): SyncDeps {
  const { store, client, log, observer } = io;
  return {
    store,
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
  /** The one walk of each page's records that feeds the derived tables, built once per run. */
  walk: PageWalk;
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

/** Builds the run's context. */
export function runContext(deps: SyncDeps, options: SyncOptions): RunContext {
  return {
    source: deps.source ?? DEFAULT_SOURCE,
    schema: deps.schema,
    settings: deps.config,
    tables: deps.tables,
    log: deps.log,
    observer: deps.observer,
    store: deps.store,
    e6: deps.client,
    walk: pageWalkFor(deps.tables.rollup),
    options,
    now: options.now ?? Date.now,
    showsProgress: deps.observer?.showsProgress === true,
  };
}
