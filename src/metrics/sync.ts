/**
 * The metrics of each source's sync runs and their side effects, fed by the run's SyncObserver and
 * by serve's scheduler. A source's series exist at 0 from its first observer on, so increase() and
 * the alerts see the first increment.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SyncObserver, SyncResult } from '../sync/run/run.js';
import { failureReason } from '../failures.js';
import { recordFieldsGauge, recordFieldsNewCounter, setRecordFields } from './record-fields.js';

/** Why a tick did not run: the previous run still going, or the lock held by another process. */
export type SkipReason = 'running' | 'locked';

const SKIP_REASONS: readonly SkipReason[] = ['running', 'locked'];

export class SyncMetrics {
  readonly runs: Counter<'source'>;
  readonly failures: Counter<'source'>;
  readonly errors: Counter<'source' | 'reason'>;
  readonly skipped: Counter<'source' | 'reason'>;
  readonly lastSuccess: Gauge<'source'>;
  readonly records: Counter<'source'>;
  readonly pages: Counter<'source'>;
  readonly windows: Counter<'source'>;
  readonly windowsShrunk: Counter<'source' | 'action'>;
  readonly windowsShort: Counter<'source'>;
  readonly recordsQuarantined: Counter<'source'>;
  readonly recordsOutsideWindow: Counter<'source'>;
  readonly effectivePageSize: Gauge<'source'>;
  readonly unstableInstants: Counter<'source'>;
  readonly repeatedPages: Counter<'source' | 'outcome'>;
  readonly windowsParked: Gauge<'source'>;
  readonly partitionsDropped: Counter;
  readonly duration: Gauge<'source'>;
  readonly watermark: Gauge<'source'>;
  readonly running: Gauge<'source'>;
  readonly recordFieldsNew: Counter<'source'>;
  readonly recordFields: Gauge<'source' | 'typed_view'>;
  readonly lockWaits: Counter<'source'>;
  readonly #sources = new Set<string>();

  constructor(registry: Registry, prefix: string) {
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> =>
      new Counter({ name: `${prefix}${name}`, help, labelNames, registers: [registry] });
    const gauge = (name: string, help: string): Gauge<'source'> =>
      new Gauge({ name: `${prefix}${name}`, help, labelNames: ['source'] as const, registers: [registry] });
    const source = ['source'] as const;
    this.runs = counter('sync_runs_total', 'Sync runs finished (succeeded, failed or interrupted).', source);
    this.failures = counter('sync_failures_total', 'Sync runs that failed.', source);
    this.errors = counter(
      'sync_errors_total',
      'Sync runs that failed, by the reason of the error that ended them (the failures of sync_failures_total, broken down): ' +
        'network, timeout, http_<status>, invalid_json, content_type, invalid_envelope, inconsistent_page, content_encoding, token, inconsistent_window, database, other.',
      ['source', 'reason'],
    );
    this.skipped = counter(
      'sync_skipped_total',
      "Scheduled sync ticks skipped, by reason: running (this process's previous run of the source was still going) or " +
        "locked (another process held the source's sync lock, or a rollup rebuild or RETENTION the schema's).",
      ['source', 'reason'],
    );
    this.lastSuccess = gauge('sync_last_success_timestamp_seconds', 'Unix time at which the last successful sync run finished.');
    this.records = counter('sync_records_total', 'Analytics records written to the database (re-loaded windows count again).', source);
    this.pages = counter('sync_pages_total', 'E6 pages loaded into the database.', source);
    this.windows = counter('sync_windows_total', 'Windows committed to the database.', source);
    this.recordsQuarantined = counter(
      'sync_records_quarantined_total',
      'Analytics records of committed windows that PostgreSQL cannot store (jsonb: U+0000, an unpaired surrogate, nesting too deep; or refused by the database for a data reason, with its SQLSTATE), ' +
        'kept as sent in the table records_quarantine (payload_text; json_path and reason, or sqlstate and message) instead of records (re-loaded windows count again).',
      source,
    );
    this.recordsOutsideWindow = counter(
      'sync_records_outside_window_total',
      'Analytics records stored in a window that E6 returned them for although their RECORD_TIME_FIELD lies outside it ' +
        '(E6 filters on another time, or the field lacks a zone); re-loaded windows count again.',
      source,
    );
    this.effectivePageSize = gauge(
      'upstream_effective_page_size',
      'Records per E6 page the source really serves, once a page held fewer than SYNC_PAGE_SIZE asked and its totalRecords (an upstream that clamps the page size); ' +
        'absent while no page was short. Short pages are never taken as complete: the sync reads at this size.',
    );
    const windows = windowMetrics(counter, gauge);
    this.windowsShrunk = windows.windowsShrunk;
    this.windowsShort = windows.windowsShort;
    this.unstableInstants = windows.unstableInstants;
    this.repeatedPages = windows.repeatedPages;
    this.windowsParked = windows.windowsParked;
    this.partitionsDropped = counter(
      'retention_partitions_dropped_total',
      'Partitions of the table records dropped by RETENTION (their whole range older than now minus RETENTION); their windows are marked expired in sync_windows.',
      [],
    );
    this.duration = gauge('sync_duration_seconds', 'Duration of the last finished sync run, in seconds.');
    this.watermark = gauge('sync_watermark_timestamp_seconds', 'Unix time up to which the analytics records are loaded without a gap (the sync watermark).');
    this.running = gauge('sync_running', 'Whether a sync run is in progress (1) or not (0).');
    this.recordFieldsNew = recordFieldsNewCounter(registry, prefix);
    this.recordFields = recordFieldsGauge(registry, prefix);
    this.lockWaits = counter(
      'database_lock_waits_total',
      'Statements of a sync run that waited on a lock for more than 10 seconds (each also logged once at warn, ' +
        'naming the relation, the lock mode and the blocking process); DATABASE_LOCK_TIMEOUT bounds the wait.',
      source,
    );
  }

