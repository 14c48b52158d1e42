/**
 * What a sync run needs from the outside: E6 pages, and a store whose session offers locks, the
 * {@link Ledger}, {@link SchemaMaintenance} and one transaction per window ({@link WindowWriter}).
 * The run and the audit depend on these only; the app layer hands over the PostgreSQL store
 * (store/pg/), unit tests an in-memory one, and test/integration/store-contract.test.ts holds both
 * to one contract. Design: docs/design/sync-run.md, docs/design/ledger.md.
 */
import type { AnalyticsPage, PageQuery } from '../../upstream/analytics.js';
import type { WindowFields } from '../derived/fields/catalogue.js';
import type { RollupCounts } from '../derived/rollup/counts.js';
import type { FieldChange, KnownFields } from '../derived/fields/schema-changes.js';
import type { FieldPlaces } from '../derived/fields/typed-view.js';
import type { TextBag } from '../membership/record-keys.js';
import type { PageRows, QuarantineRow } from '../rows/page-rows.js';
import type { StoredWindow, Window } from '../windows.js';

export type { FieldPlaces } from '../derived/fields/typed-view.js';
export type { StoredWindow } from '../windows.js';
export type { TextBag } from '../membership/record-keys.js';

/** E6 (API reference, E6): one request per call, its retries and rate limit inside. */
export interface E6Pages {
  /** @throws what the analytics client throws after its retries, or AbortedError on `options.signal`. */
  fetchPage(query: PageQuery, options?: { signal?: AbortSignal }): Promise<AnalyticsPage>;
  /** The API's time now (epoch ms) from its `Date` header; undefined when it sends none. @throws AbortedError on `options.signal`. */
  apiNow?(options?: { signal?: AbortSignal }): Promise<number | undefined>;
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
  /** E6 counted more records than it served: what it claimed and what it served (as `totalRecords`). */
  short?: { claimed: number; served: number };
}

export interface WindowStored {
  records: number;
  /** Refused by the database for a data reason, quarantined. */
  refused: readonly QuarantineRow[];
  /** After `clear(true)`: stored before, not returned now, stored again. */
  kept: { records: number; quarantined: number };
}

/** A committed window with E6's count for it (the estimate of later windows' slices). */
export type LedgerCount = Window & { totalRecords: number };

export interface ParkedWindow extends Window {
  /** The error's text, sanitised. */
  reason: string;
  /** ms. */
  parkedAt: number;
  /** Still stored from a load before it was parked. */
  recordCount: number;
  runId: number;
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
  /** Runs `fn` on one connection of its own (its locks end with it). @throws the database's error, or what `fn` throws. */
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

/** A lock request of a run's session, not granted for `waitedMs` (docs/design/lock-waits.md). */
export interface LockWaitEvent {
  /** `schema.table`, or the kind of lock for one on no relation. */
  relation: string;
  /** As pg_locks names it (`RowExclusiveLock`). */
  mode: string;
  waitedMs: number;
  /** The processes holding it: pid, application_name, the first line of their query, modes held. */
  blockers: readonly { pid: number; applicationName: string; query: string; held: string }[];
}

/** The source's ledger (docs/design/ledger.md). Ranges are [start, end) in ms; lists are in time order. */
export interface Ledger {
  /** The watermark (ms), or undefined before the first committed window. */
  readWatermark(): Promise<number | undefined>;
  /** Not the parked ones. */
  committedWindows(range: Window): Promise<Window[]>;
  expiredWindows(range: Window): Promise<Window[]>;
  /** Marked by `state reset`, not expired. */
  reloadWindows(): Promise<Window[]>;
  /** Every one without `range`; expired ones flagged. */
  parkedWindows(range?: Window): Promise<ParkedWindow[]>;
  /** Committed windows overlapping `range` with E6's count for each, and the last one before it. */
  ledgerCounts(range: Window): Promise<LedgerCount[]>;
  /** Every window but the expired, with what is stored for it. */
  auditWindows(range: Window): Promise<StoredWindow[]>;
  /** Of `boundarySet` (E6's texts at the instant `end`), those the window ending at `end` holds: all when it is parked or expired, none without one. */
  heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag>;
  /** Marks runs left `running` abandoned; the caller holds the source's lock. @returns how many. */
  abandonStaleRuns(): Promise<number>;
  /** @returns the run's id. */
  startRun(range: Window): Promise<number>;
  finishRun(runId: number, ending: RunEnding): Promise<void>;
  /** Parks `of.window` in one transaction; its records stay. @returns the watermark after it (ms). */
  parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined>;
  /** An audit of every retained window: the end of the latest window with no difference in or before it. */
  recordVerified(through: number | undefined): Promise<void>;
}

/** The schema's upkeep around a run: derived tables built for the settings, partitions, retention. */
export interface SchemaMaintenance {
  isRollupCurrent(): Promise<boolean>;
  /** The caller holds the schema's lock exclusively. @returns whether a table was rebuilt. */
  ensureRollup(): Promise<boolean>;
  ensureTypedViewCurrent(): Promise<void>;
  /** ROLLUP_RETENTION: `before` in ms. @returns rows deleted. */
  pruneRollup(before: number): Promise<number>;
  catalogueTypes(): Promise<KnownFields>;
  /** The source's catalogue fields by their place in records_typed (TYPED_VIEW_MAX_FIELDS). */
  fieldPlaces(): Promise<FieldPlaces>;
  /** `starts` in ms. @returns the partitions created. */
  ensurePartitions(starts: readonly number[]): Promise<Partition[]>;
  /** RETENTION: `cutoff` in ms; the caller holds the schema's lock exclusively. */
  dropExpiredPartitions(cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]>;
}

/** The writes of one window inside its transaction ({@link StoreSession.inWindow}), in this order. */
export interface WindowWriter {
  /** Deletes what was stored for the window; `keep` (SYNC_SHRINK=keep) sets it aside for {@link end}. @returns the records deleted. */
  clear(keep?: boolean): Promise<number>;
  /** May resolve before the page is stored (a failure surfaces later); `onStored` is called before `end` resolves. */
  write(rows: PageRows, quarantine: readonly QuarantineRow[], onStored: (records: number) => void): Promise<void>;
  /** After a failed read or write: stops what is outstanding. Never throws. @returns an earlier failure of the store's. */
  abort(reason: Error): Promise<Error | undefined>;
  /**
   * Waits until every page is stored, data refusals quarantined. After `clear(true)`: the keep union,
   * `owned` (the start's boundary set left out) counting as returned (docs/design/keep-union.md).
   * @throws the database's error when it is no data refusal.
   */
  end(owned?: readonly string[]): Promise<WindowStored>;
  /** `changes` go to record_field_changes. */
  addDerived(rollup: RollupCounts, fields: WindowFields, changes?: readonly FieldChange[]): Promise<void>;
  /** The ledger row; the watermark advances when the window starts at or before it. @returns the watermark after (ms). */
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
    /** Committed short (not expired): E6 claimed `claimed` records in them and served `served`. */
    short?: WindowGroup & { claimed: number; served: number };
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
