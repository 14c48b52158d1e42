/**
 * What a sync run needs from the outside, by role: E6 pages ({@link E6Pages}), and a store whose
 * session offers locks, the {@link Ledger}, {@link SchemaMaintenance} and one transaction per
 * window ({@link WindowWriter}). The run, the audit and their steps depend on these only: the
 * app layer builds the PostgreSQL store (store/pg/) and hands it over; unit tests use an
 * in-memory one. test/integration/store-contract.test.ts holds both to one contract.
 */
import type { AnalyticsPage, PageQuery } from '../../upstream/analytics.js';
import type { WindowFields } from '../derived/fields/catalogue.js';
import type { RollupCounts } from '../derived/rollup/counts.js';
import type { FieldChange, KnownFields } from '../derived/fields/schema-changes.js';
import type { TextBag } from '../membership/record-keys.js';
import type { PageRows, QuarantineRow } from '../rows/page-rows.js';
import type { StoredWindow, Window } from '../windows.js';

export type { StoredWindow } from '../windows.js';
export type { TextBag } from '../membership/record-keys.js';

/** E6 (API reference, E6): one request per call, its retries and rate limit inside. */
export interface E6Pages {
  /** @throws what the analytics client throws after its retries, or AbortedError on `options.signal`. */
  fetchPage(query: PageQuery, options?: { signal?: AbortSignal }): Promise<AnalyticsPage>;
}

/** How to take an advisory lock: wait or give up at once; `signal` ends a wait (AbortedError); `shared` mode. */
export interface LockOptions {
  wait: boolean;
  signal?: AbortSignal;
  shared?: boolean;
}

/** A lock's outcome: `fn`'s value when it was taken. */
export type Locked<T> = { acquired: true; value: T } | { acquired: false };

export type RunStatus = 'succeeded' | 'failed' | 'interrupted';

/** The end of a run as recorded. `error` is a message without secrets. */
export interface RunEnding {
  status: RunStatus;
  windows: number;
  pages: number;
  records: number;
  error?: string;
}

/** What a window's load counted, recorded in the ledger with it. */
export interface WindowCounts {
  recordCount: number;
  /** E6's count for the window, less what the boundary sets left to the slice before (the audit's `seen`). */
  totalRecords: number;
  /** Leaf pages (at least 1). */
  pages: number;
}

/** What a window's writes stored ({@link WindowWriter.end}). */
export interface WindowStored {
  records: number;
  /** Records the database refused for a data reason, quarantined with `sqlstate` and `message`. */
  refused: readonly QuarantineRow[];
  /** After `clear(true)`: what was stored before that this read did not return, stored again. */
  kept: { records: number; quarantined: number };
}

/** A committed window with E6's count for it (the estimate of later windows' slices). */
export type LedgerCount = Window & { totalRecords: number };

/** A parked window as the ledger holds it. */
export interface ParkedWindow extends Window {
  /** The error's text, sanitised. */
  reason: string;
  /** When it was last parked (ms). */
  parkedAt: number;
  /** Records still stored for it from a load before it was parked. */
  recordCount: number;
  runId: number;
  /** RETENTION dropped its partition since: not loaded again but by `--from`. */
  expired: boolean;
}

/** One partition of `records`: its table name (unqualified) and its range of window_start. */
export interface Partition extends Window {
  name: string;
}

/** A partition retention dropped, with the ledger windows it marked expired. */
export interface DroppedPartition extends Partition {
  windows: number;
}

/** The storage of one source's runs in one schema. */
export interface SyncStore {
  /**
   * Runs `fn` on a session of its own (one connection: its locks end with it).
   *
   * @throws what opening the session throws (the database unreachable), or what `fn` throws.
   */
  session<T>(fn: (session: StoreSession) => Promise<T>): Promise<T>;
}

/** One connection of a {@link SyncStore}. A method throws the database's error when the connection is lost. */
export interface StoreSession {
  /** Takes the advisory lock `name` for `fn`, released after it. */
  lock<T>(name: string, options: LockOptions, fn: () => Promise<T>): Promise<Locked<T>>;
  readonly ledger: Ledger;
  readonly maintenance: SchemaMaintenance;
  /** Runs `fn` in one transaction writing one window: committed when `fn` resolves, rolled back when it throws. */
  inWindow<T>(of: { window: Window; runId: number }, fn: (writer: WindowWriter) => Promise<T>): Promise<T>;
}

/**
 * The source's ledger: its windows (committed, parked, expired, marked for re-load), its
 * watermark and its runs. Every range is [start, end) in ms; lists are in time order.
 */
