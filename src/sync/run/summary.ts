/** What a sync run reports: per committed window ({@link windowSummary}), to its observer, at its end. */
import type { FailureReason } from '../../errors.js';
import type { FieldChange } from '../derived/fields/schema-changes.js';
import type { DroppedPartition, FieldPlaces, LockWaitEvent } from '../store/ports.js';
import type { WindowReadStats } from '../read/reader.js';
import type { RunStatus } from '../store/ports.js';
import type { Window } from '../windows.js';

export interface WindowSummary {
  window: Window;
  records: number;
  /** Found unstorable, or refused by the database. */
  quarantined: number;
  /** What E6 returned for the window's slices, records left to a neighbour slice included. */
  totalRecords: number;
  /** Leaf pages. */
  pages: number;
  /** Leaves, overflows split, both reads of instants. */
  requests: number;
  splits: number;
  instants: number;
  /** Left out as the boundary set of a slice's start. */
  boundary: number;
  /** Kept although their event time lies outside the window. */
  outside: number;
  /** Without a readable event time. */
  untimed: number;
  /** Rows deleted because the window was loaded before. */
  replaced: number;
  /** Of `quarantined`, refused by FIELD_CONTRACT=freeze. */
  contract?: number;
  contractBreaches?: readonly FieldChange[];
  /** What the catalogue gained (none in the source's first run). */
  fieldChanges?: readonly FieldChange[];
  durationSeconds: number;
  /** Set when a re-read window lost records upstream. */
  shrunk?: ShrunkWindow;
  /** Set when E6 counted more records than it served, identically on every read: those served are stored. */
  short?: ShortWindow;
}

/** A window whose records are stored although E6's count claimed more (docs/design/ledger.md). */
interface ShortWindow {
  window: Window;
  /** E6's count, as total_records is (less the boundary sets left to the slice before). */
  claimed: number;
  served: number;
}

export interface ShrunkWindow {
  window: Window;
  /** Rows stored before this run, quarantined ones not counted. */
  stored: number;
  /** Returned now, quarantined ones included. */
  returned: number;
  /** Action `kept`: rows stored before that E6 no longer returns. */
  kept?: number;
  action: 'kept' | 'replaced';
}

export interface ParkedEvent {
  window: Window;
  reason: FailureReason;
  /** As stored in the ledger. */
  error: string;
}

/** Hooks for metrics and progress; every one optional, none may throw. */
export interface SyncObserver {
  /** A progress bar shows the run: the success line is then logged at debug. */
  readonly showsProgress?: boolean;
  runStarted?(event: { runId: number; windows: readonly Window[] }): void;
  pageLoaded?(event: { records: number }): void;
  windowCommitted?(summary: WindowSummary & { watermark: number | undefined }): void;
  /** Before windowCommitted, as are recordsQuarantined and fieldsChanged. */
  windowShrunk?(event: ShrunkWindow): void;
  recordsQuarantined?(event: { window: Window; records: number }): void;
  /** Two reads of an instant disagreed; it is read again or fails the run. */
  unstableInstant?(event: { instant: Window; records: number; attempt: number }): void;
  /** Pages of an instant copied earlier pages; `outcome`: stored (they really repeat) or parked. */
  repeatedPages?(event: { repeated: readonly unknown[]; outcome: 'stored' | 'parked' }): void;
  /** The run reads at `served` from now on. */
  pageSizeClamped?(event: { asked: number; served: number; echoed: number }): void;
  fieldsChanged?(event: { window: Window; changes: readonly FieldChange[] }): void;
  windowParked?(event: ParkedEvent): void;
  /** Before windowCommitted. */
  windowShort?(event: ShortWindow): void;
  partitionsDropped?(event: { partitions: readonly DroppedPartition[] }): void;
  /** A statement of the run waited on a lock past the store's threshold (10 s); logged by the store. */
  lockWaited?(event: LockWaitEvent): void;
  runFinished?(result: SyncResult): void;
}

export type SyncResult =
  | { status: 'locked' }
  | {
      status: RunStatus;
      runId: number;
      range: Window;
      windowsPlanned: number;
      /** Committed. */
      windows: number;
      pages: number;
      records: number;
      quarantined: number;
      watermark: number | undefined;
      durationSeconds: number;
      error?: Error;
      fieldsNew?: number;
      /** Parked by this run: its data is not exact. */
      parked?: number;
      /** Committed short by this run: E6 counted records it did not serve. */
      short?: number;
      /** In the ledger at the end, not expired; absent when they could not be counted. */
      parkedWindows?: number;
      /** The source's catalogue fields by their place in records_typed; absent with FIELD_CATALOGUE off or not read. */
      fields?: FieldPlaces;
    };

/** What one window's load counted. */
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

export function emptyTally(): WindowTally {
  return { records: 0, quarantined: 0, totalRecords: 0, pages: 0, boundary: 0, outside: 0, untimed: 0, replaced: 0, contract: 0 };
}

/** The one place a window's summary is made. @param end.started `performance.now()` when its load began. */
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
    ...(stats.unserved > 0
      ? { short: { window, claimed: tally.totalRecords - tally.boundary + stats.unserved, served: tally.totalRecords - tally.boundary } }
      : {}),
    watermark: end.watermark,
  };
}
