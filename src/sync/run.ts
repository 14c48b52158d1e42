/**
 * One sync run of one source: E6 → PostgreSQL, exactly once.
 *
 * Locks (session advisory locks, src/db/pool.ts):
 * - `sync:<schema>:<source>`, exclusive: one run per source at a time, whatever process runs it.
 * - `sync:<schema>`, shared by every source's run while it loads; taken exclusive by what changes
 *   the tables every source writes: rebuilding records_hourly and RETENTION's partition drops. A
 *   partition is therefore never dropped while a window of any source is being written into it
 *   (its insert would fail for want of a partition, or the window would lose rows it just wrote).
 *
 * Under those locks, the run plans its windows (windows.ts), reads them ahead of
 * the writer as parts that E6 answers each in one complete page (reader.ts, split.ts: exact
 * whatever order E6 returns records in), and loads each window in one transaction: delete what
 * was loaded for it, insert every record of its parts, record it in the ledger and advance the
 * watermark. The partitions of `records` the windows need are created before loading
 * (partitions.ts); RETENTION drops the old ones after the run ({@link applyRetention}).
 */
import { DEFAULT_SOURCE, type SyncConfig, type TablesConfig } from '../config.js';
import { AbortedError, DatabaseError, InvalidArgumentError, coerceError, describeError } from '../errors.js';
import type { Logger } from '../log.js';
import { withAdvisoryLock, withClient, withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import type { AnalyticsClient, AnalyticsPage } from '../upstream/analytics.js';
import { catalogueRecords, Derived, mergeFields, mergeRollupCounts, type FieldStats, type RollupCounts, type WindowFields } from './derived.js';
import { WindowReader } from './reader.js';
import { storablePage } from './storable.js';
import { RecordEstimate } from './split.js';
import {
  abandonStaleRuns,
  clearWindow,
  committedWindows,
  expiredWindows,
  ledgerCounts,
  finishRun,
  insertQuarantined,
  prepareInsertQuarantined,
  prepareInsertRecords,
  type PageRows,
  type QuarantineRow,
  readWatermark,
  recordWindow,
  RecordsCopy,
  startRun,
  supportsCopyFromStdin,
  Tables,
  type RunStatus,
} from './store.js';
import { closeOverCommitted, iso, planWindows, recordTime, runRange, subtractWindows, type Window } from './windows.js';
import { dropExpiredPartitions, ensurePartitions, type DroppedPartition } from './partitions.js';

/** Counts of one committed window. */
export interface WindowSummary {
  window: Window;
  /** Records stored. */
  records: number;
  /** Records jsonb cannot store, kept in `records_quarantine` instead (not in `records`). */
  quarantined: number;
  /** What E6 returned for the window's parts (includes records left to a neighbour part). */
  totalRecords: number;
  /** Leaf pages stored. */
  pages: number;
  /** E6 requests the window took: leaves, overflows that were split, both reads of instants. */
  requests: number;
  /** Overflows split / instants read twice. */
  splits: number;
  instants: number;
  /** Records exactly at the window end (an inclusive toDate), left to the next window, which returns them too. */
  atEnd: number;
  /** Records kept although their event time lies outside the window (RECORD_TIME_FIELD may not be what E6 filters on). */
  outside: number;
  /** Records without a readable event time. */
  untimed: number;
  /** Rows deleted because the window was loaded before. */
  replaced: number;
  durationSeconds: number;
  /**
   * Set when E6 now returned fewer records than were stored for the window: with action `kept`
   * (SYNC_SHRINK=keep) nothing of this fetch was committed and the stored rows are as they were.
   */
  shrunk?: ShrunkWindow;
}

/** A committed window re-read with fewer records than are stored (see SyncConfig.shrink). */
export interface ShrunkWindow {
  window: Window;
  /** Rows stored for the window before this run. */
  stored: number;
  /** Records E6 returned for it now (kept ones, after the boundary rule). */
  returned: number;
  /** What was done: the stored rows kept, or replaced by what E6 returned. */
  action: 'kept' | 'replaced';
}

/** Thrown inside a window's transaction to roll it back when a shrunk window is kept. */
class KeepStoredWindow extends Error {
  constructor(readonly shrunk: ShrunkWindow) {
    super('window kept');
  }
}

/** Hooks for metrics and progress; every one optional, none may throw. */
export interface SyncObserver {
  /**
   * Set when the observer shows the run to a person as it goes (a progress bar) and the command
   * prints the outcome itself: the per-window lines and the success line are then logged at
   * `debug` instead of `info`. Warnings and the failure line keep their levels.
   */
  readonly showsProgress?: boolean;
  runStarted?(event: { runId: number; windows: readonly Window[] }): void;
  pageLoaded?(event: { records: number }): void;
  windowCommitted?(summary: WindowSummary & { watermark: number | undefined }): void;
  /** A re-read window held fewer records than were stored; called before windowCommitted. */
  windowShrunk?(event: ShrunkWindow): void;
  /** Records of a committed window that jsonb cannot store, kept in `records_quarantine` instead; called before windowCommitted. */
  recordsQuarantined?(event: { window: Window; records: number }): void;
  /** An instant (a part of SYNC_MIN_SPLIT that cannot be split) whose two reads disagreed; it is read again or fails the run. */
  unstableInstant?(event: { instant: Window; records: number; attempt: number }): void;
  /** RETENTION dropped these partitions of `records` at the end of the run. */
  partitionsDropped?(event: { partitions: readonly DroppedPartition[] }): void;
  runFinished?(result: SyncResult): void;
}

export type SyncResult =
  | { status: 'locked' }
  | {
      status: RunStatus;
      runId: number;
      range: Window;
      /** Windows planned / committed. */
      windowsPlanned: number;
      windows: number;
      pages: number;
      records: number;
      /** Records kept in `records_quarantine` instead of `records` (jsonb cannot store them). */
      quarantined: number;
      watermark: number | undefined;
      durationSeconds: number;
      error?: Error;
    };

export interface SyncDeps {
  pool: Pool;
  client: AnalyticsClient;
  /** The source's name: the `source` of every row the run reads and writes; default {@link DEFAULT_SOURCE}. */
  source?: string;
  config: SyncConfig;
  /** The layout of the tables every source shares (partitions, retention, derived tables). */
  tables: TablesConfig;
  schema: string;
  /** The source's logger (a child carrying `source`). */
  log: Logger;
  observer?: SyncObserver;
}

/** {@link SyncDeps} with the source named. */
type SourceDeps = SyncDeps & { source: string };

/** Name of the advisory lock one source's runs take exclusively. */
export function sourceLockName(schema: string, source: string): string {
  return `sync:${schema}:${source}`;
}

/** Name of the schema-wide advisory lock: shared by every source's run, exclusive for a rollup rebuild or RETENTION. */
export function schemaLockName(schema: string): string {
  return `sync:${schema}`;
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
   * passes false and applies it once, after all of them ({@link applyRetention}).
   */
  retention?: boolean;
}

/**
 * Runs one sync of `deps.source`. Never throws for upstream or database faults: they end the run
 * with status `failed` and the error, after the windows committed so far (the next run completes the data).
 *
 * @returns `{ status: 'locked' }` when another run of the source holds its lock, or a rollup
 *   rebuild or RETENTION holds the schema's (and `wait` is false);
 *   otherwise the run's outcome: `succeeded`, `failed` or `interrupted` (signal).
 * @throws {InvalidArgumentError} before anything is loaded when `from` ≥ `to` or `to` is later than
 *   now minus SYNC_SETTLE; {@link AbortedError} when `signal` aborts while waiting for the lock
 *   (`wait`), before the run starts; otherwise only when the database cannot be reached to take
 *   the lock or record the run.
 */
export async function runSync(given: SyncDeps, options: SyncOptions = {}): Promise<SyncResult> {
  const deps: SourceDeps = { ...given, source: given.source ?? DEFAULT_SOURCE };
  const tables = new Tables(deps.schema);
  const locked = { status: 'locked' as const };
  return withClient(deps.pool, async (db) => {
    // With the signal, a --wait for the lock ends on SIGINT/SIGTERM instead of blocking in the database.
    const lockOptions = { wait: options.wait ?? false, ...(options.signal ? { signal: options.signal } : {}) };
    const ran = await withAdvisoryLock(db, sourceLockName(deps.schema, deps.source), lockOptions, async (): Promise<SyncResult> => {
      // Here rather than when serve and sync migrate: taken the way the run takes its locks (a --wait
      // a signal can end, a serve tick that skips when busy), and exclusive, so no source's window is
      // being loaded while records_hourly is rebuilt.
      const derived = new Derived(tables, deps.tables.rollup);
      if (!(await derived.isRollupCurrent(db))) {
        const rebuilt = await withAdvisoryLock(db, schemaLockName(deps.schema), lockOptions, () =>
          withTransaction(db, () => derived.ensureRollup(db, deps.log)),
        );
        if (!rebuilt.acquired) return locked;
      }
      const loaded = await withAdvisoryLock(db, schemaLockName(deps.schema), { ...lockOptions, shared: true }, () => runLocked(db, tables, deps, options));
      if (!loaded.acquired) return locked;
      const result = loaded.value;
      if (options.retention !== false && result.status !== 'locked' && result.status !== 'interrupted' && deps.tables.retentionMs !== undefined) {
        const now = (options.now ?? Date.now)();
        const applied = await applyRetention(db, deps, [result.runId], now - deps.tables.retentionMs, { wait: false });
        if (!applied) deps.log.debug({ runId: result.runId }, "retention left to a later run: another source's sync is running");
      }
      return result;
    });
    return ran.acquired ? ran.value : locked;
  });
}

async function runLocked(db: PoolClient, t: Tables, deps: SourceDeps, options: SyncOptions): Promise<SyncResult> {
  const { config, log, observer, source } = deps;
  const started = performance.now();
  const now = (options.now ?? Date.now)();
  const derived = new Derived(t, deps.tables.rollup);
  await withTransaction(db, () => derived.ensureTypedViewCurrent(db, log));

  const abandoned = await abandonStaleRuns(db, t, source);
  if (abandoned > 0) log.warn({ runs: abandoned }, 'marked runs left running by a process that died as abandoned (or whose end could not be recorded)');

  const watermarkBefore = await readWatermark(db, t, source);
  const range = runRange({
    from: options.from?.getTime(),
    to: options.to?.getTime(),
    watermark: watermarkBefore,
    startDate: config.startDate,
    lookbackMs: config.lookbackMs,
    settleMs: config.settleMs,
    now,
  });
  if (options.from !== undefined && range.start >= range.end) {
    throw new InvalidArgumentError(`--from ${iso(range.start)} must be before the end of the range ${iso(range.end)} (--to, or now minus SYNC_SETTLE)`);
  }
  // Loading windows that have not happened yet would move the watermark past data still to come.
  const latest = now - config.settleMs;
  if (range.end > latest) {
    throw new InvalidArgumentError(
      `--to ${iso(range.end)} is later than now minus SYNC_SETTLE (${iso(latest)}); windows in the future would be committed empty`,
    );
  }
  const aligned = planWindows(range.start, range.end, config.windowMs);
  // RETENTION dropped the records of expired windows on purpose: only an explicit --from reloads them.
  const planned =
    aligned.length === 0 || options.from !== undefined
      ? aligned
      : subtractWindows(aligned, await expiredWindows(db, t, source, { start: aligned[0]!.start, end: aligned[aligned.length - 1]!.end }));
  const windows =
    planned.length === 0
      ? []
      : closeOverCommitted(planned, await committedWindows(db, t, source, { start: planned[0]!.start, end: planned[planned.length - 1]!.end }));
  // COPY where the server takes it (PostgreSQL); the embedded database inserts page by page.
  const copy = await supportsCopyFromStdin(db);
  const runId = await startRun(db, t, source, range);
  log.info(
    { runId, from: iso(range.start), to: iso(range.end), windows: windows.length, watermark: watermarkBefore === undefined ? null : iso(watermarkBefore) },
    'sync run started',
  );
  observer?.runStarted?.({ runId, windows });

  let committed = 0;
  let pages = 0;
  let records = 0;
  let quarantined = 0;
  let watermark = watermarkBefore;
  // With a progress bar on the screen, a line per window would only push the bar around.
  const windowLevel = observer?.showsProgress === true ? 'debug' : 'info';
  let status: RunStatus = 'succeeded';
  let error: Error | undefined;

  const timeField = config.recordTimeField;
  const reader = new WindowReader(deps.client, windows, {
    pageSize: config.pageSize,
    concurrency: config.concurrency,
    minSplitMs: config.minSplitMs,
    instantAttempts: config.windowAttempts,
    prepare: (page, part) => preparePage(page, part, timeField, derived, deps.tables.rollup.catalogue),
    timesOf: (prepared) => prepared.rows.eventTimes,
    eventTime: (record) => (timeField ? recordTime(record, timeField) : undefined),
    estimate: new RecordEstimate(windows.length === 0 ? [] : await ledgerCounts(db, t, source, windows[0]!.start, windows[windows.length - 1]!.end)),
    onUnstableInstant: (event) => {
      log.warn(
        {
          runId,
          instant: [iso(event.instant.start), iso(event.instant.end)],
          records: event.records,
          attempt: event.attempt,
          maxAttempts: config.windowAttempts,
        },
        'two reads of an instant holding more than a page returned different records (E6 order not stable); reading it again',
      );
      observer?.unstableInstant?.(event);
    },
    ...(options.signal ? { signal: options.signal } : {}),
  });
  try {
    // Before any window: a row no partition takes would fail its window (there is no DEFAULT partition).
    const createdPartitions = await ensurePartitions(
      db,
      t,
      windows.map((w) => w.start),
      deps.tables.partitionInterval,
    );
    if (createdPartitions.length > 0) {
      log.info({ runId, partitions: createdPartitions.map((p) => ({ name: p.name, from: iso(p.start), to: iso(p.end) })) }, 'created partitions of records');
    }
    for (let i = 0; i < windows.length; i++) {
      if (options.signal?.aborted) throw new AbortedError('sync interrupted by a signal');
      const window = windows[i]!;
      const summary = await loadWindowOrKeep(db, t, deps, runId, window, i, reader, copy);
      committed++;
      pages += summary.pages;
      records += summary.records;
      quarantined += summary.quarantined;
      watermark = summary.watermark;
      log[windowLevel](
        {
          runId,
          window: [iso(window.start), iso(window.end)],
          records: summary.records,
          totalRecords: summary.totalRecords,
          pages: summary.pages,
          replaced: summary.replaced,
          ...(summary.quarantined ? { quarantined: summary.quarantined } : {}),
          ...(summary.atEnd ? { atEnd: summary.atEnd } : {}),
          ...(summary.outside ? { outside: summary.outside } : {}),
          ...(summary.untimed ? { untimed: summary.untimed } : {}),
          requests: summary.requests,
          ...(summary.splits ? { splits: summary.splits } : {}),
          ...(summary.instants ? { instants: summary.instants } : {}),
          durationMs: Math.round(summary.durationSeconds * 1000),
        },
        summary.shrunk?.action === 'kept' ? 'window kept as stored' : 'window committed',
      );
      if (summary.shrunk) {
        const { stored: before, returned, action } = summary.shrunk;
        log.warn(
          { runId, window: [iso(window.start), iso(window.end)], stored: before, returned },
          action === 'kept'
            ? 'E6 now returns fewer records for this window than are stored (retention or deletion upstream); the stored rows are kept (SYNC_SHRINK=keep)'
            : 'E6 now returns fewer records for this window than were stored; they were replaced (SYNC_SHRINK=replace)',
        );
        observer?.windowShrunk?.(summary.shrunk);
      }
      if (summary.quarantined > 0) {
        log.warn(
          { runId, window: [iso(window.start), iso(window.end)], quarantined: summary.quarantined },
          'E6 returned records PostgreSQL jsonb cannot store; they are kept whole in records_quarantine (payload_text, json_path, reason) and the rest of the window is committed',
        );
        observer?.recordsQuarantined?.({ window, records: summary.quarantined });
      }
      if (summary.outside > 0) {
        log.warn(
          { runId, window: [iso(window.start), iso(window.end)], outside: summary.outside },
          'E6 returned records whose RECORD_TIME_FIELD lies outside the window; they are kept, but check that the field is the event time E6 filters on',
        );
      }
      observer?.windowCommitted?.(summary);
    }
    const rollupRetentionMs = deps.tables.rollup.retentionMs;
    if (rollupRetentionMs !== undefined) {
      // In a transaction: records_daily_distinct's days are recomputed under locks held until its commit.
      const pruned = await withTransaction(db, () => derived.pruneRollup(db, now - rollupRetentionMs));
      if (pruned > 0) log.info({ runId, rows: pruned, before: iso(now - rollupRetentionMs) }, 'deleted records_hourly buckets older than ROLLUP_RETENTION');
    }
  } catch (thrown) {
    error = coerceError(thrown);
    status = error instanceof AbortedError || options.signal?.aborted ? 'interrupted' : 'failed';
  } finally {
    reader.close();
  }

  const durationSeconds = (performance.now() - started) / 1000;
  const ending = { status, windows: committed, pages, records, ...(error ? { error: describeError(error) } : {}) };
  try {
    await finishRun(db, t, runId, ending);
  } catch (recording) {
    // The run's own connection is gone (killed, a failover): record its end on a fresh one, so the
    // row does not stay `running` for the next run to call abandoned. If that fails too, the
    // database is unreachable and this throws as before.
    if (error === undefined) throw recording;
    await withClient(deps.pool, (fresh) => finishRun(fresh, t, runId, ending));
  }
  const result: SyncResult = {
    status,
    runId,
    range,
    windowsPlanned: windows.length,
    windows: committed,
    pages,
    records,
    quarantined,
    watermark,
    durationSeconds,
    ...(error ? { error } : {}),
  };
  const summaryLine = {
    runId,
    status,
    windows: committed,
    windowsPlanned: windows.length,
    pages,
    records,
    quarantined,
    durationMs: Math.round(durationSeconds * 1000),
    recordsPerSecond: durationSeconds > 0 ? Math.round(records / durationSeconds) : 0,
    watermark: watermark === undefined ? null : iso(watermark),
    ...(error ? { err: error } : {}),
  };
  if (status === 'succeeded') log[windowLevel](summaryLine, 'sync run succeeded');
  else if (status === 'interrupted') log.warn(summaryLine, 'sync run interrupted; committed windows are kept, the next run completes the data');
  else log.error(summaryLine, 'sync run failed; committed windows are kept, the next run completes the data');
  observer?.runFinished?.(result);
  return result;
}

/**
 * RETENTION (global: it drops whole partitions, which hold every source's rows) after runs: under
 * the schema's lock taken exclusively, so no source's window is being written meanwhile, drops the
 * partitions wholly older than `cutoff` ({@link dropExpiredPartitions}; partitions holding windows
 * of `runIds` are kept), logs and reports them. A failure is logged, not thrown: the runs' windows
 * are committed, and the next run tries again.
 *
 * @param deps.log the logger of the invocation (retention is about no one source).
 * @param lock.wait wait for the schema's lock (bounded by `lock.signal`); false: give up at once
 *   when a source's run holds it.
 * @returns whether the lock was taken (and retention applied or its failure logged).
 * @throws {AbortedError} when `lock.signal` aborts the wait; the database's error when the lock
 *   cannot be taken.
 */
export async function applyRetention(
  db: PoolClient,
  deps: Pick<SyncDeps, 'schema' | 'log' | 'observer'>,
  runIds: readonly number[],
  cutoff: number,
  lock: { wait: boolean; signal?: AbortSignal },
): Promise<boolean> {
  const t = new Tables(deps.schema);
  const locked = await withAdvisoryLock(db, schemaLockName(deps.schema), lock, () => dropLogged(db, t, deps, runIds, cutoff));
  return locked.acquired;
}

async function dropLogged(db: PoolClient, t: Tables, deps: Pick<SyncDeps, 'log' | 'observer'>, runIds: readonly number[], cutoff: number): Promise<void> {
  try {
    const dropped = await dropExpiredPartitions(db, t, cutoff, runIds);
    if (dropped.length === 0) return;
    deps.log.info(
      {
        runIds,
        cutoff: iso(cutoff),
        partitions: dropped.map((p) => ({ name: p.name, from: iso(p.start), to: iso(p.end), windows: p.windows })),
      },
      'retention dropped partitions of records wholly older than RETENTION; their windows are marked expired',
    );
    deps.observer?.partitionsDropped?.({ partitions: dropped });
  } catch (err) {
    deps.log.warn({ runIds, err: coerceError(err) }, 'retention failed; nothing was dropped, the next run tries again');
  }
}

/**
 * Loads one window ({@link loadWindow}); a shrunk window kept as stored (SYNC_SHRINK=keep) comes
 * back as a summary of nothing committed.
 */
async function loadWindowOrKeep(
  db: PoolClient,
  t: Tables,
  deps: SourceDeps,
  runId: number,
  window: Window,
  index: number,
  reader: WindowReader<PreparedPage>,
  copy: boolean,
): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  try {
    return await loadWindow(db, t, deps, runId, window, index, reader, copy);
  } catch (err) {
    if (!(err instanceof KeepStoredWindow)) throw err;
    // Rolled back: the rows and the ledger entry stored before are as they were.
    const stats = reader.stats(index);
    return {
      window,
      records: 0,
      quarantined: 0,
      totalRecords: err.shrunk.returned,
      pages: 0,
      requests: stats.requests,
      splits: stats.splits,
      instants: stats.instants,
      atEnd: 0,
      outside: 0,
      untimed: 0,
      replaced: 0,
      durationSeconds: (performance.now() - started) / 1000,
      shrunk: err.shrunk,
      watermark: await readWatermark(db, t, deps.source),
    };
  } finally {
    reader.drop(index);
  }
}