  /** The observer of one source's runs; the first call creates its series at 0. */
  observer(source: string): SyncObserver {
    const s = { source };
    if (!this.#sources.has(source)) {
      this.#sources.add(source);
      this.#startSeries(source);
    }
    return {
      runStarted: () => this.running.set(s, 1),
      windowCommitted: (w) => {
        this.windows.inc(s);
        this.pages.inc(s, w.pages);
        this.records.inc(s, w.records);
        this.recordsOutsideWindow.inc(s, w.outside);
        if (w.watermark !== undefined) this.watermark.set(s, w.watermark / 1000);
      },
      windowShrunk: (w) => this.windowsShrunk.inc({ source, action: w.action }),
      windowShort: () => this.windowsShort.inc(s),
      recordsQuarantined: (e) => this.recordsQuarantined.inc(s, e.records),
      fieldsChanged: (e) => this.recordFieldsNew.inc(s, e.changes.length),
      unstableInstant: () => this.unstableInstants.inc(s),
      repeatedPages: (e) => this.repeatedPages.inc({ source, outcome: e.outcome }, e.repeated.length),
      pageSizeClamped: (e) => this.effectivePageSize.set(s, e.served),
      partitionsDropped: (e) => this.partitionsDropped.inc(e.partitions.length),
      lockWaited: () => this.lockWaits.inc(s),
      runFinished: (result: SyncResult) => this.#recordRun(source, result),
    };
  }

