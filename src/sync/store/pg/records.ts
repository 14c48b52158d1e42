/**
 * Statements on `records` and `records_quarantine` for one window's load (the COPY path is
 * records-copy.ts): a page's insert, built while the previous one runs; quarantined rows. Design:
 * docs/design/sync-run.md.
 */
import { storableText } from '../../../errors.js';
import type { AnalyticsRecord } from '../../../upstream/analytics.js';
import { timestampArray } from '../../rows/copy-rows.js';
import type { PageRows, QuarantineRow } from '../../rows/page-rows.js';
import type { Queryable, WindowTarget } from './tables.js';

export interface PreparedQuery {
  text: string;
  values: unknown[];
}

/** One round trip: the page as one jsonb, the kept positions and event times as arrays. @returns undefined when none is kept. */
export function prepareInsertRecords(target: WindowTarget, page: PageRows): PreparedQuery | undefined {
  if (page.keep.length === 0) return undefined;
  const { t, source, window } = target;
  const text = 'text' in page ? page.text : keptRecordsText(page.records, page.keep);
  const insert = `insert into ${t.records} (source, payload, event_time, window_start)
     select $5::text, r.payload, e.event_time, $1
       from jsonb_array_elements($2::jsonb -> 'data') with ordinality as r(payload, n)
       join unnest($3::int[], $4::timestamptz[]) as e(n, event_time) using (n)`;
  const values = [new Date(window.start), jsonbBinary(text), ordinalArray(page.keep), timestampArray(page.eventTimes), source];
  return { text: insert, values };
}

/** `{"data":[…]}` with every position not kept `null`, so positions stay. */
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

function ordinalArray(positions: readonly number[]): string {
  let text = '{';
  for (let i = 0; i < positions.length; i++) text += i === 0 ? String(positions[i]! + 1) : `,${positions[i]! + 1}`;
  return `${text}}`;
}

/** jsonb's binary format (version byte 1, then UTF-8), encoded here to overlap the previous insert. */
function jsonbBinary(json: string): Buffer {
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(json));
  bytes[0] = 1;
  bytes.write(json, 1, 'utf8');
  return bytes;
}

/** False for the embedded PGlite, whose socket ends the connection on `COPY … FROM STDIN`. */
export async function supportsCopyFromStdin(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ embedded: boolean }>(`select version() like '%PGlite%' as embedded`);
  return rows[0]?.embedded === false;
}

/** One statement, the columns as arrays; `text` goes to a text column as sent. @returns undefined for none. */
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

export async function insertQuarantined(db: Queryable, target: WindowTarget, rows: readonly QuarantineRow[]): Promise<void> {
  const query = prepareInsertQuarantined(target, rows);
  if (query !== undefined) await db.query(query.text, query.values);
}

/** @returns the rows deleted. */
export async function deleteQuarantined(db: Queryable, target: Pick<WindowTarget, 't' | 'source' | 'window'>): Promise<number> {
  const { t, source, window } = target;
  const { rowCount } = await db.query(`delete from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2`, [
    new Date(window.start),
    new Date(window.end),
    source,
  ]);
  return rowCount ?? 0;
}
