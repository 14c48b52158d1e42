/**
 * SQL of the ETL: one statement group per function, parameterised, the schema quoted as an
 * identifier. Window functions run inside the caller's transaction (store-pg.ts, the run's
 * PostgreSQL store, calls them; the COPY path is records-copy.ts).
 *
 * Every function reads and writes one source's rows (`source`, the source's name): its ledger,
 * watermark, runs, records and quarantine are its own, in tables every source shares.
 */
import { quoteIdent, type PoolClient } from '../../../db/pool.js';
import { storableText } from '../../../errors.js';
import type { AnalyticsRecord } from '../../../upstream/analytics.js';
import { timestampArray } from '../../rows/copy-rows.js';
import { CONTRACT_REASON_PREFIX } from '../../derived/fields/schema-changes.js';
import type { PageRows, QuarantineRow } from '../../rows/page-rows.js';
import type { StoredWindow, Window } from '../../windows.js';

export type { PageRows, QuarantineRow } from '../../rows/page-rows.js';

export type RunStatus = 'succeeded' | 'failed' | 'interrupted';

/** Qualified table names of one schema. */
export class Tables {
  readonly records: string;
  readonly quarantine: string;
  readonly windows: string;
  readonly runs: string;
  readonly state: string;
  /** Tables derived from records (src/sync/derived/index.ts). */
  readonly hourly: string;
  readonly hourlyDistinct: string;
  readonly fields: string;
  /** Fields and types the catalogue gained after each source's first run (src/sync/run/field-contract.ts). */
  readonly fieldChanges: string;
  readonly derivedSettings: string;
  readonly typedView: string;
  readonly tryTimestamptz: string;
  readonly tryJsonb: string;

  constructor(readonly schema: string) {
    const q = quoteIdent(schema);
    this.records = `${q}.records`;
    this.quarantine = `${q}.records_quarantine`;
    this.windows = `${q}.sync_windows`;
    this.runs = `${q}.sync_runs`;
    this.state = `${q}.sync_state`;
    this.hourly = `${q}.records_hourly`;
    this.hourlyDistinct = `${q}.records_hourly_distinct`;
    this.fields = `${q}.record_fields`;
    this.fieldChanges = `${q}.record_field_changes`;
    this.derivedSettings = `${q}.derived_settings`;
    this.typedView = `${q}.records_typed`;
    this.tryTimestamptz = `${q}.records_try_timestamptz`;
    this.tryJsonb = `${q}.records_try_jsonb`;
  }
}

/** The source's watermark in milliseconds since the epoch, or undefined before its first committed window. */
export async function readWatermark(db: Pick<PoolClient, 'query'>, t: Tables, source: string): Promise<number | undefined> {
  const { rows } = await db.query<{ watermark: Date | null }>(`select watermark from ${t.state} where source = $1`, [source]);
  return rows[0]?.watermark?.getTime() ?? undefined;
}

/** The source's committed windows overlapping [from, to) (not the parked ones: parked.ts). */
export async function committedWindows(db: PoolClient, t: Tables, source: string, range: Window): Promise<Window[]> {
  const { rows } = await db.query<{ start: Date; end: Date }>(
    `select window_start as "start", window_end as "end" from ${t.windows}
      where source = $3 and status = 'committed' and window_start < $2 and window_end > $1 order by window_start`,
    [new Date(range.start), new Date(range.end), source],
  );
  return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime() }));
}

/** The source's expired windows (RETENTION dropped their records) overlapping [from, to), in time order. */
export async function expiredWindows(db: PoolClient, t: Tables, source: string, range: Window): Promise<Window[]> {
  const { rows } = await db.query<{ start: Date; end: Date }>(
    `select window_start as "start", window_end as "end" from ${t.windows}
      where source = $3 and expired_at is not null and window_start < $2 and window_end > $1 order by window_start`,
    [new Date(range.start), new Date(range.end), source],
  );
  return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime() }));
}

/**
 * The source's ledger windows overlapping [from, to), committed and parked, but the expired ones,
 * in time order, each with the rows stored for it (records and quarantined records: both carry
 * their window's start), whether a ledger window ends where it starts, and whether it is parked.
 * Every window of the ledger the audit compares is listed here, and only here.
 */
