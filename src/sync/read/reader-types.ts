/**
 * The window reader's (reader.ts) options and what it hands out: the leaves, where each lies and
 * what the boundary rule drops of it, and what reading a window took.
 */
import type { AnalyticsPage, AnalyticsRecord } from '../../upstream/analytics.js';
import type { TextBag, ToDateRule } from '../membership/boundary.js';
import type { RecordEstimate } from './slices.js';
import type { Window } from '../windows.js';

/** Where a leaf page lies, and which of its records the boundary rule drops (boundary.ts). */
export interface LeafPlace {
  slice: Window;
  window: Window;
  /** Indexes into the page's `data` of the records the slice before it keeps (the boundary set of `slice.start`). */
  drop: ReadonlySet<number>;
}

/** One leaf: a slice of a window and its page, as `prepare` made it. */
export interface Leaf<T> {
  slice: Window;
  page: T;
  /** Records E6 returned for the slice (before the caller's boundary rule). */
  records: number;
}

/** What reading one window took. */
export interface WindowReadStats {
  /** E6 requests made for the window: leaves, overflows and both reads of instants. */
  requests: number;
  /** Leaf pages (an instant counts its pages of the read taken). */
  leaves: number;
  /** Overflows that were split. */
  splits: number;
  /** Instants (more than a page at one SYNC_MIN_SPLIT cell) read twice. */
  instants: number;
  /** Requests for boundary sets (`startDate = toDate =` a cut), counted in `requests` too. */
  boundaryRequests: number;
}

export interface WindowReaderOptions<T> {
  /** E6 pageSize, 1 to 1000. */
  pageSize: number;
  /** Requests open at once (see the module comment for the budgets). */
  concurrency: number;
  /** SYNC_MIN_SPLIT in milliseconds: cuts lie on its multiples. */
  minSplitMs: number;
  /** Pairs of reads of an instant before the window fails. */
  instantAttempts: number;
  /** Turns a leaf page into what is held for the writer, leaving out `place.drop`. Must not throw. */
  prepare: (page: AnalyticsPage, place: LeafPlace) => T;
  /** UPSTREAM_TO_DATE: how boundary sets are found (boundary.ts); default `auto`. */
  toDate?: ToDateRule;
  /**
   * Ends of windows committed before this run (the ledger): a run window starting at one drops
   * its start's boundary set, which that window keeps. A run window with no earlier window, in
   * the run or here, keeps it.
   */
  committedEnds?: ReadonlySet<number>;
  /**
   * Of the boundary set at the start of a run window whose earlier window is in the ledger but not
   * in the run, the texts that earlier window stores: all the run window drops (boundary.ts). A
   * record that came to the cut after that window was loaded is stored by none of them otherwise.
   * Default: the whole boundary set.
   */
  heldBefore?: (cut: number, boundarySet: TextBag) => Promise<TextBag>;
  /**
   * The event times of the records a prepared page keeps (null for none), so the estimate learns
   * where in a window records fall without reading them twice. Without it, later windows are cut
   * evenly.
   */
  timesOf?: (prepared: T) => Iterable<number | null>;
  /** A record's event time (RECORD_TIME_FIELD), to steer cuts; undefined when it has none. */
  eventTime: (record: AnalyticsRecord) => number | undefined;
  /** Expected counts of windows not read yet: chooses their first slices. */
  estimate: RecordEstimate;
  signal?: AbortSignal;
  /**
   * E6 served fewer records on a page than `pageSize` asked and `totalRecords` held: from now on
   * slices are cut for, and requested at, `served` (called each time the size learned shrinks).
   * Must not throw.
   */
  onPageSizeClamped?: (event: { asked: number; served: number; echoed: number }) => void;
  /** The two reads of an instant disagreed (attempt counts from 1). Must not throw. */
  onUnstableInstant?: (event: { instant: Window; records: number; attempt: number }) => void;
}
