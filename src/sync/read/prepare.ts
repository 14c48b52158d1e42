/**
 * What the reader makes of each E6 page while it waits for the writer (work done off the writer's
 * path): which records a slice keeps, their event times, the records jsonb cannot store, and the
 * counts of the derived tables.
 */
import type { AnalyticsPage } from '../../upstream/analytics.js';
import type { RollupCounts, WindowFields } from '../derived/index.js';
import type { PageWalk } from '../derived/page-walk.js';
import type { PageRows, QuarantineRow } from '../rows/page-rows.js';
import type { LeafPlace } from './reader.js';
import { PageKeys } from '../membership/record-keys.js';
import { storablePage } from '../rows/storable.js';
import { recordTime } from '../windows.js';

/** How a run prepares its pages: its settings that {@link preparePage} reads. */
export interface PageRules {
  /** RECORD_TIME_FIELD as a path; undefined when records carry none. */
  timeField: string[] | undefined;
  /** The one walk of a page's records that feeds the catalogue and the rollups. */
  walk: PageWalk;
  /** FIELD_CATALOGUE. */
  catalogue: boolean;
}

/**
 * What is held of one fetched page until the writer stores it: the body's text, the positions of
 * the records to store and their event times, and the counts. The parsed records are let go (they
 * are kept only for a page that came without its text).
 */
export interface PreparedPage {
  totalRecords: number;
  totalPages: number;
  /** Records on the page (E6's `data` length), kept or not. */
  length: number;
  rows: PageRows;
  /** Records of the slice that jsonb cannot store, kept (boundary set left out) for `records_quarantine`. */
  quarantine: QuarantineRow[];
  /** Records left out as the boundary set of the slice's start, which the slice before it keeps (boundary.ts). */
  boundary: number;
  /**
   * The exact texts of the records left out at the window's own start (the window before it owns
   * them), in page order; empty for a slice inside the window. SYNC_SHRINK=keep counts them as
   * returned: E6 still returns them, so a copy this window stored before is not kept.
   */
  owned: string[];
  /** Kept records whose RECORD_TIME_FIELD lies outside the window (E6 filters on another time). */
  outside: number;
  untimed: number;
  /** Top-level fields of the kept records, for record_fields. */
  fields: WindowFields;
  /** The kept records' rollup groups (undefined with ROLLUP_DIMENSIONS=off). */
  rollup: RollupCounts | undefined;
}

/**
 * Keeps a leaf page's records but `place.drop` (the boundary set of the slice's start, which the
 * slice before it keeps: the reader found it without reading any field) and decides where each goes
 * ({@link storablePage}: records jsonb cannot store go to the quarantine). RECORD_TIME_FIELD is
 * read for partitions, rollups and the catalogue only: a record whose time lies outside its
 * window [start, end] is kept (E6 returned it for this window) and counted, since E6 may filter on
 * another time (an ingestion time) or the field may lack a zone.
 */
export function preparePage(rules: PageRules, page: AnalyticsPage, place: LeafPlace): PreparedPage {
  const { window, drop } = place;
  const { timeField, walk, catalogue } = rules;
  const keep: number[] = [];
  const eventTimes: (number | null)[] = [];
  const quarantine: QuarantineRow[] = [];
  const storable = storablePage(page);
  const unstorable = new Map((storable.quarantined ?? []).map((q) => [q.index, q]));
  let outside = 0;
  let untimed = 0;
  for (let i = 0; i < page.data.length; i++) {
    if (drop.has(i)) continue;
    const ms = timeField ? recordTime(page.data[i]!, timeField) : undefined;
    if (ms !== undefined && (ms < window.start || ms > window.end)) outside++;
    if (timeField && ms === undefined) untimed++;
    const bad = unstorable.get(i);
    if (bad !== undefined) {
      quarantine.push({ text: bad.text, path: bad.path, reason: bad.reason, eventTime: ms ?? null });
      continue;
    }
    keep.push(i);
    eventTimes.push(ms === undefined ? null : ms);
  }
  const rows: PageRows =
    storable.text === undefined
      ? { records: page.data, keep, eventTimes }
      : { text: storable.text, ...(storable.bytes && { bytes: storable.bytes }), keep, eventTimes };
  // One walk of the kept records for the catalogue and the rollups; FIELD_CATALOGUE=off: no field
  // statistics to gather (the catalogue would ignore them).
  const { fields, rollup } = walk.observe(page.data, keep, eventTimes, catalogue);
  return {
    totalRecords: page.totalRecords,
    totalPages: page.totalPages,
    length: page.data.length,
    rows,
    quarantine,
    boundary: drop.size,
    owned: drop.size > 0 && place.slice.start === window.start ? ownedTexts(page, drop) : [],
    outside,
    untimed,
    fields,
    rollup,
  };
}

/** The exact texts of `page`'s records at `drop` (the page's keys are cached: the reader made them). */
function ownedTexts(page: AnalyticsPage, drop: ReadonlySet<number>): string[] {
  const keys = PageKeys.of(page);
  return [...drop].sort((a, b) => a - b).map((i) => keys.text(i));
}