export interface Ledger {
  /** The watermark (ms), or undefined before the first committed window. */
  readWatermark(): Promise<number | undefined>;
  /** Committed windows overlapping `range` (not the parked ones). */
  committedWindows(range: Window): Promise<Window[]>;
  /** Windows whose records RETENTION dropped, overlapping `range`. */
  expiredWindows(range: Window): Promise<Window[]>;
  /** Windows `state reset` marked for re-load, but the expired ones. */
  reloadWindows(): Promise<Window[]>;
  /** Parked windows overlapping `range` (every one without it), expired ones flagged. */
  parkedWindows(range?: Window): Promise<ParkedWindow[]>;
  /** Committed windows overlapping `range` with E6's count for each, and the last one before it. */
  ledgerCounts(range: Window): Promise<LedgerCount[]>;
  /** The windows the audit compares with E6: every one but the expired, with what is stored for it. */
  auditWindows(range: Window): Promise<StoredWindow[]>;
  /**
   * Of `boundarySet` (E6's texts at the instant `end`, a multiset), those the ledger window ending
   * at `end` stores (records equal as jsonb, or quarantined with the same text). A parked or
   * expired window there owns all of them; with no window there, none.
   */
  heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag>;
  /** Marks the source's runs left `running` as abandoned (the caller holds the source's lock). @returns how many. */
  abandonStaleRuns(): Promise<number>;
  /** Records the start of a run. @returns its id. */
  startRun(range: Window): Promise<number>;
  finishRun(runId: number, ending: RunEnding): Promise<void>;
  /**
   * Parks `of.window` in one transaction: its ledger rows become parked with `reason` (their
   * records stay), the rest of it gets parked rows, the watermark advances past it.
   *
   * @returns the watermark after it (ms).
   */
  parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined>;
  /** Records what an audit of every retained window found: the end of the latest window with no difference in or before it. */
  recordVerified(through: number | undefined): Promise<void>;
}

/** The schema's upkeep around a run: derived tables built for the settings, partitions, retention. */
export interface SchemaMaintenance {
  /** Whether the rollup tables are built for the run's ROLLUP_* settings. */
  isRollupCurrent(): Promise<boolean>;
  /** Rebuilds the rollup tables when built for other settings; the caller holds the schema's lock exclusively. @returns whether one was rebuilt. */
  ensureRollup(): Promise<boolean>;
  /** Recreates records_typed when its definition is not this release's. */
  ensureTypedViewCurrent(): Promise<void>;
  /** Deletes rollup rows of hours before `before` (ms; ROLLUP_RETENTION). @returns rows deleted. */
  pruneRollup(before: number): Promise<number>;
  /** The source's field catalogue: each top-level field with the JSON types seen. */
  catalogueTypes(): Promise<KnownFields>;
  /** Creates the partitions of `records` holding these window starts (ms). @returns those created. */
  ensurePartitions(starts: readonly number[]): Promise<Partition[]>;
  /**
   * Drops the partitions wholly older than `cutoff` (ms) but those holding windows of `runIds`,
   * marking their windows expired; the caller holds the schema's lock exclusively.
   */
  dropExpiredPartitions(cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]>;
}

/** The writes of one window inside its transaction ({@link StoreSession.inWindow}), in this order. */
export interface WindowWriter {
  /**
   * Deletes what was stored for the window (records, quarantined records, ledger rows, derived
   * rows). With `keep` (SYNC_SHRINK=keep) they are kept aside for {@link end}'s union.
   *
   * @returns the records deleted (quarantined ones not counted).
   */
  clear(keep?: boolean): Promise<number>;
  /**
   * Stores a page's kept records and its quarantined ones; may resolve before the store has them
   * (a failure then surfaces from a later call).
   *
   * @param onStored called with the page's kept records once stored, before `end` resolves.
   */
  write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  /** After a failed read or write: stops what is outstanding. Never throws. @returns an earlier failure of the store's. */
  abort(reason: Error): Promise<Error | undefined>;
  /**
   * Waits until every page is stored (records refused for a data reason quarantined instead).
   * After `clear(true)`: the window holds the multiset union of what was stored and what E6
   * returned now, `owned` (the texts left out as the start's boundary set) counting as returned.
   *
   * @throws the database's error when it is no data refusal.
   */
  end(owned?: readonly string[]): Promise<WindowStored>;
  /** Adds the window's rollup groups and fields to the derived tables; `changes` go to record_field_changes. */
  addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void>;
  /** Records the window in the ledger; the watermark advances when it starts at or before it. @returns the watermark after (ms). */
  record(counts: WindowCounts): Promise<number | undefined>;
}

/** Windows of one state in the ledger: how many, from the first's start to the last's end (ms). */
export interface WindowGroup {
  count: number;
  from: number | undefined;
  to: number | undefined;
}

/** One source's state, as `state show` prints it. */
export interface SourceState {
  source: string;
  watermark: number | undefined;
  lastRun:
    | {
        id: number;
        status: 'running' | 'succeeded' | 'failed' | 'interrupted' | 'abandoned';
        startedAt: number;
        finishedAt: number | undefined;
        /** The first line of its error. */
        error: string | undefined;
      }
    | undefined;
  windows: {
    committed: WindowGroup & { records: number };
    parked: WindowGroup;
    expired: WindowGroup;
    reloadRequested: WindowGroup;
  };
  /** The last full audit: the end of the latest window with no difference left in or before it, and when. */
  verified: { through: number | undefined; at: number | undefined };
}

/** What `state set-watermark` did: `skipped`, with --force, the first unloaded stretch it moved past. */
export interface WatermarkMove {
  before: number | undefined;
  after: number;
  skipped: Window | undefined;
}

/** What `state reset` marked (whole windows overlapping the range), and the expired windows it left. */
export interface ReloadMarks {
  windows: (Window & { status: 'committed' | 'parked' })[];
  expired: number;
}
