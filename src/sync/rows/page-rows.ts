/**
 * The shapes of a window's rows on their way to the store, read by both the PostgreSQL store and
 * the COPY rows without importing each other. See docs/design/storable-rows.md.
 */
import type { AnalyticsRecord } from '../../upstream/analytics.js';

/** One E6 page as stored: the payloads are taken from its own JSON text, exactly as E6 sent them. */
export type PageRows = (
  | {
      /** The E6 body as received. */
      text: string;
      /** `text` in UTF-8, when the caller has it. */
      bytes?: Buffer;
    }
  | {
      /** A page not read from E6: the kept records are serialised with JSON.stringify. */
      records: readonly AnalyticsRecord[];
    }
) & {
  /** Positions in `data` of the records to store, ascending. */
  keep: readonly number[];
  /** Per kept record: its event time in ms, or null. */
  eventTimes: readonly (number | null)[];
};

/** One quarantined record: found unstorable by the sync (`path`, `reason`) or refused by the database (`sqlstate`, `message`). */
export interface QuarantineRow {
  /** The record's JSON text, stored as is in a `text` column; never holds a NUL byte. */
  text: string;
  path?: string;
  reason?: string;
  sqlstate?: string;
  message?: string;
  /** ms, or null. */
  eventTime: number | null;
}
