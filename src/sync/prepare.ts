/**
 * What the reader makes of each E6 page while it waits for the writer (work done off the writer's
 * path): which records a part keeps, their event times, the records jsonb cannot store, and the
 * counts of the derived tables.
 */
import type { AnalyticsPage } from '../upstream/analytics.js';
import { catalogueRecords, type Derived, type FieldStats, type RollupCounts, type WindowFields } from './derived.js';
import type { PageRows, QuarantineRow } from './page-rows.js';
import { storablePage } from './storable.js';
import { recordTime, type Window } from './windows.js';

/** How a run prepares its pages: its settings that {@link preparePage} reads. */
export interface PageRules {
  /** RECORD_TIME_FIELD as a path; undefined when records carry none. */
  timeField: string[] | undefined;
  /** The run's derived tables, which count a page's rollup groups. */
  derived: Derived;
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
  /** Records of the part that jsonb cannot store, kept (boundary rule applied) for `records_quarantine`. */
  quarantine: QuarantineRow[];
  atEnd: number;
  outside: number;
  untimed: number;
  /** Top-level fields of the kept records, for record_fields. */
  fields: WindowFields;
  /** The kept records' rollup groups (undefined with ROLLUP_DIMENSIONS=off). */
  rollup: RollupCounts | undefined;
}

/**
 * Reads each record's event time (RECORD_TIME_FIELD) and decides which records a part keeps and
 * where ({@link storablePage}: records jsonb cannot store go to the quarantine): all but those
 * exactly at the part's end, which an inclusive toDate returns here and again, by
 * startDate, with the next part. A record whose time lies outside the part is kept (E6 returned
 * it for this part), and counted: RECORD_TIME_FIELD may not be the field E6 filters on, or may
 * lack a zone.
 */
export function preparePage(rules: PageRules, page: AnalyticsPage, window: Window): PreparedPage {
  const { timeField, derived, catalogue } = rules;
  const keep: number[] = [];
  const eventTimes: (number | null)[] = [];
  const quarantine: QuarantineRow[] = [];
  const storable = storablePage(page);
  const unstorable = new Map((storable.quarantined ?? []).map((q) => [q.index, q]));
  let atEnd = 0;
  let outside = 0;
  let untimed = 0;
  for (let i = 0; i < page.data.length; i++) {
    const ms = timeField ? recordTime(page.data[i]!, timeField) : undefined;
    if (ms === window.end) {
      atEnd++;
      continue;
    }
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
  // FIELD_CATALOGUE=off: no field statistics to gather (Derived.addWindowRecords would ignore them).
  const fields: WindowFields = catalogue ? catalogueRecords(page.data, keep, eventTimes) : new Map<string, FieldStats>();
  const rollup = derived.countRollup(page.data, keep, eventTimes);
  return { totalRecords: page.totalRecords, totalPages: page.totalPages, length: page.data.length, rows, quarantine, atEnd, outside, untimed, fields, rollup };
}
