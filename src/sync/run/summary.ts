/**
 * What a sync run reports: per committed window ({@link WindowSummary}, built in one place:
 * {@link windowSummary}), to its observer ({@link SyncObserver}), and at its end ({@link SyncResult}).
 */
import type { FailureReason } from '../../errors.js';
import type { FieldChange } from '../derived/fields/schema-changes.js';
import type { DroppedPartition } from '../store/ports.js';
import type { WindowReadStats } from '../read/reader.js';
import type { RunStatus } from '../store/ports.js';
import type { Window } from '../windows.js';

/** Counts of one committed window. */
export interface WindowSummary {
  window: Window;
  /** Records stored. */
  records: number;
  /** Records kept in `records_quarantine` instead of `records` (found unstorable, or refused by the database). */
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
  /** Records left out as the boundary set of a part's start: E6 returned them with the part before it too, which keeps them. */
  boundary: number;
  /** Records kept although their event time lies outside the window (RECORD_TIME_FIELD may not be what E6 filters on). */
  outside: number;
  /** Records without a readable event time. */
  untimed: number;
  /** Rows deleted because the window was loaded before. */
  replaced: number;
  /** Of `quarantined`, the records FIELD_CONTRACT=freeze refused (contract.ts); absent or 0 when none. */
  contract?: number;
  /** The changes those records bring, each once; absent or empty when none. */
  contractBreaches?: readonly FieldChange[];
  /** Fields and types the source's catalogue gained with the window (none in the source's first run); absent or empty when none. */
  fieldChanges?: readonly FieldChange[];
  durationSeconds: number;
  /**
   * Set when a re-read window lost records upstream: under SYNC_SHRINK=keep (action `kept`) when
   * stored records E6 no longer returns were kept beside what it returns now; under `replace`
   * when E6 returned fewer records than were stored.
   */
  shrunk?: ShrunkWindow;
}

/** A committed window re-read that lost records upstream (see SyncConfig.shrink). */
export interface ShrunkWindow {
  window: Window;
  /** Rows stored for the window before this run (quarantined ones not counted). */
  stored: number;
  /** Records E6 returned for it now (after the boundary rule; quarantined ones included). */
  returned: number;
  /** Action `kept`: records (and quarantined records) stored before that E6 no longer returns, kept. */
  kept?: number;
  /** What was done: the stored rows E6 no longer returns kept beside what it returns, or replaced by it. */
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
  /** The source's field catalogue gained fields or types with a committed window (after its first run); called before windowCommitted. */
  fieldsChanged?(event: { window: Window; changes: readonly FieldChange[] }): void;
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
      /** Fields and types the source's catalogue gained in this run (none in its first run); absent or 0 when none. */
      fieldsNew?: number;
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
  boundary: number;
  outside: number;
  untimed: number;
  replaced: number;
  /** Of `quarantined`, refused by FIELD_CONTRACT=freeze. */
  contract: number;
}

/** A tally of nothing yet. */
export function emptyTally(): WindowTally {
  return { records: 0, quarantined: 0, totalRecords: 0, pages: 0, boundary: 0, outside: 0, untimed: 0, replaced: 0, contract: 0 };
}

/**
 * The one place a window's summary is made: its load's tally, what reading it took, and how it ended.
 *
 * @param end.started `performance.now()` when its load began; `shrunk` when E6 returned fewer records
 *   than were stored; `watermark` after the window; `contract` what the field contract found
 *   (the catalogue's `changes`, the `breaches` refused).
 */
export function windowSummary(
  window: Window,
  tally: WindowTally,
  stats: WindowReadStats,
  end: {
    started: number;
    shrunk: ShrunkWindow | undefined;
    watermark: number | undefined;
    contract?: { changes: readonly FieldChange[]; breaches: readonly FieldChange[] };
  },
): WindowSummary & { watermark: number | undefined } {
  return {
    window,
    ...tally,
    fieldChanges: end.contract?.changes ?? [],
    contractBreaches: end.contract?.breaches ?? [],
    requests: stats.requests,
    splits: stats.splits,
    instants: stats.instants,
    durationSeconds: (performance.now() - end.started) / 1000,
    ...(end.shrunk ? { shrunk: end.shrunk } : {}),
    watermark: end.watermark,
  };
}
