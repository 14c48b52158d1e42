/**
 * SQL of the ETL: one statement group per function, parameterised, the schema quoted as an
 * identifier. Window functions run inside the caller's transaction (see run.ts).
 *
 * Every function reads and writes one source's rows (`source`, the source's name): its ledger,
 * watermark, runs, records and quarantine are its own, in tables every source shares.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { from as copyFrom, type CopyStreamQuery } from 'pg-copy-streams';
import { quoteIdent, type PoolClient } from '../db/pool.js';
import { InvalidArgumentError } from '../errors.js';
import { dataElementByteSpans } from '../upstream/page-text.js';
import type { AnalyticsRecord } from '../upstream/analytics.js';
import type { Derived } from './derived.js';
import type { Window } from './windows.js';

export type RunStatus = 'succeeded' | 'failed' | 'interrupted';

/** Qualified table names of one schema. */
export class Tables {
  readonly records: string;
  readonly quarantine: string;
  readonly windows: string;
  readonly runs: string;
  readonly state: string;
  /** Tables derived from records (src/sync/derived.ts). */
  readonly hourly: string;
  readonly hourlyDistinct: string;
  readonly fields: string;
  readonly derivedSettings: string;
  readonly typedView: string;
  readonly tryTimestamptz: string;

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
    this.derivedSettings = `${q}.derived_settings`;
    this.typedView = `${q}.records_typed`;
    this.tryTimestamptz = `${q}.records_try_timestamptz`;
  }
}

/** The source's watermark in milliseconds since the epoch, or undefined before its first committed window. */
export async function readWatermark(db: Pick<PoolClient, 'query'>, t: Tables, source: string): Promise<number | undefined> {
  const { rows } = await db.query<{ watermark: Date | null }>(`select watermark from ${t.state} where source = $1`, [source]);
  return rows[0]?.watermark?.getTime() ?? undefined;
}

/** The source's committed windows overlapping [from, to). */
export async function committedWindows(db: PoolClient, t: Tables, source: string, range: Window): Promise<Window[]> {
  const { rows } = await db.query<{ start: Date; end: Date }>(
    `select window_start as "start", window_end as "end" from ${t.windows}
      where source = $3 and window_start < $2 and window_end > $1 order by window_start`,
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

/** The source's committed windows in [from, to) with the record count E6 gave for each, for {@link RecordEstimate}; also the last one before `from`. */
export async function ledgerCounts(db: PoolClient, t: Tables, source: string, from: number, to: number): Promise<(Window & { totalRecords: number })[]> {
  const { rows } = await db.query<{ start: Date; end: Date; total: string }>(
    `(select window_start as "start", window_end as "end", total_records as "total" from ${t.windows}
       where source = $3 and window_start < $2 and window_end > $1)
     union all
     (select window_start, window_end, total_records from ${t.windows} where source = $3 and window_end <= $1 order by window_end desc limit 1)`,
    [new Date(from), new Date(to), source],
  );
  return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), totalRecords: Number(r.total) }));
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

/** Records the end of a run. `error` is a message without secrets. */
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
    result.error ?? null,
  ]);
}

/**
 * Deletes what is loaded for the source's windows inside `window` (records, quarantined records and
 * ledger rows), before reloading it; with `derived`, the same statement deletes the windows' rows of
 * records_hourly (also those of windows whose records RETENTION dropped) and subtracts the deleted
 * records from the field catalogue's counts.
 *
 * @returns the number of records deleted (quarantined ones not counted).
 */
export async function clearWindow(db: PoolClient, t: Tables, source: string, window: Window, derived?: Derived): Promise<number> {
  const bounds = [new Date(window.start), new Date(window.end), source];
  const rowCount =
    derived !== undefined
      ? await derived.deleteWindowRecords(db, source, window)
      : (await db.query(`delete from ${t.records} where source = $3 and window_start >= $1 and window_start < $2`, bounds)).rowCount;
  await db.query(`delete from ${t.quarantine} where source = $3 and window_start >= $1 and window_start < $2`, bounds);
  await db.query(`delete from ${t.windows} where source = $3 and window_start >= $1 and window_start < $2`, bounds);
  return rowCount ?? 0;
}

