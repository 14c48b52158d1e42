/**
 * What a sync run needs from the outside, as interfaces: the storage of one source's rows
 * ({@link SyncStore}, PostgreSQL in store-pg.ts) and E6 pages ({@link E6Pages}, the analytics
 * client). The run (run.ts and the steps it coordinates) depends on these only, so a unit test
 * drives a whole run against an in-memory store and a fake E6.
 */
import type { AnalyticsPage, PageQuery } from '../../upstream/analytics.js';
import type { RollupCounts, WindowFields } from '../derived/index.js';
import type { FieldChange, KnownFields } from '../derived/fields/schema-changes.js';
import type { PageRows, QuarantineRow } from '../rows/page-rows.js';
import type { ParkedWindow } from './pg/parked.js';
import type { Partition, DroppedPartition } from './pg/partitions.js';
import type { TextBag } from '../membership/record-keys.js';
import type { RunStatus } from './pg/sql.js';
import type { StoredWindow, Window } from '../windows.js';

export type { StoredWindow } from '../windows.js';

/**
 * E6 pages (API reference, E6): one request per call, its retries and rate limit inside. The
 * analytics client is one (src/upstream/analytics.ts).
 */
export interface E6Pages {
  /**
   * @throws what the analytics client throws after its retries (UpstreamError, TokenError), or
   *   AbortedError on `options.signal`.
   */
  fetchPage(query: PageQuery, options?: { signal?: AbortSignal }): Promise<AnalyticsPage>;
}

/** How to take an advisory lock (src/db/pool.ts withAdvisoryLock). */
export interface LockOptions {
  /** Wait until it is free; false: give up at once when it is held. */
  wait: boolean;
  /** Ends a wait with AbortedError. */
  signal?: AbortSignal;
  /** Shared mode: any number of shared holders, none while an exclusive one holds it. */
  shared?: boolean;
}

/** A lock's outcome: `fn`'s value when it was taken. */
export type Locked<T> = { acquired: true; value: T } | { acquired: false };

/** The end of a run as recorded. `error` is a message without secrets. */
export interface RunEnding {
  status: RunStatus;
  windows: number;
  pages: number;
  records: number;
  error?: string;
}

/** What a window's writes stored ({@link WindowWriter.end}). */
export interface WindowStored {
  /** Records of this read stored in `records`. */
  records: number;
  /** Records of this read the database refused for a data reason, stored in the quarantine (with `sqlstate`, `message`). */
  refused: readonly QuarantineRow[];
  /** After `clear(true)`: what was stored before and this read did not return, stored again. */
  kept: { records: number; quarantined: number };
}

/** What a window's load counted, recorded in the ledger with it. */
export interface WindowCounts {
  /** Records stored. */
  recordCount: number;
  /**
   * E6's count for the window: the records it returned for the window's parts but the boundary
   * sets left to the part before (boundary.ts). The audit compares E6 with it under SYNC_SHRINK=keep.
   */
  totalRecords: number;
  /** Leaf pages (at least 1). */
  pages: number;
}

/**
 * The storage of one source's runs in one schema: sessions (connections) and, through them, the
 * ledger, the watermark, the records and the tables derived from them. Every method is about the
 * store's own source (it is built for one).
 */
export interface SyncStore {
  /**
   * Runs `fn` on a session of its own (one connection: its locks are the session's, released when
   * it ends).
   *
   * @throws what opening the session throws (the database unreachable), or what `fn` throws.
   */
  session<T>(fn: (session: StoreSession) => Promise<T>): Promise<T>;
}

/** One connection of a {@link SyncStore}. A method throws the database's error when the connection is lost. */
export interface StoreSession {
  /** Takes the advisory lock `name` for `fn`, released after it (see {@link LockOptions}). */
  lock<T>(name: string, options: LockOptions, fn: () => Promise<T>): Promise<Locked<T>>;

  /** Whether records_hourly and its distinct tables are built for the run's ROLLUP_* settings. */
  isRollupCurrent(): Promise<boolean>;
  /** Rebuilds the rollup tables when built for other settings, in one transaction; the caller holds the schema's lock exclusively. */
  ensureRollup(): Promise<void>;
  /** Recreates records_typed when the catalogue changed since it was made, in one transaction. */
  ensureTypedViewCurrent(): Promise<void>;
  /** Deletes rollup rows of hours before `before` (ms; ROLLUP_RETENTION), in one transaction. @returns rows deleted. */
  pruneRollup(before: number): Promise<number>;

