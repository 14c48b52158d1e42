/**
 * Windows: a run's time range cut into half-open ranges, each fetched from E6 and committed in one
 * transaction, aligned to SYNC_WINDOW so re-runs cut time the same way; their arithmetic against
 * the ledger's windows. See docs/design/windows.md.
 */

import { parseEventTime } from '../time.js';

/** A half-open range of event time, [start, end), in milliseconds since the epoch. */
export interface Window {
  start: number;
  end: number;
}

/** A ledger window and what is stored for it, for the audit. */
export interface StoredWindow extends Window {
  /** Records plus quarantined records. */
  stored: number;
  /** The ledger's total_records: E6's count when last loaded (SYNC_SHRINK=keep may store more). */
  seen: number;
  /** A ledger window (expired ones included) ends at its start: the boundary set there is not its. */
  followsLedger: boolean;
  /** Every audit loads a parked window again. */
  parked: boolean;
  /** Committed short: E6's count claimed more than it served (sync_windows.short_claimed). */
  short?: { claimed: number; served: number };
}

/** Rounds `ms` down to a multiple of `windowMs` since the epoch. */
export function alignDown(ms: number, windowMs: number): number {
  return Math.floor(ms / windowMs) * windowMs;
}

/** Cuts [from, to) into windows aligned to `windowMs`, in time order; the last ends at `to`. */
export function planWindows(from: number, to: number, windowMs: number): Window[] {
  const windows: Window[] = [];
  for (let start = alignDown(from, windowMs); start < to; start += windowMs) {
    windows.push({ start, end: Math.min(start + windowMs, to) });
  }
  return windows;
}

/** `planned` (disjoint, in order) widened so that each `committed` window it overlaps lies inside one. */
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

/** The union of two sets of disjoint windows, in time order; windows that only touch stay apart. */
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

/** `planned` (disjoint, in order) less what `removed` covers: a window may come back shorter or in pieces. */
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

/** The range a run covers: `--from`/`--to`, else from the watermark less the lookback to now less the settle time. */
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
  // Whole seconds: the reference's examples carry no milliseconds.
  const end = options.to ?? Math.floor((options.now - options.settleMs) / 1000) * 1000;
  return { start, end };
}

/** A record's RECORD_TIME_FIELD in ms: an ISO 8601 date-time (UTC without a zone), or seconds (< 1e11) or ms since the epoch. */
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