/** A prepared statement text and its parameters, ready for `db.query(text, values)`. */
export interface PreparedQuery {
  text: string;
  values: unknown[];
}

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
 * Builds the insert of one page's kept records, in one round trip (the page travels as one jsonb
 * value, the kept positions and their event times as two arrays, joined by position), without
 * sending it, so a caller can prepare the next page while the database is still busy with the
 * previous one. (The window's rows reach records_hourly once the window is loaded: Derived.windowRollupQuery.)
 *
 * @returns undefined when there is nothing to insert.
 */
export function prepareInsertRecords(t: Tables, source: string, window: Window, runId: number, page: PageRows): PreparedQuery | undefined {
  if (page.keep.length === 0) return undefined;
  const text = 'text' in page ? page.text : keptRecordsText(page.records, page.keep);
  const insert = `insert into ${t.records} (source, payload, event_time, window_start, window_end, run_id)
     select $7::text, r.payload, e.event_time, $1, $2, $3
       from jsonb_array_elements($4::jsonb -> 'data') with ordinality as r(payload, n)
       join unnest($5::int[], $6::timestamptz[]) as e(n, event_time) using (n)`;
  const values = [new Date(window.start), new Date(window.end), runId, jsonbBinary(text), ordinalArray(page.keep), timestampArray(page.eventTimes), source];
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

const MS_PER_DAY = 86_400_000;
/** Length of `YYYY-MM-DDT`, the date part of a four-digit year's ISO text. */
const DATE_BYTES = 11;
/** 10000-01-01T00:00:00Z: from here on `toISOString` writes six-digit years. */
const YEAR_10000_MS = 253_402_300_800_000;
const PAD2 = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
const PAD3 = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));

/**
 * Writes instants (milliseconds since the epoch) exactly as `new Date(ms).toISOString()` writes
 * them (UTC, milliseconds, `Z`): text PostgreSQL reads as the same timestamptz, which needs no
 * quoting in an array literal nor escaping in a COPY row.
 *
 * Records of a page mostly share their day, so the date part is formatted once per day and the
 * time of day from tables; times before 1970, from the year 10000 on, or with a fraction of a
 * millisecond take `toISOString` itself. {@link format} gives the text as a string, {@link write}
 * puts it into a buffer as ASCII bytes (the COPY rows).
 */
export class IsoWriter {
  private day = Number.NaN;
  private datePart = '';
  /** The day and date part of {@link write}, apart from {@link format}'s. */
  private bytesDay = Number.NaN;
  private readonly dateBytes: number[] = Array.from({ length: DATE_BYTES }, () => 0);

  /** `new Date(ms).toISOString()`, for `ms` any valid time value in milliseconds since the epoch. */
  format(ms: number): string {
    if (!(Number.isInteger(ms) && ms >= 0 && ms < YEAR_10000_MS)) return new Date(ms).toISOString();
    let rest = ms % MS_PER_DAY;
    const dayStart = ms - rest;
    if (dayStart !== this.day) {
      this.day = dayStart;
      this.datePart = new Date(dayStart).toISOString().slice(0, 11); // YYYY-MM-DDT
    }
    const hours = Math.floor(rest / 3_600_000);
    rest -= hours * 3_600_000;
    const minutes = Math.floor(rest / 60_000);
    rest -= minutes * 60_000;
    const seconds = Math.floor(rest / 1000);
    return `${this.datePart}${PAD2[hours]}:${PAD2[minutes]}:${PAD2[seconds]}.${PAD3[rest - seconds * 1000]}Z`;
  }