  /** Marks the source's runs left `running` as abandoned (the caller holds the source's lock). @returns how many. */
  abandonStaleRuns(): Promise<number>;
  /** The watermark (ms), or undefined before the first committed window. */
  readWatermark(): Promise<number | undefined>;
  /** Committed windows overlapping `range`, in time order (not the parked ones: {@link parkedWindows}). */
  committedWindows(range: Window): Promise<Window[]>;
  /**
   * Parked windows (parked.ts: kept in the ledger with the reason they could not be loaded)
   * overlapping `range`, every one of the source's without it, in time order, expired ones flagged.
   */
  parkedWindows(range?: Window): Promise<ParkedWindow[]>;
  /**
   * Parks `of.window` in one transaction: the ledger rows inside it become parked with `reason`
   * (their records stay), the rest of it gets parked rows, and the watermark advances past it as
   * {@link WindowWriter.record} advances it.
   *
   * @returns the watermark after it (ms).
   */
  parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined>;
  /** Windows whose records RETENTION dropped, overlapping `range`, in time order. */
  expiredWindows(range: Window): Promise<Window[]>;
  /**
   * The source's ledger windows `state reset` marked for re-load (src/sync/store/pg/ledger-state.ts), every one
   * but the expired ones, in time order. Loading a window replaces its row, and parking it clears
   * the mark.
   */
  reloadWindows(): Promise<Window[]>;
  /**
   * Records what an audit of every retained window found (sync_state.verified_through, verified_at):
   * the end of the latest window with no difference left in it or before it (ms), or undefined.
   */
  recordVerified(through: number | undefined): Promise<void>;
  /**
   * The windows the audit compares with E6 (audit.ts), overlapping `range`, in time order: every
   * ledger window but the expired ones, with what is stored for it (records and quarantined
   * records). The one query that says which ledger windows are audited.
   */
  auditWindows(range: Window): Promise<StoredWindow[]>;
  /** Committed windows overlapping `range` with E6's count for each, and the last one before it. */
  ledgerCounts(range: Window): Promise<(Window & { totalRecords: number })[]>;
  /**
   * Of `boundarySet` (E6's record texts at the instant `end`, a multiset), those the ledger window
   * ending at `end` stores, as records (equal as jsonb) or quarantined (the same text). A window
   * parked or expired there owns all of them (it is loaded later, or RETENTION dropped what it
   * held); with no window there, none (boundary.ts).
   */
  heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag>;
  /**
   * The source's field catalogue (record_fields): each top-level field name with the JSON types
   * seen; empty before its first window with records (or with FIELD_CATALOGUE off since).
   */
  catalogueTypes(): Promise<KnownFields>;
  /** Records the start of a run. @returns its id. */
  startRun(range: Window): Promise<number>;
  /** Records the end of a run. */
  finishRun(runId: number, ending: RunEnding): Promise<void>;

  /** Creates the partitions of `records` holding these window starts (ms). @returns those created. */
  ensurePartitions(starts: readonly number[]): Promise<Partition[]>;
  /**
   * Drops the partitions wholly older than `cutoff` (ms) but those holding windows of `runIds`,
   * marking their windows expired; the caller holds the schema's lock exclusively.
   */
  dropExpiredPartitions(cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]>;

  /**
   * Runs `fn` in one transaction writing one window: committed when `fn` resolves, rolled back
   * whole when it throws (and the throw passed on).
   */
  inWindow<T>(of: { window: Window; runId: number }, fn: (writer: WindowWriter) => Promise<T>): Promise<T>;
}

/** The writes of one window inside its transaction ({@link StoreSession.inWindow}), in this order. */
export interface WindowWriter {
  /**
   * Deletes what was stored for the window (records, quarantined records, ledger rows, their
   * derived rows) before it is loaded again. With `keep` (SYNC_SHRINK=keep) the records and
   * quarantined records deleted are kept aside, and {@link end} stores again those this read does
   * not hold.
   *
   * @returns the records deleted (quarantined ones not counted).
   */
  clear(keep?: boolean): Promise<number>;
  /**
   * Stores a page's kept records and its quarantined ones. May resolve before the store has them
   * (the next page is prepared meanwhile); their failure then surfaces from a later call.
   *
   * @param onStored called with the page's kept records once they are stored, before `end` resolves.
   */
  write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  /**
   * After a failed read or write: stops what is outstanding, so the transaction can roll back.
   * Never throws.
   *
   * @returns an earlier failure of the store's (it wins over `reason`), else undefined.
   */
  abort(reason: Error): Promise<Error | undefined>;
  /**
   * Waits until every page written is stored; records the database refused for a data reason
   * (src/db/refusal.ts) are stored in the quarantine instead, with the SQLSTATE and the message.
   * After `clear(true)`, stores again each record (and quarantined record) deleted by the clear as
   * many times as it was stored beyond the copies of the same text this read stored: the window
   * then holds the multiset union of what was stored and what E6 returned now.
   *
   * @param owned the exact texts of the records E6 returned at the window's start that the window
   *   before owns (its start's boundary set, left out: boundary.ts). After `clear(true)` they count
   *   as returned, so a copy of one stored here before (when the record reached the cut after the
   *   window before was read) is not kept: the window before holds it now.
   * @throws the database's error when it is no data refusal.
   */
  end(owned?: readonly string[]): Promise<WindowStored>;
  /**
   * Adds the window's rollup groups and catalogued fields to the derived tables (once its records
   * are in). Inexact rollup counts (`exact` false) group the window's stored records instead.
   *
   * @param changes the fields and types `fields` brings that the catalogue did not hold
   *   (src/sync/run/field-contract.ts), recorded in record_field_changes with the window.
   */
  addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void>;
  /**
   * Records the window in the ledger and advances the watermark to its end when it starts at or
   * before it (or there is none yet): the watermark never jumps a gap.
   *
   * @returns the watermark after it (ms).
   */
  record(counts: WindowCounts): Promise<number | undefined>;
}