  /** Every series at 0 (sync_errors_total's reasons appear with their first failure). */
  #startSeries(source: string): void {
    const s = { source };
    for (const counter of [
      this.runs,
      this.failures,
      this.records,
      this.pages,
      this.windows,
      this.recordsQuarantined,
      this.unstableInstants,
      this.recordsOutsideWindow,
      this.recordFieldsNew,
      this.lockWaits,
    ])
      counter.inc(s, 0);
    for (const gauge of [this.running, this.lastSuccess, this.duration, this.watermark, this.windowsParked]) gauge.set(s, 0);
    for (const action of ['kept', 'replaced'] as const) this.windowsShrunk.inc({ source, action }, 0);
    for (const outcome of ['stored', 'parked'] as const) this.repeatedPages.inc({ source, outcome }, 0);
    for (const reason of SKIP_REASONS) this.skipped.inc({ source, reason }, 0);
  }

  /** A source a reload removed: added again, its series start afresh. */
  forget(source: string): void {
    this.#sources.delete(source);
  }

  /** From the ledger: at start and after a locked tick. */
  setParkedWindows(source: string, count: number): void {
    this.windowsParked.set({ source }, count);
  }

  /** From the database at start; `ms` epoch milliseconds. */
  setWatermark(source: string, ms: number | undefined): void {
    if (ms !== undefined) this.watermark.set({ source }, ms / 1000);
  }

  /** A run that could not be recorded (the database down), counted as a failed run under its reason. */
  recordUnrecordedFailure(source: string, durationSeconds: number, err: unknown): void {
    const s = { source };
    this.running.set(s, 0);
    this.runs.inc(s);
    this.failures.inc(s);
    this.errors.inc({ source, reason: failureReason(err) });
    this.duration.set(s, durationSeconds);
  }

  #recordRun(source: string, result: SyncResult): void {
    const s = { source };
    this.running.set(s, 0);
    if (result.status === 'locked') return;
    if (result.parkedWindows !== undefined) this.windowsParked.set(s, result.parkedWindows);
    if (result.fields !== undefined) setRecordFields(this.recordFields, source, result.fields);
    this.runs.inc(s);
    this.duration.set(s, result.durationSeconds);
    if (result.status === 'succeeded') this.lastSuccess.set(s, Date.now() / 1000);
    else if (result.status === 'failed') {
      this.failures.inc(s);
      this.errors.inc({ source, reason: failureReason(result.error) });
    }
  }
}

type CounterOf = <L extends string>(name: string, help: string, labelNames: readonly L[]) => Counter<L>;

/** The metrics of windows that were not plain loads: shrunk, short, unstable, repeating pages, parked. */
function windowMetrics(counter: CounterOf, gauge: (name: string, help: string) => Gauge<'source'>) {
  const source = ['source'] as const;
  return {
    windowsShrunk: counter(
      'sync_windows_shrunk_total',
      'Committed windows re-read without some of their stored records (retention or deletion upstream), by action: kept beside what E6 returns now (SYNC_SHRINK=keep) or replaced (fewer records than stored).',
      ['source', 'action'],
    ),
    windowsShort: counter(
      'sync_windows_short_total',
      "Windows committed short: E6's totalRecords claimed more records than it served, identically on every read; the records served are stored (sync_windows.short_claimed).",
      source,
    ),
    unstableInstants: counter(
      'sync_unstable_instants_total',
      'Reads of an instant (a slice of SYNC_MIN_SPLIT holding more than a page of records) whose two reads disagreed; ' +
        'such an instant is read again, and its window is parked after SYNC_WINDOW_ATTEMPTS.',
      source,
    ),
    repeatedPages: counter(
      'sync_repeated_pages_total',
      'E6 pages that copied an earlier page of the same read of an instant record for record, by outcome: stored (read again at ' +
        'another page size the records lined up: they really repeat) or parked (page 1 came back again: E6 or a proxy ignores pageNumber).',
      ['source', 'outcome'],
    ),
    windowsParked: gauge(
      'sync_windows_parked',
      'Windows of the source parked in the ledger (sync_windows.status parked, not expired): not loadable for a reason of their own ' +
        '(a response over UPSTREAM_MAX_BODY, E6 contradicting itself after SYNC_WINDOW_ATTEMPTS, a paging limit, pages that repeat, SYNC_WINDOW_MAX_REQUESTS spent); the watermark passed them. Read from the ledger at each run end, at serve start and after a tick skipped as locked.',
    ),
  };
}
