/**
 * What E6 and E7 serve when the data is more than the generated dataset: records deleted
 * upstream, a filter on a hidden time instead of the record's `timestamp`, records carrying
 * out-of-range numbers. Off by default; E6 then reads the dataset straight, and this module
 * costs nothing.
 *
 * Glossary:
 * - hidden time: the instant E6 filters `startDate`/`toDate` on under `filterTimeLagMs`: the
 *   record's `timestamp` plus an offset in [-lag, +lag] drawn from (seed, instant, tie index), so
 *   the same record always has the same hidden time. The record's `timestamp` is not changed.
 * - segment: a range of timestamps whose records are either all in the requested range (full:
 *   counted by binary search) or must be tested one by one against the hidden time (edge: the
 *   2 × lag around each bound).
 *
 * Order: the records of a range in merged (timestamp) order; the `order` setting does not apply.
 */
import type { Dataset } from './dataset.js';
import { Deletions, type DeleteSelection, type MsRange, type RecordEntry } from './deletions.js';
import { InvalidArgumentError } from './errors.js';
import type { OutOfRange } from './out-of-range.js';
import { analyticsRecordSchema, GOLDEN_32, mix32, TWO_POW_32, type AnalyticsRecord, type EventCount } from './records.js';
import { parseIsoDateTime } from './time.js';

const TIMESTAMP_PREFIX = '{"timestamp":"';

/** The `timestamp` of a record's JSON text, in milliseconds (fast path: it is the first field). */
function msOfJson(json: string): number {
  if (json.startsWith(TIMESTAMP_PREFIX)) {
    const ms = parseIsoDateTime(json.slice(TIMESTAMP_PREFIX.length, json.indexOf('"', TIMESTAMP_PREFIX.length)));
    if (ms !== undefined) return ms;
  }
  return parseIsoDateTime((JSON.parse(json) as { timestamp: string }).timestamp)!;
}

/** JSON with object keys sorted at every depth: two records are equal when their canonical texts are. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

interface Segment {
  range: MsRange;
  edge: boolean;
}

/** Options of a {@link RecordView}, checked by the server. */
export interface ViewOptions {
  /** Largest distance of the hidden time from the record's timestamp, in ms; 0 = E6 filters on the timestamp. */
  filterTimeLagMs: number;
  outOfRange: OutOfRange | undefined;
  /** Whether a record exactly at `toDate` is in the range. */
  toInclusive: boolean;
}

/** The records E6 and E7 serve over a dataset, with deletions, the hidden-time filter and out-of-range numbers. */
export class RecordView {
  readonly deletions = new Deletions();
  readonly #dataset: Dataset;
  readonly #lagMs: number;
  readonly #outOfRange: OutOfRange | undefined;
  readonly #toInclusive: boolean;
  readonly #seedKey: number;

  constructor(dataset: Dataset, options: ViewOptions) {
    this.#dataset = dataset;
    this.#lagMs = options.filterTimeLagMs;
    this.#outOfRange = options.outOfRange;
    this.#toInclusive = options.toInclusive;
    this.#seedKey = mix32(dataset.seed ^ 0x7f4a7c15);
  }

  /** False while nothing differs from the dataset: E6 and E7 then read the dataset directly. */
  get active(): boolean {
    return this.#lagMs > 0 || this.#outOfRange !== undefined || this.deletions.size > 0;
  }

