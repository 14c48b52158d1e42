/**
 * What the reader holds of each leaf page for the writer, made off the writer's path: the records
 * kept and their event times, those jsonb cannot store, and the derived tables' counts.
 * See docs/design/reader-budgets.md, docs/design/storable-rows.md.
 */
import type { AnalyticsPage } from '../../upstream/analytics.js';
import type { RollupCounts, WindowFields } from '../derived/index.js';
import type { PageWalk } from '../derived/page-walk.js';
import type { PageRows, QuarantineRow } from '../rows/page-rows.js';
import type { LeafPlace } from './reader.js';
import { PageKeys } from '../membership/record-keys.js';
import { storablePage } from '../rows/storable.js';
import { recordTime } from '../windows.js';

/** The settings {@link preparePage} reads. */
export interface PageRules {
  /** RECORD_TIME_FIELD as a path. */
  timeField: string[] | undefined;
  /** The one walk of a page's records for the catalogue and the rollups. */
  walk: PageWalk;
  /** FIELD_CATALOGUE. */
  catalogue: boolean;
}

/** One page as held until the writer stores it: its text and positions, not its parsed records. */
export interface PreparedPage {
  totalRecords: number;
  totalPages: number;
  /** E6's `data` length, dropped records included. */
  length: number;
  rows: PageRows;
  quarantine: QuarantineRow[];
  /** Records dropped as the boundary set of the slice's start. */
  boundary: number;
  /** Texts dropped at the window's own start, in page order: SYNC_SHRINK=keep counts them as returned. */
  owned: string[];
  /** Kept records whose RECORD_TIME_FIELD lies outside the window (E6 filters on another time). */
  outside: number;
  untimed: number;
  fields: WindowFields;
  /** Undefined with ROLLUP_DIMENSIONS=off. */
  rollup: RollupCounts | undefined;
}

/**
 * Keeps a leaf page's records but `place.drop`, quarantining those jsonb cannot store. A record
 * whose RECORD_TIME_FIELD lies outside its window is kept (E6 returned it for it) and counted.
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

function ownedTexts(page: AnalyticsPage, drop: ReadonlySet<number>): string[] {
  const keys = PageKeys.of(page);
  return [...drop].sort((a, b) => a - b).map((i) => keys.text(i));
}
