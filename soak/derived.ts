/**
 * The end-of-soak check of the tables derived from `records` (src/sync/derived/index.ts), per source,
 * with the soak's settings (ROLLUP_DIMENSIONS event_type=eventType,customer_id=customerId;
 * ROLLUP_DISTINCT user_id=userId by customer_id=customerId; the field catalogue on).
 *
 * The truth is, per committed window, the records `records` holds for it, or, for a window
 * RETENTION expired, what the simulator serves for its range (by E6's filter time): retention drops records and keeps
 * the rollups and the catalogue's counts. A record inserted upstream (a late arrival) less than
 * `graceMs` (one audit period and the audit's run) before its window expired is optional in that
 * truth, and counted: no audit had to run between its arrival and the drop, but one may have (the
 * soak of 2026-11-27 23:00 saw an audit's own request bring one that its repair stored 3 minutes
 * before the drop). A table's count passes from the truth without them to the truth with them. From it:
 * - records_hourly: records per (hour of the event time, window start, event_type, customer_id);
 * - records_hourly_distinct: the user_id values of each (hour, window start, customer_id), as the
 *   elements of its rows' `distinct_values` arrays;
 * - records_daily_distinct: the user_id values of each (UTC day, customer_id), likewise;
 * - record_fields: every top-level field, with the records holding it;
 * - records_typed: selects, one row per stored record.
 * Tables are compared row by row (a missing, extra or different row is a problem).
 */
import type pg from 'pg';
import type { Insertion, Simulator } from '@analytics-exporter/simulator';
import { multisetMinus } from './verify.js';

const MS_PER_HOUR = 3_600_000;
const MS_PER_DAY = 86_400_000;

/** Outcome of {@link verifyDerived} for one source. */
export interface DerivedCheck {
  pass: boolean;
  /** Rows compared per table (the expected side), and of them those from expired windows. */
  rows: { hourly: number; hourlyDistinct: number; dailyDistinct: number; fields: number };
  expiredRows: { hourly: number; hourlyDistinct: number };
  /** Records of expired windows that may be counted or not: inserted upstream less than `graceMs` before their window expired. */
  arrivedTooLate: number;
  /** Rows of records_typed for the source. */
  typedRows: number;
  /** Up to 10 problems. */
  problems: string[];
}

type Counts = Map<string, number>;

function add(map: Counts, key: string, n = 1): void {
  map.set(key, (map.get(key) ?? 0) + n);
}

interface TruthRecord {
  windowStartMs: number;
  /** Event time in ms; the window start when the record has none. */
  eventMs: number;
  payload: Record<string, unknown>;
}

/** What the derived tables hold for `records` (see the module comment): count maps by each table's key. */
function derive(records: readonly TruthRecord[]): { hourly: Counts; hourlyDistinct: Counts; dailyDistinct: Counts; fields: Counts } {
  const hourly: Counts = new Map();
  const hourlyDistinct: Counts = new Map();
  const dailyDistinct: Counts = new Map();
  const fields: Counts = new Map();
  for (const r of records) {
    const bucket = Math.floor(r.eventMs / MS_PER_HOUR) * MS_PER_HOUR;
    const day = Math.floor(r.eventMs / MS_PER_DAY) * MS_PER_DAY;
    const p = r.payload;
    add(hourly, `${bucket}|${r.windowStartMs}|${text(p.eventType)}|${text(p.customerId)}`);
    if (p.userId !== undefined && p.userId !== null) {
      hourlyDistinct.set(`${bucket}|${r.windowStartMs}|${text(p.customerId)}|user_id|${text(p.userId)}`, 1);
      dailyDistinct.set(`${day}|${text(p.customerId)}|user_id|${text(p.userId)}`, 1);
    }
    for (const key of Object.keys(p)) add(fields, key);
  }
  return { hourly, hourlyDistinct, dailyDistinct, fields };
}

/**
 * Differences of the table's counts from the truth, as readable problems: each key's count must lie
 * from `expected`'s to `expected`'s plus `optional`'s (records that may have been loaded or not).
 */
