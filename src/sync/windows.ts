/**
 * Windows: how a run's time range is cut into units that are each fetched from E6 and
 * committed in one transaction.
 *
 * Glossary
 * - window: a half-open range [start, end) of event time. Planned windows are aligned to
 *   multiples of SYNC_WINDOW since the Unix epoch (UTC), so re-runs cut time the same way.
 * - ledger: `sync_windows`, one row per committed window. Committed windows never overlap.
 * - closure: a planned window widened to cover every committed window it overlaps, so that
 *   loading it replaces those windows whole and nothing outside it is touched.
 * - watermark: the end of the contiguous range loaded so far; a run resumes from it.
 * - expired window: a ledger window whose records RETENTION dropped; only an explicit `--from` loads it again.
 * - window marked for re-load: a ledger window `state reset` marked (reload_requested_at); the next
 *   resumed run loads it again wherever it lies (plan.ts).
 */

import { parseEventTime } from '../time.js';

/** A half-open range of event time, [start, end), in milliseconds since the epoch. */
export interface Window {
  start: number;
  end: number;
}

/** A ledger window and what is stored for it: records plus quarantined records (the audit compares it with E6). */
export interface StoredWindow extends Window {
  stored: number;
  /**
   * E6's count for the window when it was last loaded (the ledger's total_records: the records E6
   * returned for its slices but the boundary sets left to the slice before). Under SYNC_SHRINK=keep
   * the window holds more than E6 once records are deleted upstream, by design: the audit then
   * compares E6 now with this, not with what is stored.
   */
  seen: number;
  /**
   * Whether a ledger window (committed or parked, expired ones included: as read.ts tells the sync's
   * reader) ends where this one starts: then the records E6 returns for the instant of its start
   * belong to that window, else to this one.
   */
  followsLedger: boolean;
  /** Whether the window is parked (parked.ts): every audit loads it again, whatever the counts say. */
  parked: boolean;
}

/** Rounds `ms` down to a multiple of `windowMs` since the epoch. */
export function alignDown(ms: number, windowMs: number): number {
  return Math.floor(ms / windowMs) * windowMs;
}

/**
 * Cuts [from, to) into windows aligned to `windowMs`; the first starts at `from` rounded down,
 * the last ends at `to` (so it may be shorter than `windowMs`).
 *
 * @returns windows in time order; empty when `to` ≤ the aligned `from`.
 */
export function planWindows(from: number, to: number, windowMs: number): Window[] {
  const windows: Window[] = [];
  for (let start = alignDown(from, windowMs); start < to; start += windowMs) {
    windows.push({ start, end: Math.min(start + windowMs, to) });
  }
  return windows;
}

/**
 * Widens planned windows so that each committed window they overlap lies wholly inside one of
 * them, merging planned windows that a committed window spans. Windows that only touch
 * (one's end is the other's start) do not overlap.
 *
 * @param planned disjoint windows in time order.
 * @param committed the ledger's windows (disjoint), in any order.
 * @returns disjoint windows in time order, covering `planned`.
 */
export function closeOverCommitted(planned: readonly Window[], committed: readonly Window[]): Window[] {
  const overlaps = (a: Window, b: Window) => a.start < b.end && b.start < a.end;
  const relevant = committed.filter((c) => planned.some((p) => overlaps(p, c)));
  const all = [...planned, ...relevant].sort((a, b) => a.start - b.start || a.end - b.end);
  const merged: Window[] = [];
  for (const w of all) {
    const last = merged[merged.length - 1];
    if (last !== undefined && w.start < last.end) last.end = Math.max(last.end, w.end);
    else merged.push({ ...w });
  }
  return merged;
}

/**
 * The union of two sets of windows: windows of either that overlap are merged into one (windows
 * that only touch stay apart).
 *
 * @param a disjoint windows, any order.
 * @param b disjoint windows, any order.
 * @returns disjoint windows in time order.
 */
export function unionWindows(a: readonly Window[], b: readonly Window[]): Window[] {
  const all = [...a, ...b].sort((x, y) => x.start - y.start || x.end - y.end);
  const merged: Window[] = [];
  for (const w of all) {
    const last = merged[merged.length - 1];
    if (last !== undefined && w.start < last.end) last.end = Math.max(last.end, w.end);
    else merged.push({ ...w });
  }
  return merged;
}

/**
 * Removes from `planned` every stretch covered by one of `removed` (expired windows: RETENTION
 * dropped their records on purpose, so a resumed run does not load them again).
 *
 * @param planned disjoint windows in time order.
 * @param removed windows in any order.
 * @returns the remaining stretches, disjoint and in time order (a planned window may come back shorter or in pieces).
 */
export function subtractWindows(planned: readonly Window[], removed: readonly Window[]): Window[] {
  const cuts = [...removed].sort((a, b) => a.start - b.start);
  const result: Window[] = [];
  for (const w of planned) {
    let start = w.start;
    for (const c of cuts) {
      if (c.end <= start || c.start >= w.end) continue;
      if (c.start > start) result.push({ start, end: c.start });
      start = Math.max(start, c.end);
    }
    if (start < w.end) result.push({ start, end: w.end });
  }
  return result;
}

/**
 * The range a run covers.
 *
 * @param from `--from`, or undefined to resume: the watermark minus the lookback, or the
 *   configured start date on a first run.
 * @param to `--to`, or undefined for now minus the settle time.
 */
export function runRange(options: {
  from: number | undefined;
  to: number | undefined;
  watermark: number | undefined;
  startDate: { at: Date } | { agoMs: number };
  lookbackMs: number;
  settleMs: number;
  now: number;
}): Window {
  const start =
    options.from ??
    (options.watermark !== undefined
      ? options.watermark - options.lookbackMs
      : 'at' in options.startDate
        ? options.startDate.at.getTime()
        : options.now - options.startDate.agoMs);
  // Whole seconds: the reference's examples carry none, so an API may not take milliseconds.
  const end = options.to ?? Math.floor((options.now - options.settleMs) / 1000) * 1000;
  return { start, end };
}

/**
 * Reads a record's event time from the field at `path` (the record schema is not published, so
 * the field is configurable: RECORD_TIME_FIELD).
 *
 * Accepted values: an ISO 8601 date-time string (a string without a zone is read as UTC), or a
 * number of seconds (< 1e11) or milliseconds since the epoch.
 *
 * @returns milliseconds since the epoch, or undefined when the field is absent or unreadable.
 */
export function recordTime(record: Record<string, unknown>, path: readonly string[]): number | undefined {
  let value: unknown = record;
  for (const key of path) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  if (typeof value === 'string') return parseEventTime(value);
  if (typeof value === 'number' && Number.isFinite(value)) return value < 1e11 ? value * 1000 : value;
  return undefined;
}

/** ISO 8601 UTC for logs and errors. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