export async function auditWindows(db: PoolClient, t: Tables, source: string, range: Window): Promise<StoredWindow[]> {
  const { rows } = await db.query<{ start: Date; end: Date; stored: string; seen: string; followsLedger: boolean; parked: boolean }>(
    `with w as (
       select window_start, window_end, status, total_records from ${t.windows}
        where source = $3 and expired_at is null and window_start < $2 and window_end > $1),
     bounds as (select min(window_start) as lo, max(window_start) as hi from w),
     r as (
       select window_start, count(*) as n from ${t.records}, bounds
        where source = $3 and window_start >= bounds.lo and window_start <= bounds.hi group by window_start),
     q as (
       select window_start, count(*) as n from ${t.quarantine}, bounds
        where source = $3 and window_start >= bounds.lo and window_start <= bounds.hi group by window_start)
     select w.window_start as "start", w.window_end as "end", coalesce(r.n, 0) + coalesce(q.n, 0) as stored, w.total_records as seen,
            exists (select 1 from ${t.windows} p where p.source = $3 and p.window_end = w.window_start) as "followsLedger",
            w.status = 'parked' as parked
       from w left join r using (window_start) left join q using (window_start)
      order by w.window_start`,
    [new Date(range.start), new Date(range.end), source],
  );
  return rows.map((r) => ({
    start: r.start.getTime(),
    end: r.end.getTime(),
    stored: Number(r.stored),
    seen: Number(r.seen),
    followsLedger: r.followsLedger,
    parked: r.parked,
  }));
}

/**
 * The source's committed windows in [range.start, range.end) with the record count E6 gave for each,
 * for split.ts's RecordEstimate; also the last one before the range. Parked windows have no count
 * E6 gave (and 0 would read as an empty window): they are left out.
 */
export async function ledgerCounts(db: PoolClient, t: Tables, source: string, range: Window): Promise<(Window & { totalRecords: number })[]> {
  const { rows } = await db.query<{ start: Date; end: Date; total: string }>(
    `(select window_start as "start", window_end as "end", total_records as "total" from ${t.windows}
       where source = $3 and status = 'committed' and window_start < $2 and window_end > $1)
     union all
     (select window_start, window_end, total_records from ${t.windows}
       where source = $3 and status = 'committed' and window_end <= $1 order by window_end desc limit 1)`,
    [new Date(range.start), new Date(range.end), source],
  );
  return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), totalRecords: Number(r.total) }));
}

/**
 * Of `boundarySet` (E6 record texts at the instant `end`, a multiset), those the ledger window of
 * `source` ending at `end` stores: records whose payload equals the text as jsonb (texts jsonb
 * refuses match none, through records_try_jsonb), and quarantined records of the same text. A
 * parked or expired window there owns them all; no window there, none. Reads only.
 *
 * @returns a multiset, each text at most as often as in `boundarySet`.
 */
export async function heldAtEnd(
  db: Pick<PoolClient, 'query'>,
  t: Tables,
  source: string,
  end: number,
  boundarySet: ReadonlyMap<string, number>,
): Promise<Map<string, number>> {
  const { rows: windows } = await db.query<{ start: Date; owns: boolean }>(
    `select window_start as start, (status = 'parked' or expired_at is not null) as owns from ${t.windows} where source = $1 and window_end = $2`,
    [source, new Date(end)],
  );
  const window = windows[0];
  if (window === undefined) return new Map();
  if (window.owns) return new Map(boundarySet);
  const texts = [...boundarySet.keys()];
  const { rows } = await db.query<{ i: number; n: number }>(
    // One pass over the window's rows (a hash join on the payload), not one per text.
    `with b as (select text, i, ${t.tryJsonb}(text) as payload from unnest($3::text[]) with ordinality as u(text, i)),
          r as (select b.i, count(*) as n from b join ${t.records} r on r.payload = b.payload where r.source = $1 and r.window_start = $2 group by b.i),
          q as (select b.i, count(*) as n from b join ${t.quarantine} q on q.payload_text = b.text where q.source = $1 and q.window_start = $2 group by b.i)
     select b.i::int as i, (coalesce(r.n, 0) + coalesce(q.n, 0))::int as n from b left join r using (i) left join q using (i)`,
    [source, window.start, texts],
  );
  const held = new Map<string, number>();
  for (const { i, n } of rows) {
    const text = texts[i - 1]!;
    if (n > 0) held.set(text, Math.min(n, boundarySet.get(text)!));
  }
  return held;
}

/**
 * Marks the source's runs left `running` by a process that died (SIGKILL, power loss) as
 * `abandoned`. Called while holding the source's sync lock, so no live run of it is among them
 * (other sources' runs are theirs to mark).
 */
export async function abandonStaleRuns(db: PoolClient, t: Tables, source: string): Promise<number> {
  const { rowCount } = await db.query(`update ${t.runs} set status = 'abandoned', finished_at = now() where source = $1 and status = 'running'`, [source]);
  return rowCount ?? 0;
}

