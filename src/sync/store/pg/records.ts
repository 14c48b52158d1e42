/**
 * Statements on `records` and `records_quarantine` for one window's load: the insert of a page
 * (one round trip, prepared while the previous one runs), the insert of quarantined records,
 * and the delete of a window's quarantined rows. The COPY path is records-copy.ts.
 */
import { storableText } from '../../../errors.js';
import type { AnalyticsRecord } from '../../../upstream/analytics.js';
import { timestampArray } from '../../rows/copy-rows.js';
import type { PageRows, QuarantineRow } from '../../rows/page-rows.js';
import type { Queryable, WindowTarget } from './tables.js';

/** A prepared statement text and its parameters, ready for `db.query(text, values)`. */
export interface PreparedQuery {
  text: string;
  values: unknown[];
}

/**
 * Builds the insert of one page's kept records, in one round trip (the page travels as one jsonb
 * value, the kept positions and their event times as two arrays, joined by position), without
 * sending it, so a caller can prepare the next page while the database is still busy with the
 * previous one.
 *
 * @returns undefined when there is nothing to insert.
 */
export function prepareInsertRecords(target: WindowTarget, page: PageRows): PreparedQuery | undefined {
  if (page.keep.length === 0) return undefined;
  const { t, source, window, runId } = target;
  const text = 'text' in page ? page.text : keptRecordsText(page.records, page.keep);
  const insert = `insert into ${t.records} (source, payload, event_time, window_start, run_id)
     select $6::text, r.payload, e.event_time, $1, $2
       from jsonb_array_elements($3::jsonb -> 'data') with ordinality as r(payload, n)
       join unnest($4::int[], $5::timestamptz[]) as e(n, event_time) using (n)`;
  const values = [new Date(window.start), runId, jsonbBinary(text), ordinalArray(page.keep), timestampArray(page.eventTimes), source];
  return { text: insert, values };
}

/** `{"data":[…]}` of `records` with the kept positions serialised and every other one `null`, so positions stay. */
function keptRecordsText(records: readonly AnalyticsRecord[], keep: readonly number[]): string {
  let text = '{"data":[';
  let k = 0;
  for (let i = 0; i < records.length; i++) {
    if (i > 0) text += ',';
    if (keep[k] === i) {
      text += JSON.stringify(records[i]);
      k++;
    } else {
      text += 'null';
    }
  }
  return `${text}]}`;
}

/** The int[] literal of 1-based ordinals for 0-based positions. */
function ordinalArray(positions: readonly number[]): string {
  let text = '{';
  for (let i = 0; i < positions.length; i++) text += i === 0 ? String(positions[i]! + 1) : `,${positions[i]! + 1}`;
  return `${text}}`;
}

/**
 * JSON text as a jsonb parameter in binary format (a version byte, 1, then the text in UTF-8:
 * what jsonb_recv reads). PostgreSQL parses it exactly as the same text sent as text; encoding it
 * here, rather than in pg when the statement is sent, lets that work overlap the previous insert.
 */
function jsonbBinary(json: string): Buffer {
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(json));
  bytes[0] = 1;
  bytes.write(json, 1, 'utf8');
  return bytes;
}

/**
 * Whether the database takes `COPY … FROM STDIN`: a PostgreSQL server does; the embedded PGlite
 * behind its socket does not (the statement ends the connection), so it is asked first, and a
 * run there inserts with {@link prepareInsertRecords}.
 */
export async function supportsCopyFromStdin(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ embedded: boolean }>(`select version() like '%PGlite%' as embedded`);
  return rows[0]?.embedded === false;
}

/**
 * Builds the insert of a window's quarantined records into `records_quarantine` (one statement,
 * the columns as parallel arrays) without sending it, like {@link prepareInsertRecords}.
 * Nothing decodes `text`: it goes to a `text` column as sent.
 *
 * @returns undefined when there is nothing to insert.
 */
export function prepareInsertQuarantined(target: WindowTarget, rows: readonly QuarantineRow[]): PreparedQuery | undefined {
  if (rows.length === 0) return undefined;
  const { t, source, window, runId } = target;
  return {
    text: `insert into ${t.quarantine} (source, payload_text, json_path, reason, sqlstate, message, event_time, window_start, window_end, run_id)
     select $8::text, q.payload_text, q.json_path, q.reason, q.sqlstate, q.message, q.event_time, $1, $2, $3
       from unnest($4::text[], $5::text[], $6::text[], $7::timestamptz[], $9::text[], $10::text[])
         as q(payload_text, json_path, reason, event_time, sqlstate, message)`,
    values: [
      new Date(window.start),
      new Date(window.end),
      runId,
      rows.map((r) => r.text),
      rows.map((r) => r.path ?? null),
      rows.map((r) => r.reason ?? null),
      timestampArray(rows.map((r) => r.eventTime)),
      source,
      rows.map((r) => r.sqlstate ?? null),
      rows.map((r) => (r.message === undefined ? null : storableText(r.message))),
    ],
  };
}

/** Inserts a window's quarantined records in one round trip (see {@link prepareInsertQuarantined}). */
export async function insertQuarantined(db: Queryable, target: WindowTarget, rows: readonly QuarantineRow[]): Promise<void> {
  const query = prepareInsertQuarantined(target, rows);
  if (query !== undefined) await db.query(query.text, query.values);
}

/** Deletes the quarantined rows of the windows inside the target's window. @returns how many. */
export async function deleteQuarantined(db: Queryable, target: Pick<WindowTarget, 't' | 'source' | 'window'>): Promise<number> {
  const { t, source, window } = target;
  const { rowCount } = await db.query(`delete from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2`, [
    new Date(window.start),
    new Date(window.end),
    source,
  ]);
  return rowCount ?? 0;
}