function compare(table: string, expected: Counts, optional: Counts, actual: Counts, note: (p: string) => void): void {
  let missing = 0;
  let extra = 0;
  let different = 0;
  let first: string | undefined;
  for (const [key, n] of expected) {
    const got = actual.get(key);
    const most = n + (optional.get(key) ?? 0);
    if (got === undefined) missing++;
    else if (got < n || got > most) different++;
    else continue;
    first ??= `${key}: expected ${n === most ? n : `${n} to ${most}`}, table ${got ?? 'no row'}`;
  }
  for (const [key, n] of actual) {
    if (expected.has(key)) continue;
    if (n <= (optional.get(key) ?? 0)) continue;
    extra++;
    first ??= `${key}: no such records, table ${n}`;
  }
  if (missing + extra + different > 0)
    note(`${table}: ${missing} rows missing, ${extra} extra, ${different} with another count of ${expected.size} expected (first: ${first})`);
}

const text = (v: unknown): string => (v === undefined || v === null ? '<null>' : typeof v === 'string' ? v : JSON.stringify(v));

/** Arrival times (ms) per record text of `insertions`, one per copy, earliest first. */
export function arrivalTimes(insertions: readonly Insertion[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const { json, insertedAtMs } of insertions) {
    const times = out.get(json);
    if (times) times.push(insertedAtMs);
    else out.set(json, [insertedAtMs]);
  }
  for (const times of out.values()) times.sort((a, b) => a - b);
  return out;
}

/**
 * Splits the record texts E6 serves for an expired window into those an audit had to load
 * before the window expired and the late arrivals that came after `deadlineMs` (its expiry less
 * one audit period and the audit's run). A text not in `arrivals` is a record upstream had from
 * the start. Each copy of a text consumes one arrival time of `arrivals` (earliest first), so
 * pass a fresh map per soak and the windows in any order: a text belongs to one window.
 *
 * @returns `kept` and `left` (the later arrivals), each in the order given.
 */
export function inTimeForExpiry(texts: readonly string[], arrivals: Map<string, number[]>, deadlineMs: number): { kept: string[]; left: string[] } {
  const kept: string[] = [];
  const left: string[] = [];
  for (const text of texts) {
    const at = arrivals.get(text)?.shift();
    (at !== undefined && at > deadlineMs ? left : kept).push(text);
  }
  return { kept, left };
}

/**
 * Checks the derived tables of `source` in `schema` (through `client`) against its stored records
 * and, for expired windows, what `sim` serves for them (by E6's filter time, which may be hidden).
 * Run it after the window check: it trusts `records`.
 *
 * @param start SYNC_START_DATE: the first window keeps the records at its start.
 * @param graceMs how long before a window's expiry (`sync_windows.expired_at`) an inserted record
 *   must have arrived to be expected in its derived rows: the audit period plus its run.
 * @returns the verdict with counts and the first problems; throws only for database errors.
 */
