/**
 * The shapes of a window's rows on their way to the store: one E6 page's kept records
 * ({@link PageRows}) and its records jsonb cannot store ({@link QuarantineRow}). Plain types, so
 * both the PostgreSQL store and the COPY row builder read them without importing each other.
 */
import type { AnalyticsRecord } from '../../upstream/analytics.js';

/**
 * One E6 page as stored: PostgreSQL takes the payloads from the page's own JSON text, so every
 * record is stored exactly as E6 sent it (numbers keep all their digits: an id above 2^53, `1.10`,
 * `1e400`; JSON.parse and JSON.stringify would round or rewrite them).
 */
export type PageRows = (
  | {
      /** The E6 body as received: a JSON object whose `data` is the page's records. */
      text: string;
      /** `text` in UTF-8, when the caller has it (the bytes E6 sent): then it is not encoded again. */
      bytes?: Buffer;
    }
  | {
      /**
       * The page's records, parsed, for a page not read from E6: the kept ones are serialised with
       * JSON.stringify, the others not at all (a quarantined record may not even serialise).
       */
      records: readonly AnalyticsRecord[];
    }
) & {
  /** Positions (from 0, ascending) in `data` of the records to store. */
  keep: readonly number[];
  /** One entry per kept record: its event time in milliseconds since the epoch, or null when it has none. */
  eventTimes: readonly (number | null)[];
};

/**
 * One quarantined record as stored (see {@link prepareInsertQuarantined}): found unstorable by the
 * sync before it was sent (`path`, `reason`), or refused by the database (`sqlstate`, `message`).
 */
export interface QuarantineRow {
  /**
   * The record's JSON text (AnalyticsPage.quarantined[].text): stored as is in a `text` column, which
   * holds it exactly; jsonb would refuse it. It never holds a NUL byte (U+0000 is the escape `\u0000`).
   */
  text: string;
  /** Where in the record the problem is, JSONPath-like (found by the sync). */
  path?: string;
  /** What the problem is (found by the sync). */
  reason?: string;
  /** The SQLSTATE the database refused the record with (src/db/refusal.ts). */
  sqlstate?: string;
  /** The database's message with it, as storableText (src/errors.ts) makes it. */
  message?: string;
  /** The record's event time in milliseconds since the epoch, or null when it has none. */
  eventTime: number | null;
}