/** Records the start of a run of the source; returns its id. */
export async function startRun(db: PoolClient, t: Tables, source: string, range: Window): Promise<number> {
  const { rows } = await db.query<{ id: string }>(`insert into ${t.runs} (source, range_start, range_end) values ($3, $1, $2) returning id`, [
    new Date(range.start),
    new Date(range.end),
    source,
  ]);
  return Number(rows[0]!.id);
}

/**
 * Records the end of a run. `error` is a message without secrets, stored as {@link storableText}
 * makes it (no NUL, valid UTF-8, bounded), so that recording a failure never fails on its text.
 */
export async function finishRun(
  db: PoolClient,
  t: Tables,
  runId: number,
  result: { status: RunStatus; windows: number; pages: number; records: number; error?: string },
): Promise<void> {
  await db.query(`update ${t.runs} set finished_at = now(), status = $2, windows = $3, pages = $4, records = $5, error = $6 where id = $1`, [
    runId,
    result.status,
    result.windows,
    result.pages,
    result.records,
    result.error === undefined ? null : storableText(result.error),
  ]);
}

/**
 * Deletes what is loaded for the source's windows inside `window` (records, quarantined records and
 * ledger rows), before reloading it. (The run deletes the records with its derived tables' rows
 * instead, then the rest with {@link clearWindowRest}.)
 *
 * @returns the number of records deleted (quarantined ones not counted).
 */
export async function clearWindow(db: PoolClient, t: Tables, source: string, window: Window): Promise<number> {
  const { rowCount } = await db.query(`delete from ${t.records} where source = $3 and window_start >= $1 and window_start < $2`, [
    new Date(window.start),
    new Date(window.end),
    source,
  ]);
  await clearWindowRest(db, t, source, window);
  return rowCount ?? 0;
}

/**
 * Deletes the quarantined records and ledger rows of the source's windows inside `window`:
 * {@link clearWindow} but the records. With `keep` (SYNC_SHRINK=keep) the quarantined rows are
 * first saved in the session's temporary table ({@link createKeptTables}), for {@link restoreKeptQuarantine}.
 *
 * @returns the quarantined records deleted.
 */
export async function clearWindowRest(db: PoolClient, t: Tables, source: string, window: Window, keep = false): Promise<number> {
  const bounds = [new Date(window.start), new Date(window.end), source];
  const gone = `delete from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2`;
  const { rowCount } = await db.query(
    keep
      ? `with gone as (${gone} returning payload_text, json_path, reason, sqlstate, message, event_time, run_id)
         insert into pg_temp.sync_kept_quarantine select * from gone`
      : gone,
    bounds,
  );
  await db.query(`delete from ${t.windows} where source = $3 and window_start >= $1 and window_start < $2`, bounds);
  return rowCount ?? 0;
}

/**
 * Creates, when the session has none yet, the temporary tables where a window's stored rows wait
 * while it is re-read under SYNC_SHRINK=keep (emptied at each commit): `sync_kept_records` for
 * Derived.deleteWindowRecords, `sync_kept_quarantine` for {@link clearWindowRest}, and
 * `sync_kept_owned` for {@link saveOwned}.
 */
export async function createKeptTables(db: Pick<PoolClient, 'query'>): Promise<void> {
  await db.query(
    `create temp table if not exists sync_kept_records (
       n bigint generated always as identity, payload jsonb not null, event_time timestamptz, run_id bigint not null
     ) on commit delete rows;
     create temp table if not exists sync_kept_quarantine (
       payload_text text not null, json_path text, reason text, sqlstate text, message text, event_time timestamptz, run_id bigint not null
     ) on commit delete rows;
     create temp table if not exists sync_kept_owned (payload_text text not null, payload jsonb) on commit delete rows`,
  );
}

/**
 * SYNC_SHRINK=keep: saves the texts of the records this read of the window left out as its start's
 * boundary set (the window before owns them: E6 still returns them) in the session's temporary
 * table, with each as jsonb (null when jsonb refuses it), so that the union counts them as
 * returned ({@link restoreKeptQuarantine}, Derived.restoreKeptRecords).
 */
export async function saveOwned(db: Pick<PoolClient, 'query'>, t: Tables, texts: readonly string[]): Promise<void> {
  if (texts.length === 0) return;
  await db.query(`insert into pg_temp.sync_kept_owned (payload_text, payload) select x, ${t.tryJsonb}(x) from unnest($1::text[]) as x`, [texts]);
}

/**
 * SYNC_SHRINK=keep, once the window's quarantined records of this read are in: inserts again each
 * quarantined record saved by {@link clearWindowRest} as many times as it was stored beyond the
 * copies of the same text this read quarantined or left out as its start's boundary set
 * ({@link saveOwned}) (the union of both, by `payload_text`). A record
 * FIELD_CONTRACT=freeze quarantined (reason `contract:`) that this read stored in `records`
 * instead (the contract is `evolve` now, or its field is known since) counts as returned too,
 * compared as jsonb: it is loaded, not lost upstream.
 *
 * @returns the rows inserted again.
 */