/**
 * What is held of one fetched page until the writer stores it: the body's text, the positions of
 * the records to store and their event times, and the counts. The parsed records are let go (they
 * are kept only for a page that came without its text).
 */
interface PreparedPage {
  totalRecords: number;
  totalPages: number;
  /** Records on the page (E6's `data` length), kept or not. */
  length: number;
  rows: PageRows;
  /** Records of the part that jsonb cannot store, kept (boundary rule applied) for `records_quarantine`. */
  quarantine: QuarantineRow[];
  atEnd: number;
  outside: number;
  untimed: number;
  /** Top-level fields of the kept records, for record_fields. */
  fields: WindowFields;
  /** The kept records' rollup groups (undefined with ROLLUP_DIMENSIONS=off). */
  rollup: RollupCounts | undefined;
}

/**
 * Reads each record's event time (RECORD_TIME_FIELD) and decides which records a part keeps and
 * where ({@link storablePage}: records jsonb cannot store go to the quarantine): all but those
 * exactly at the part's end, which an inclusive toDate returns here and again, by
 * startDate, with the next part. A record whose time lies outside the part is kept (E6 returned
 * it for this part), and counted: RECORD_TIME_FIELD may not be the field E6 filters on, or may
 * lack a zone.
 */
function preparePage(page: AnalyticsPage, window: Window, timeField: string[] | undefined, derived: Derived, catalogue: boolean): PreparedPage {
  const keep: number[] = [];
  const eventTimes: (number | null)[] = [];
  const quarantine: QuarantineRow[] = [];
  const storable = storablePage(page);
  const unstorable = new Map((storable.quarantined ?? []).map((q) => [q.index, q]));
  let atEnd = 0;
  let outside = 0;
  let untimed = 0;
  for (let i = 0; i < page.data.length; i++) {
    const ms = timeField ? recordTime(page.data[i]!, timeField) : undefined;
    if (ms === window.end) {
      atEnd++;
      continue;
    }
    if (ms !== undefined && (ms < window.start || ms > window.end)) outside++;
    if (timeField && ms === undefined) untimed++;
    const bad = unstorable.get(i);
    if (bad !== undefined) {
      quarantine.push({ text: bad.text, path: bad.path, reason: bad.reason, eventTime: ms ?? null });
      continue;
    }
    keep.push(i);
    eventTimes.push(ms === undefined ? null : ms);
  }
  const rows: PageRows =
    storable.text === undefined
      ? { records: page.data, keep, eventTimes }
      : { text: storable.text, ...(storable.bytes && { bytes: storable.bytes }), keep, eventTimes };
  // FIELD_CATALOGUE=off: no field statistics to gather (Derived.addWindowRecords would ignore them).
  const fields: WindowFields = catalogue ? catalogueRecords(page.data, keep, eventTimes) : new Map<string, FieldStats>();
  const rollup = derived.countRollup(page.data, keep, eventTimes);
  return { totalRecords: page.totalRecords, totalPages: page.totalPages, length: page.data.length, rows, quarantine, atEnd, outside, untimed, fields, rollup };
}