  /**
   * Writes the text {@link format} gives into `out` at `at` as ASCII bytes, without making a
   * string on the fast path; `out` must have room for {@link MAX_ISO_BYTES}.
   *
   * @returns the index after the last byte written.
   */
  write(out: Buffer, at: number, ms: number): number {
    if (!(Number.isInteger(ms) && ms >= 0 && ms < YEAR_10000_MS)) return at + out.write(new Date(ms).toISOString(), at, 'latin1');
    let rest = ms % MS_PER_DAY;
    const dayStart = ms - rest;
    if (dayStart !== this.bytesDay) {
      this.bytesDay = dayStart;
      const date = new Date(dayStart).toISOString();
      for (let i = 0; i < DATE_BYTES; i++) this.dateBytes[i] = date.charCodeAt(i);
    }
    const dateBytes = this.dateBytes;
    for (let i = 0; i < DATE_BYTES; i++) out[at + i] = dateBytes[i]!;
    at += DATE_BYTES;
    const hours = Math.floor(rest / 3_600_000);
    rest -= hours * 3_600_000;
    const minutes = Math.floor(rest / 60_000);
    rest -= minutes * 60_000;
    const seconds = Math.floor(rest / 1000);
    const millis = rest - seconds * 1000;
    out[at] = DIGIT_0 + Math.floor(hours / 10);
    out[at + 1] = DIGIT_0 + (hours % 10);
    out[at + 2] = COLON;
    out[at + 3] = DIGIT_0 + Math.floor(minutes / 10);
    out[at + 4] = DIGIT_0 + (minutes % 10);
    out[at + 5] = COLON;
    out[at + 6] = DIGIT_0 + Math.floor(seconds / 10);
    out[at + 7] = DIGIT_0 + (seconds % 10);
    out[at + 8] = DOT;
    out[at + 9] = DIGIT_0 + Math.floor(millis / 100);
    out[at + 10] = DIGIT_0 + (Math.floor(millis / 10) % 10);
    out[at + 11] = DIGIT_0 + (millis % 10);
    out[at + 12] = LETTER_Z;
    return at + 13;
  }
}

const DIGIT_0 = 0x30;
const COLON = 0x3a;
const DOT = 0x2e;
const LETTER_Z = 0x5a;
/** Longest text `toISOString` writes (`+275760-09-13T00:00:00.000Z`), in bytes. */
const MAX_ISO_BYTES = 27;

/** The timestamptz[] literal of instants in milliseconds ({@link IsoWriter}), nulls as NULL. */
function timestampArray(values: readonly (number | null)[]): string {
  const iso = new IsoWriter();
  let text = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) text += ',';
    const ms = values[i];
    text += ms === null || ms === undefined ? 'NULL' : iso.format(ms);
  }
  return `${text}}`;
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

/** Characters COPY's text format escapes inside a column (the backslash, and the row and column delimiters). */
const COPY_SPECIAL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A value as a column of COPY's text format. */
function copyText(value: string): string {
  return value.replace(COPY_SPECIAL, (c) => COPY_ESCAPES[c]!);
}

/**
 * One window's records streamed into `records` with `COPY … FROM STDIN` (text format) in the
 * caller's transaction: each page's rows are written as the page comes, and PostgreSQL parses and
 * inserts them meanwhile (COPY batches its heap inserts, which an insert … select does row by row).
 * Each payload is the record's exact JSON text from the E6 body (its span, {@link dataElementByteSpans}),
 * which jsonb parses exactly as it parses the record inside the whole body: stored rows are those
 * {@link prepareInsertRecords} stores. The connection serves nothing else until {@link end} or
 * {@link abort}. A PostgreSQL server only ({@link supportsCopyFromStdin}).
 */
export class RecordsCopy {
  private stream: CopyStreamQuery | undefined;
  private failure: Error | undefined;
  private readonly rows: CopyRows;

  constructor(
    private readonly db: PoolClient,
    private readonly t: Tables,
    source: string,
    window: Window,
    runId: number,
  ) {
    this.rows = new CopyRows(source, window, runId);
  }

  /**
   * Writes the page's kept records; resolves when the connection takes more (at most about a page
   * waits in memory).
   *
   * @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept
   *   positions; the COPY's error (a missing partition, a payload jsonb refuses).
   */
  async write(page: PageRows): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (page.keep.length === 0) return;
    const rows = this.rows.of(page);
    this.stream ??= this.open();
    if (!this.stream.write(rows)) await once(this.stream, 'drain');
  }

  /**
   * Ends the COPY and waits for PostgreSQL to have stored every row.
   *
   * @returns the rows it stored.
   * @throws the COPY's error.
   */
  async end(): Promise<number> {
    if (this.failure !== undefined) throw this.failure;
    if (this.stream === undefined) return 0;
    this.stream.end();
    await finished(this.stream);
    return this.stream.rowCount;
  }

  /**
   * Cancels an unfinished COPY (CopyFail: PostgreSQL discards its rows, and the transaction can
   * roll back), and waits until the connection is free. Never throws.
   *
   * @returns the COPY's own error when it failed before (it is the earlier failure), else undefined.
   */
  async abort(reason: Error): Promise<Error | undefined> {
    const failed = this.failure;
    const stream = this.stream;
    // A COPY that already failed has no connection left to send CopyFail on (pg-copy-streams drops
    // it with the error), and would never report the cancel done: waiting for it would hang.
    if (stream !== undefined && failed === undefined && !stream.destroyed && !stream.writableFinished) {
      stream.destroy(reason);
      await finished(stream).catch(() => undefined);
    }
    return failed;
  }

  private open(): CopyStreamQuery {
    const stream = this.db.query(copyFrom(`copy ${this.t.records} (source, payload, event_time, window_start, window_end, run_id) from stdin`));
    // Kept for write/end; listening also keeps a failure from being an unhandled 'error' event.
    stream.on('error', (err: Error) => {
      this.failure ??= err;
    });
    return stream;
  }
}