export async function restoreKeptQuarantine(db: PoolClient, target: WindowTarget): Promise<number> {
  const { t, source, window } = target;
  // `stored` reads the window's records only when a contract row was kept (a one-time filter).
  const { rows } = await db.query<{ kept: string }>(
    `with kept as (
       select k.*, row_number() over (partition by payload_text) as copy from pg_temp.sync_kept_quarantine k
     ), loaded as (
       select payload_text, count(*) as n from (
         select payload_text from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2
         union all
         select payload_text from pg_temp.sync_kept_owned
       ) as now group by payload_text
     ), stored as (
       select c.payload_text, count(*) as n
         from (select distinct payload_text, ${t.tryJsonb}(payload_text) as payload from pg_temp.sync_kept_quarantine where reason like $4) c
         join (select payload from ${t.records}
                where source = $3 and window_start >= $1 and window_start < $2
                  and exists (select 1 from pg_temp.sync_kept_quarantine where reason like $4)) r on r.payload = c.payload
        group by c.payload_text
     ), back as (
       insert into ${t.quarantine} (source, payload_text, json_path, reason, sqlstate, message, event_time, window_start, window_end, run_id)
       select $3, k.payload_text, k.json_path, k.reason, k.sqlstate, k.message, k.event_time, $1, $2, k.run_id
         from kept k left join loaded l using (payload_text) left join stored s using (payload_text)
        where k.copy > coalesce(l.n, 0) + coalesce(s.n, 0)
       returning 1
     )
     select count(*) as kept from back`,
    [new Date(window.start), new Date(window.end), source, `${CONTRACT_REASON_PREFIX}%`],
  );
  return Number(rows[0]!.kept);
}

/** Where one window's rows go: the schema's tables, the source, the window and the run loading it. */
export interface WindowTarget {
  t: Tables;
  source: string;
  window: Window;
  runId: number;
}

/** A prepared statement text and its parameters, ready for `db.query(text, values)`. */
export interface PreparedQuery {
  text: string;
  values: unknown[];
}

/**
 * Builds the insert of one page's kept records, in one round trip (the page travels as one jsonb
 * value, the kept positions and their event times as two arrays, joined by position), without
 * sending it, so a caller can prepare the next page while the database is still busy with the
 * previous one. (The window's rows reach records_hourly once the window is loaded: Derived.windowRollupQuery.)
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
export async function supportsCopyFromStdin(db: Pick<PoolClient, 'query'>): Promise<boolean> {
  const { rows } = await db.query<{ embedded: boolean }>(`select version() like '%PGlite%' as embedded`);
  return rows[0]?.embedded === false;
}

/**
 * Builds the insert of a window's quarantined records into `records_quarantine` (one statement,
 * the columns as parallel arrays) without sending it; like {@link prepareInsertRecords}, and
 * replaced with the window's records by {@link clearWindow}. Nothing decodes `text`: it goes to
 * a `text` column as sent.
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
export async function insertQuarantined(db: PoolClient, target: WindowTarget, rows: readonly QuarantineRow[]): Promise<void> {
  const query = prepareInsertQuarantined(target, rows);
  if (query !== undefined) await db.query(query.text, query.values);
}

/**
 * Records a source's window as committed and advances the source's watermark to its end when the
 * window starts at or before the watermark (or there is none yet): the watermark never jumps a gap.
 * The source's sync_state row is created by its first window.
 *
 * @returns the watermark after the update, in milliseconds.
 */
export async function recordWindow(
  db: PoolClient,
  target: WindowTarget,
  summary: { recordCount: number; totalRecords: number; pages: number },
): Promise<number | undefined> {
  const { t, source, window, runId } = target;
  await db.query(
    `insert into ${t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id) values ($7, $1, $2, $3, $4, $5, $6)`,
    [new Date(window.start), new Date(window.end), summary.recordCount, summary.totalRecords, summary.pages, runId, source],
  );
  const { rows } = await db.query<{ watermark: Date | null }>(
    `insert into ${t.state} as s (source, watermark) values ($3, $2)
       on conflict (source) do update
        set watermark = case when s.watermark is null or $1 <= s.watermark then greatest(s.watermark, $2) else s.watermark end,
            updated_at = now()
      returning watermark`,
    [new Date(window.start), new Date(window.end), source],
  );
  return rows[0]?.watermark?.getTime() ?? undefined;
}