/**
 * Loads one window in one transaction from its leaves (reader.ts); any throw rolls it back whole,
 * {@link KeepStoredWindow} included (a shrunk window that is kept). With `copy`, the window's
 * records stream into one COPY as their pages come ({@link RecordsCopy}) and its quarantined
 * records are inserted after it; else each page is one insert, pipelined with the next page.
 */
async function loadWindow(
  db: PoolClient,
  t: Tables,
  deps: SourceDeps,
  runId: number,
  window: Window,
  index: number,
  reader: WindowReader<PreparedPage>,
  copy: boolean,
): Promise<WindowSummary & { watermark: number | undefined }> {
  const started = performance.now();
  return withTransaction(db, async () => {
    const derived = new Derived(t, deps.tables.rollup);
    const replaced = await clearWindow(db, t, deps.source, window, derived);
    let stored = 0;
    let fetched = 0;
    let quarantined = 0;
    let pages = 0;
    let atEnd = 0;
    let outside = 0;
    let untimed = 0;
    const fields: WindowFields = new Map();
    const rollup: RollupCounts = { exact: true, hourly: new Map(), distinct: new Map() };
    const copying = copy ? new RecordsCopy(db, t, deps.source, window, runId) : undefined;
    const isolated: QuarantineRow[] = [];
    // One leaf's insert runs in the database while the next leaves are fetched and prepared here.
    // At most one insert is outstanding: it is awaited before the next one is sent, so a failure
    // surfaces before anything after it, and memory grows by one page.
    let inserting: { done: Promise<void>; records: number } | undefined;
    const settle = async (): Promise<void> => {
      if (inserting === undefined) return;
      const { done, records } = inserting;
      inserting = undefined;
      await done;
      stored += records;
      deps.observer?.pageLoaded?.({ records });
    };
    try {
      for await (const leaf of reader.leaves(index)) {
        const current = leaf.page;
        pages++;
        fetched += current.length;
        atEnd += current.atEnd;
        outside += current.outside;
        untimed += current.untimed;
        mergeFields(fields, current.fields);
        if (current.rollup !== undefined) mergeRollupCounts(rollup, current.rollup);
        quarantined += current.quarantine.length;
        if (copying !== undefined) {
          await copying.write(current.rows);
          isolated.push(...current.quarantine);
          stored += current.rows.keep.length;
          deps.observer?.pageLoaded?.({ records: current.rows.keep.length });
          continue;
        }
        const query = prepareInsertRecords(t, deps.source, window, runId, current.rows);
        const isolating = prepareInsertQuarantined(t, deps.source, window, runId, current.quarantine);
        await settle();
        const done = Promise.all([query, isolating].filter((q) => q !== undefined).map((q) => db.query(q.text, q.values))).then(() => undefined);
        done.catch(() => undefined); // awaited by settle(); never an unhandled rejection meanwhile
        inserting = { done, records: current.rows.keep.length };
      }
    } catch (err) {
      // The COPY's failure (earlier in order) wins over a read failure; either way it is cancelled,
      // so the connection can roll the window back.
      throw (await copying?.abort(coerceError(err))) ?? err;
    } finally {
      // An outstanding insert's failure (earlier in order) wins over a read failure.
      await settle();
    }
    if (copying !== undefined) {
      const copied = await copying.end();
      if (copied !== stored) throw new DatabaseError(`COPY into records stored ${copied} rows of the ${stored} sent for the window`);
      await insertQuarantined(db, t, deps.source, window, runId, isolated);
    }
    const stats = reader.stats(index);
    // Quarantined records count as stored for the shrink check: E6 still returns them.
    const shrunk: ShrunkWindow | undefined =
      stored + quarantined < replaced ? { window, stored: replaced, returned: stored, action: deps.config.shrink === 'keep' ? 'kept' : 'replaced' } : undefined;
    if (shrunk?.action === 'kept') throw new KeepStoredWindow(shrunk);
    // Once the window's records are all in: one statement per window, not one per page.
    await derived.addWindowRollup(db, deps.source, window, rollup);
    await derived.addWindowRecords(db, deps.source, window, fields, deps.log);
    const watermark = await recordWindow(db, t, deps.source, window, { recordCount: stored, totalRecords: fetched, pages: Math.max(1, pages), runId });
    return {
      window,
      records: stored,
      quarantined,
      totalRecords: fetched,
      pages,
      requests: stats.requests,
      splits: stats.splits,
      instants: stats.instants,
      atEnd,
      outside,
      untimed,
      replaced,
      durationSeconds: (performance.now() - started) / 1000,
      ...(shrunk ? { shrunk } : {}),
      watermark,
    };
  });
}
