/** The context of one source's sync run, built once and passed first to each step (docs/design/sync-run.md). */
import { DEFAULT_SOURCE, type Config, type SourceConfig, type SyncConfig, type TablesConfig } from '../../config.js';
import type { Logger } from '../../log.js';
import type { FieldContract } from './field-contract.js';
import { pageWalkFor, type PageWalk } from '../derived/page-walk.js';
import type { E6Pages, StoreSession, SyncStore } from '../store/ports.js';
import type { PreparedPage } from '../read/prepare.js';
import type { ReadAheads } from './read-ahead.js';
import type { WindowReader } from '../read/reader.js';
import type { SyncObserver } from './summary.js';
import type { Window } from '../windows.js';

/** What a run of one source is given. */
export interface SyncDeps {
  store: SyncStore;
  client: E6Pages;
  /** Default {@link DEFAULT_SOURCE}. */
  source?: string;
  config: SyncConfig;
  /** The schema's, the same for every source. */
  tables: TablesConfig;
  schema: string;
  /** A child carrying `source`. */
  log: Logger;
  observer?: SyncObserver;
}

/** As `sync`, `verify` and serve's schedules build them. */
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
  /** Default: the watermark minus the lookback. */
  from?: Date;
  /** Default: now minus the settle time. */
  to?: Date;
  wait?: boolean;
  /** The window being loaded rolls back; committed windows stay. */
  signal?: AbortSignal;
  now?: () => number;
  /** RETENTION after the run (default true); `sync` of several sources applies it once after all. */
  retention?: boolean;
}

/** One source's run, before it has a session: the same for all its steps. */
export interface RunContext {
  source: string;
  schema: string;
  settings: SyncConfig;
  tables: TablesConfig;
  log: Logger;
  observer: SyncObserver | undefined;
  store: SyncStore;
  e6: E6Pages;
  walk: PageWalk;
  options: SyncOptions;
  /** ms since the epoch. */
  now: () => number;
  /** A progress bar shows the run: no `sync progress` lines, the success line at debug. */
  showsProgress: boolean;
}

/** A run that started loading. */
export interface LoadContext extends RunContext {
  session: StoreSession;
  runId: number;
  reader: WindowReader<PreparedPage>;
  /** The next window's read-ahead while one is written (load-window.ts). */
  readAheads: ReadAheads;
  /** Undefined with FIELD_CATALOGUE=off. */
  contract: FieldContract | undefined;
}

/** `index`: the window's position in the plan (the reader's index). */
export interface WindowJob {
  window: Window;
  index: number;
}

export function sourceLockName(schema: string, source: string): string {
  return `sync:${schema}:${source}`;
}

export function schemaLockName(schema: string): string {
  return `sync:${schema}`;
}

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