export async function verifyDerived(client: pg.Client, schema: string, source: string, sim: Simulator, start: Date, graceMs: number): Promise<DerivedCheck> {
  const s = client.escapeIdentifier(schema);
  const problems: string[] = [];
  const note = (problem: string) => void (problems.length < 10 && problems.push(problem));
  const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::bigint`;

  const truth: TruthRecord[] = [];
  /** Records of expired windows that may or may not have been loaded before the drop. */
  const maybe: TruthRecord[] = [];
  const { rows: stored } = await client.query<{ windowStartMs: string; eventMs: string | null; payload: Record<string, unknown> }>(
    `select ${ms('window_start')} as "windowStartMs", ${ms('event_time')} as "eventMs", payload from ${s}.records where source = $1`,
    [source],
  );
  for (const r of stored) truth.push({ windowStartMs: Number(r.windowStartMs), eventMs: Number(r.eventMs ?? r.windowStartMs), payload: r.payload });
  const arrivals = arrivalTimes(sim.dataset.insertions());
  let arrivedTooLate = 0;
  const { rows: expired } = await client.query<{ start: Date; end: Date; expiredAt: Date }>(
    `select window_start as start, window_end as "end", expired_at as "expiredAt" from ${s}.sync_windows where source = $1 and expired_at is not null`,
    [source],
  );
  const expiredStarts = new Set<number>();
  for (const w of expired) {
    expiredStarts.add(w.start.getTime());
    // What E6 served for the window, by its filter time (hidden or not): less its start's boundary set unless it is the first window (as soak/verify.ts).
    const served = sim.servedJson(w.start, w.end);
    const texts = w.start.getTime() === start.getTime() ? served : multisetMinus(served, sim.servedJson(w.start, w.start));
    const { kept, left } = inTimeForExpiry(texts, arrivals, w.expiredAt.getTime() - graceMs);
    arrivedTooLate += left.length;
    for (const [list, made] of [
      [truth, kept],
      [maybe, left],
    ] as const) {
      for (const text of made) {
        const record = JSON.parse(text) as Record<string, unknown>;
        list.push({ windowStartMs: w.start.getTime(), eventMs: Date.parse(String(record.timestamp)), payload: record });
      }
    }
  }

  const { hourly, hourlyDistinct, dailyDistinct, fields } = derive(truth);
  const optional = derive(maybe);
  let expiredHourly = 0;
  let expiredDistinct = 0;
  for (const key of hourly.keys()) if (expiredStarts.has(Number(key.split('|')[1]))) expiredHourly++;
  for (const key of hourlyDistinct.keys()) if (expiredStarts.has(Number(key.split('|')[1]))) expiredDistinct++;

  const read = async (sql: string, keyOf: (row: Record<string, unknown>) => string): Promise<Counts> => {
    const { rows } = await client.query<Record<string, unknown>>(sql, [source]);
    const out: Counts = new Map();
    for (const row of rows) {
      add(out, keyOf(row), Number(row.records));
    }
    return out;
  };
  compare(
    'records_hourly',
    hourly,
    optional.hourly,
    await read(
      `select ${ms('bucket')} as bucket, ${ms('window_start')} as ws, event_type, customer_id, records from ${s}.records_hourly where source = $1`,
      (r) => `${String(r.bucket)}|${String(r.ws)}|${text(r.event_type)}|${text(r.customer_id)}`,
    ),
    note,
  );
  // Each distinct value is one element of its group's array: read as one key each (present = 1).
  const readValues = async (sql: string, keyOf: (row: Record<string, unknown>) => string): Promise<Counts> => {
    const { rows } = await client.query<Record<string, unknown>>(sql, [source]);
    const out: Counts = new Map();
    for (const row of rows) out.set(keyOf(row), 1);
    return out;
  };
  compare(
    'records_hourly_distinct',
    hourlyDistinct,
    optional.hourlyDistinct,
    await readValues(
      `select ${ms('bucket')} as bucket, ${ms('window_start')} as ws, customer_id, value_column, v from ${s}.records_hourly_distinct, unnest(distinct_values) as v where source = $1`,
      (r) => `${String(r.bucket)}|${String(r.ws)}|${text(r.customer_id)}|${text(r.value_column)}|${text(r.v)}`,
    ),
    note,
  );
  compare(
    'records_daily_distinct',
    dailyDistinct,
    optional.dailyDistinct,
    await readValues(
      `select ${ms('day')} as day, customer_id, value_column, v from ${s}.records_daily_distinct, unnest(distinct_values) as v where source = $1`,
      (r) => `${String(r.day)}|${text(r.customer_id)}|${text(r.value_column)}|${text(r.v)}`,
    ),
    note,
  );
  compare('record_fields', fields, optional.fields, await read(`select path, records from ${s}.record_fields where source = $1`, (r) => text(r.path)), note);

  let typedRows = Number.NaN;
  try {
    const { rows } = await client.query<{ n: string }>(`select count(*) as n from ${s}.records_typed where source = $1`, [source]);
    typedRows = Number(rows[0]!.n);
    if (typedRows !== stored.length) note(`records_typed: ${typedRows} rows, records holds ${stored.length}`);
  } catch (err) {
    note(`records_typed does not select: ${(err as Error).message}`);
  }

  return {
    pass: problems.length === 0,
    rows: { hourly: hourly.size, hourlyDistinct: hourlyDistinct.size, dailyDistinct: dailyDistinct.size, fields: fields.size },
    expiredRows: { hourly: expiredHourly, hourlyDistinct: expiredDistinct },
    arrivedTooLate,
    typedRows,
    problems,
  };
}
