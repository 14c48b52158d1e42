/**
 * What a sync run reports: per committed window ({@link WindowSummary}, built in one place:
 * {@link windowSummary}), to its observer ({@link SyncObserver}), and at its end ({@link SyncResult}).
 */
import type { FailureReason } from '../errors.js';
import type { DroppedPartition } from './partitions.js';
import type { WindowReadStats } from './reader.js';
import type { RunStatus } from './store.js';
import type { Window } from './windows.js';

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

/** A window parked by a run (park.ts): it cannot be loaded for a reason of its own. */
export interface ParkedEvent {
  window: Window;
  /** The failure's reason (`response_too_large`, `inconsistent_window`, …). */
  reason: FailureReason;
  /** The error's text, as stored in the ledger. */
  error: string;
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
  /** E6 served fewer records on a page than the page size asked: from now on the run reads at `served`. */
  pageSizeClamped?(event: { asked: number; served: number; echoed: number }): void;
  /** A window was parked (park.ts); the run goes on with the next one. */
  windowParked?(event: ParkedEvent): void;
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
      /** Windows this run parked (park.ts): the run went on past them, but its data is not exact; absent or 0 when none. */
      parked?: number;
      /** The source's parked windows in the ledger at the run's end, expired ones aside; absent when they could not be counted. */
      parkedWindows?: number;
    };

/** What one window's load counted, before it is a {@link WindowSummary}. */
export interface WindowTally {
  records: number;
  quarantined: number;
  totalRecords: number;
  pages: number;
  atEnd: number;
  outside: number;
  untimed: number;
  replaced: number;
}

/** A tally of nothing yet. */
export function emptyTally(): WindowTally {
  return { records: 0, quarantined: 0, totalRecords: 0, pages: 0, atEnd: 0, outside: 0, untimed: 0, replaced: 0 };
}

/**
 * The one place a window's summary is made: its load's tally, what reading it took, and how it ended.
 *
 * @param end.started `performance.now()` when its load began; `shrunk` when E6 returned fewer records
 *   than were stored; `watermark` after the window (or as it stayed, for a window kept as stored).
 */
export function windowSummary(
  window: Window,
  tally: WindowTally,
  stats: WindowReadStats,
  end: { started: number; shrunk: ShrunkWindow | undefined; watermark: number | undefined },
): WindowSummary & { watermark: number | undefined } {
  return {
    window,
    ...tally,
    requests: stats.requests,
    splits: stats.splits,
    instants: stats.instants,
    durationSeconds: (performance.now() - end.started) / 1000,
    ...(end.shrunk ? { shrunk: end.shrunk } : {}),
    watermark: end.watermark,
  };
}
