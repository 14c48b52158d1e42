/** The window reader's (reader.ts) options, its leaves and its stats. See docs/design/reader-budgets.md. */
import type { AnalyticsPage, AnalyticsRecord } from '../../upstream/analytics.js';
import type { TextBag, ToDateRule } from '../membership/boundary.js';
import type { RepeatedPagesEvent } from './page-copies.js';
import type { RecordEstimate } from './slices.js';
import type { Window } from '../windows.js';

/** Where a leaf page lies, and which of its records the boundary rule drops. */
export interface LeafPlace {
  slice: Window;
  window: Window;
  /** Positions in `data` of the boundary set of `slice.start`, which the slice before keeps. */
  drop: ReadonlySet<number>;
}

/** A slice of a window read whole, one page of it as `prepare` made it. */
export interface Leaf<T> {
  slice: Window;
  page: T;
  /** Records E6 returned on the page, dropped ones included. */
  records: number;
}

/** What reading one window took. */
export interface WindowReadStats {
  requests: number;
  /** Leaf pages (an instant counts the pages of the read taken). */
  leaves: number;
  splits: number;
  instants: number;
  /** Requests for boundary sets and counts, in `requests` too. */
  boundaryRequests: number;
  /** Records E6's counts claimed beyond what it served in the leaves taken: above 0, the window is short. */
  unserved: number;
}

export interface WindowReaderOptions<T> {
  /** SYNC_PAGE_SIZE, 1 to 1000. */
  pageSize: number;
  /** SYNC_CONCURRENCY: requests open at once. */
  concurrency: number;
  /** SYNC_MIN_SPLIT, ms. */
  minSplitMs: number;
  /** SYNC_WINDOW_ATTEMPTS. */
  instantAttempts: number;
  /** SYNC_WINDOW_MAX_REQUESTS: E6 requests a window may ask in a run; 0 or unset = auto (from its count). */
  maxRequests?: number;
  /** What is held of a leaf page for the writer, `place.drop` left out. Must not throw. */
  prepare: (page: AnalyticsPage, place: LeafPlace) => T;
  /** UPSTREAM_TO_DATE, default `auto`. */
  toDate?: ToDateRule;
  /** Ends of the ledger's windows, committed or parked: a run window starting at one drops its start's boundary set. */
  committedEnds?: ReadonlySet<number>;
  /** Of a boundary set at a ledger window's end, the texts that window stores. Default: all. */
  heldBefore?: (cut: number, boundarySet: TextBag) => Promise<TextBag>;
  /** Event times (ms, null for none) of a prepared page's records, for the estimate's profile. */
  timesOf?: (prepared: T) => Iterable<number | null>;
  /** A record's RECORD_TIME_FIELD, ms. */
  eventTime: (record: AnalyticsRecord) => number | undefined;
  estimate: RecordEstimate;
  signal?: AbortSignal;
  /** E6 served `served` records a page when asked `asked`; called each time that shrinks. Must not throw. */
  onPageSizeClamped?: (event: { asked: number; served: number; echoed: number }) => void;
  /** An instant's two reads disagreed (`attempt` from 1). Must not throw. */
  onUnstableInstant?: (event: { instant: Window; records: number; attempt: number }) => void;
  /** A read in pages held copies of its own pages, and was checked at another page size. Must not throw. */
  onRepeatedPages?: (event: RepeatedPagesEvent) => void;
}