/**
 * The rows {@link RecordsCopy} writes for one window: each kept record of a page as a line of
 * COPY's text format (`source`, payload, event_time, window_start, window_end, run_id, tab-separated),
 * as the UTF-8 bytes sent. The payload is the record's exact JSON text from the page's text
 * ({@link dataElementByteSpans}), escaped as COPY's text format requires.
 */
export class CopyRows {
  private readonly prefixText: string;
  private readonly suffixText: string;
  private readonly prefix: Buffer;
  private readonly suffix: Buffer;
  /** `suffix` then `prefix`: from one row's payload and time to the next one's. */
  private readonly between: Buffer;
  private readonly iso = new IsoWriter();

  constructor(source: string, window: Window, runId: number) {
    this.prefixText = `${copyText(source)}\t`;
    this.suffixText = `\t${new Date(window.start).toISOString()}\t${new Date(window.end).toISOString()}\t${runId}\n`;
    this.prefix = Buffer.from(this.prefixText, 'utf8');
    this.suffix = Buffer.from(this.suffixText, 'utf8');
    this.between = Buffer.concat([this.suffix, this.prefix]);
  }

  /**
   * The rows of the page's kept records, one line each.
   *
   * @throws {InvalidArgumentError} when the page's text holds no `data` array covering its kept positions.
   */
  of(page: PageRows): Buffer {
    const { keep, eventTimes } = page;
    if (!('text' in page)) {
      let text = '';
      for (let k = 0; k < keep.length; k++) text += this.row(JSON.stringify(page.records[keep[k]!]), eventTimes[k] ?? null);
      return Buffer.from(text, 'utf8');
    }
    // The page's text in UTF-8 (as E6 sent it, or encoded once), each record's payload copied from
    // it as bytes: the same bytes as encoding each record's text, without a string per record.
    const bytes = page.bytes ?? Buffer.from(page.text, 'utf8');
    const spans = dataElementByteSpans(bytes);
    if (spans === undefined || keep[keep.length - 1]! >= spans.length / 2) {
      throw new InvalidArgumentError('a page to store has no data array holding its records in its text');
    }
    // Valid JSON has a backslash only in escapes and a tab, LF or CR only as whitespace, all rare:
    // when the page has none, no payload needs COPY's escaping and its bytes are copied as they are.
    const plain = !COPY_SPECIAL_BYTES.some((b) => bytes.includes(b));
    let size = 0;
    for (let k = 0; k < keep.length; k++) size += spans[2 * keep[k]! + 1]! - spans[2 * keep[k]!]!;
    const fixed = this.prefix.length + 1 + MAX_ISO_BYTES + this.suffix.length;
    const out = Buffer.allocUnsafe((plain ? size : 2 * size) + keep.length * fixed);
    // One copy between rows: a row's last columns and the next row's first are always the same bytes.
    let at = this.prefix.copy(out, 0);
    for (let k = 0; k < keep.length; k++) {
      const start = spans[2 * keep[k]!]!;
      const end = spans[2 * keep[k]! + 1]!;
      if (k > 0) at += this.between.copy(out, at);
      at = plain ? at + bytes.copy(out, at, start, end) : copyEscaped(bytes, start, end, out, at);
      out[at++] = TAB;
      const ms = eventTimes[k] ?? null;
      if (ms === null) {
        out[at++] = BACKSLASH;
        out[at++] = LETTER_N;
      } else {
        at = this.iso.write(out, at, ms);
      }
    }
    at += this.suffix.copy(out, at);
    return out.subarray(0, at);
  }