  #dates(r: MsRange): [Date | undefined, Date | undefined, boolean] {
    return [Number.isFinite(r.fromMs) ? new Date(r.fromMs) : undefined, Number.isFinite(r.toMs) ? new Date(r.toMs) : undefined, r.toInclusive];
  }

  /** `n` records of a range from dataset position `q`, deleted ones included, with their instants and tie indexes. */
  #entries(r: MsRange, q: number, n: number): RecordEntry[] {
    const [from, to, inclusive] = this.#dates(r);
    const out: RecordEntry[] = [];
    let lastMs = NaN;
    let tie = 0;
    this.#dataset.pageJson(from, to, inclusive, q, n).forEach((json, k) => {
      const ms = msOfJson(json);
      // The range holds the whole group of its instant, so the records before that group are counted by binary search.
      if (ms !== lastMs) tie = q + k - this.#dataset.count(from, new Date(ms), false);
      else tie++;
      lastMs = ms;
      out.push({ json, ms, tie });
    });
    return out;
  }

  /** Records of a range not deleted. */
  #fullCount(r: MsRange): number {
    return this.#dataset.count(...this.#dates(r)) - this.deletions.inRange(r).length;
  }

  /** Positions [offset, offset + limit) of the records of a range not deleted. */
  #fullPage(r: MsRange, offset: number, limit: number): RecordEntry[] {
    const deleted = this.deletions.inRange(r);
    if (deleted.length === 0) return this.#entries(r, offset, limit);
    const [from] = this.#dates(r);
    const positions = deleted.map((d) => this.#dataset.count(from, new Date(d.ms), false) + d.tie);
    // The dataset position of the offset-th record left: every deletion at or before it pushes it on.
    let q = offset;
    for (const p of positions) {
      if (p <= q) q++;
      else break;
    }
    const ahead = positions.filter((p) => p >= q).length;
    return this.#entries(r, q, limit + ahead)
      .filter((e) => !this.deletions.has(e.ms, e.tie))
      .slice(0, limit);
  }

  /** Hidden time of a record: its instant plus an offset in [-lag, +lag], a pure function of (seed, ms, tie). */
  #hiddenMs(e: RecordEntry): number {
    const h = mix32(mix32((e.ms >>> 0) ^ this.#seedKey) ^ Math.floor(e.ms / TWO_POW_32) ^ Math.imul(e.tie + 1, GOLDEN_32));
    return e.ms + Math.floor((h / TWO_POW_32) * (2 * this.#lagMs + 1)) - this.#lagMs;
  }

  /** The segments of a requested range, in timestamp order (see the glossary). */
  #segments(from: Date | undefined, to: Date | undefined): Segment[] {
    const fromMs = from?.getTime() ?? -Infinity;
    const toMs = to?.getTime() ?? Infinity;
    const lag = this.#lagMs;
    if (lag === 0) return [{ range: { fromMs, toMs, toInclusive: this.#toInclusive }, edge: false }];
    // Timestamps strictly inside (from + lag, to - lag) have hidden times strictly inside (from, to).
    const midFrom = Number.isFinite(fromMs) ? fromMs + lag + 1 : -Infinity;
    const midTo = Number.isFinite(toMs) ? toMs - lag : Infinity;
    if (midFrom >= midTo) return [{ range: { fromMs: fromMs - lag, toMs: toMs + lag, toInclusive: true }, edge: true }];
    const segments: Segment[] = [];
    if (Number.isFinite(fromMs)) segments.push({ range: { fromMs: fromMs - lag, toMs: fromMs + lag, toInclusive: true }, edge: true });
    segments.push({ range: { fromMs: midFrom, toMs: midTo, toInclusive: false }, edge: false });
    if (Number.isFinite(toMs)) segments.push({ range: { fromMs: toMs - lag, toMs: toMs + lag, toInclusive: true }, edge: true });
    return segments;
  }

  /** The records of an edge segment whose hidden time is in the requested range. */
  #edge(r: MsRange, from: Date | undefined, to: Date | undefined): RecordEntry[] {
    const fromMs = from?.getTime() ?? -Infinity;
    const toMs = to?.getTime() ?? Infinity;
    return this.#fullPage(r, 0, this.#fullCount(r)).filter((e) => {
      const h = this.#hiddenMs(e);
      return h >= fromMs && (this.#toInclusive ? h <= toMs : h < toMs);
    });
  }

  /** E6's `totalRecords` of a range (`startDate`, `toDate`). */
  count(from: Date | undefined, to: Date | undefined): number {
    let total = 0;
    for (const s of this.#segments(from, to)) total += s.edge ? this.#edge(s.range, from, to).length : this.#fullCount(s.range);
    return total;
  }

  /** Positions [offset, offset + limit) of a range, as E6 writes them (out-of-range numbers added). */
  page(from: Date | undefined, to: Date | undefined, offset: number, limit: number): string[] {
    const out: RecordEntry[] = [];
    let skip = offset;
    for (const s of this.#segments(from, to)) {
      if (out.length >= limit) break;
      const kept = s.edge ? this.#edge(s.range, from, to) : undefined;
      const n = kept?.length ?? this.#fullCount(s.range);
      if (skip >= n) {
        skip -= n;
        continue;
      }
      const want = limit - out.length;
      out.push(...(kept !== undefined ? kept.slice(skip, skip + want) : this.#fullPage(s.range, skip, want)));
      skip = 0;
    }
    const marks = this.#outOfRange;
    return out.map((e) => (marks === undefined ? e.json : marks.mark(e)));
  }

  /** Every record a complete E6 paging of the range returns now, in order. */
  all(from: Date | undefined, to: Date | undefined): string[] {
    return this.page(from, to, 0, this.count(from, to));
  }

  /** E7's counts of a range, deletions subtracted (E7 filters on the timestamp, whatever the lag). */
  eventCounts(from: Date | undefined, to: Date | undefined): EventCount[] {
    const rows = this.#dataset.eventCounts(from, to, this.#toInclusive);
    const deleted = this.deletions.inRange({ fromMs: from?.getTime() ?? -Infinity, toMs: to?.getTime() ?? Infinity, toInclusive: this.#toInclusive });
    if (deleted.length === 0) return rows;
    for (const d of deleted) {
      const r = JSON.parse(d.json) as AnalyticsRecord;
      const row = rows.find((x) => x.eventType === r.eventType && x.customerId === r.customerId && x.customerName === r.customerName);
      if (row !== undefined) row.count--;
    }
    const generated = new Set(this.#dataset.customers().map((c) => `${c.id}\u0000${c.name}`));
    return rows.filter((x) => x.count !== 0 || generated.has(`${x.customerId}\u0000${x.customerName}`));
  }

  /**
   * Deletes records (see {@link DeleteSelection}); from then on E6 and E7 leave them out.
   *
   * @returns the records deleted, as objects.
   * @throws {InvalidArgumentError} for an invalid record, a range that ends before it starts, a
   *   count below 1, or a record not in the data (or deleted already); nothing is deleted then.
   */
  delete(selection: DeleteSelection): AnalyticsRecord[] {
    const chosen = 'records' in selection ? this.#exact(selection.records) : this.#spread(selection.from, selection.to, selection.count);
    this.deletions.add(chosen);
    return chosen.map((e) => JSON.parse(e.json) as AnalyticsRecord);
  }

  #spread(from: Date, to: Date, count: number): RecordEntry[] {
    if (!Number.isSafeInteger(count) || count < 1) throw new InvalidArgumentError(`count must be a whole number ≥ 1; got ${count}`);
    if (!(to.getTime() >= from.getTime())) throw new InvalidArgumentError('to must not be before from');
    const r: MsRange = { fromMs: from.getTime(), toMs: to.getTime(), toInclusive: true };
    const n = this.#fullCount(r);
    const k = Math.min(count, n);
    return Array.from({ length: k }, (_, j) => this.#fullPage(r, Math.floor(((j + 0.5) * n) / k), 1)[0]!);
  }

  #exact(records: readonly AnalyticsRecord[]): RecordEntry[] {
    const chosen: RecordEntry[] = [];
    records.forEach((input, n) => {
      const parsed = analyticsRecordSchema.safeParse(input);
      if (!parsed.success) throw new InvalidArgumentError(`record ${n}: ${parsed.error.issues[0]!.message}`);
      const ms = parseIsoDateTime(parsed.data.timestamp)!;
      const wanted = canonical(parsed.data);
      const r: MsRange = { fromMs: ms, toMs: ms, toInclusive: true };
      // A record as E6 served it (its out-of-range number read back) matches too.
      const matches = (e: RecordEntry) =>
        canonical(JSON.parse(e.json)) === wanted || (this.#outOfRange !== undefined && canonical(JSON.parse(this.#outOfRange.mark(e))) === wanted);
      const found = this.#fullPage(r, 0, this.#fullCount(r)).find((e) => !chosen.some((c) => c.ms === e.ms && c.tie === e.tie) && matches(e));
      if (found === undefined) throw new InvalidArgumentError(`record ${n} is not in the data (or is deleted already)`);
      chosen.push(found);
    });
    return chosen;
  }
}