  private row(payload: string, eventTime: number | null): string {
    return `${this.prefixText}${copyText(payload)}\t${eventTime === null ? '\\N' : this.iso.format(eventTime)}${this.suffixText}`;
  }
}

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const BACKSLASH = 0x5c;
const LETTER_N = 0x4e;
const LETTER_T = 0x74;
const LETTER_R = 0x72;
const LETTER_LOWER_N = 0x6e;
/** Bytes COPY's text format escapes inside a column ({@link COPY_SPECIAL}). */
const COPY_SPECIAL_BYTES = [BACKSLASH, LF, CR, TAB];

/**
 * Copies bytes [start, end) of `from` into `out` at `at` as a column of COPY's text format
 * ({@link copyText} over bytes: the multi-byte characters of UTF-8 hold no byte below 0x80).
 *
 * @returns the index after the last byte written; `out` must have room for twice the span.
 */
function copyEscaped(from: Buffer, start: number, end: number, out: Buffer, at: number): number {
  for (let i = start; i < end; i++) {
    const c = from[i]!;
    if (c === BACKSLASH) {
      out[at++] = BACKSLASH;
      out[at++] = BACKSLASH;
    } else if (c === LF) {
      out[at++] = BACKSLASH;
      out[at++] = LETTER_LOWER_N;
    } else if (c === CR) {
      out[at++] = BACKSLASH;
      out[at++] = LETTER_R;
    } else if (c === TAB) {
      out[at++] = BACKSLASH;
      out[at++] = LETTER_T;
    } else {
      out[at++] = c;
    }
  }
  return at;
}

/** One quarantined record as stored (see {@link prepareInsertQuarantined}). */
export interface QuarantineRow {
  /**
   * The record's JSON text (AnalyticsPage.quarantined[].text): stored as is in a `text` column, which
   * holds it exactly; jsonb would refuse it. It never holds a NUL byte (U+0000 is the escape `\u0000`).
   */
  text: string;
  /** Where in the record the problem is, JSONPath-like. */
  path: string;
  /** What the problem is. */
  reason: string;
  /** The record's event time in milliseconds since the epoch, or null when it has none. */
  eventTime: number | null;
}

/**
 * Builds the insert of a window's quarantined records into `records_quarantine` (one statement,
 * the columns as parallel arrays) without sending it; like {@link prepareInsertRecords}, and
 * replaced with the window's records by {@link clearWindow}. Nothing decodes `text`: it goes to
 * a `text` column as sent.
 *
 * @returns undefined when there is nothing to insert.
 */
export function prepareInsertQuarantined(t: Tables, source: string, window: Window, runId: number, rows: readonly QuarantineRow[]): PreparedQuery | undefined {
  if (rows.length === 0) return undefined;
  return {
    text: `insert into ${t.quarantine} (source, payload_text, json_path, reason, event_time, window_start, window_end, run_id)
     select $8::text, q.payload_text, q.json_path, q.reason, q.event_time, $1, $2, $3
       from unnest($4::text[], $5::text[], $6::text[], $7::timestamptz[]) as q(payload_text, json_path, reason, event_time)`,
    values: [
      new Date(window.start),
      new Date(window.end),
      runId,
      rows.map((r) => r.text),
      rows.map((r) => r.path),
      rows.map((r) => r.reason),
      timestampArray(rows.map((r) => r.eventTime)),
      source,
    ],
  };
}

/** Inserts a window's quarantined records in one round trip (see {@link prepareInsertQuarantined}). */
export async function insertQuarantined(
  db: PoolClient,
  t: Tables,
  source: string,
  window: Window,
  runId: number,
  rows: readonly QuarantineRow[],
): Promise<void> {
  const query = prepareInsertQuarantined(t, source, window, runId, rows);
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
  t: Tables,
  source: string,
  window: Window,
  summary: { recordCount: number; totalRecords: number; pages: number; runId: number },
): Promise<number | undefined> {
  await db.query(
    `insert into ${t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id) values ($7, $1, $2, $3, $4, $5, $6)`,
    [new Date(window.start), new Date(window.end), summary.recordCount, summary.totalRecords, summary.pages, summary.runId, source],
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
