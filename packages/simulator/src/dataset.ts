/**
 * The simulator's data: a deterministic, index-addressed sequence of analytics records.
 *
 * Glossary:
 * - base record: record `i` of the generated sequence, a pure function of (seed, i). Nothing
 *   is stored per record, so ten million records cost a few kilobytes until E7 counts are
 *   first asked for (then about one counter block per {@link CHECKPOINT_RECORDS} records).
 * - inserted record: a record added later with {@link Dataset.insert} (late arrivals). Kept
 *   in a small sorted array and merged into every query.
 * - range: `from` (inclusive, absent = unbounded) to `to` (inclusive or exclusive by the
 *   caller's `toInclusive`, absent = unbounded), in milliseconds since the epoch. It mirrors
 *   E6/E7's `startDate` and `toDate`.
 *
 * The reference shows no field of an analytics record ("Fields of an analytics record: not
 * shown"). The record shape here ({@link AnalyticsRecord}) is our guess, documented as such
 * in docs/simulator.md.
 */
import { InvalidArgumentError } from './errors.js';
import { BaseEventCounts, eventCountRows } from './counts.js';
import {
  analyticsRecordSchema,
  EVENT_TYPES,
  LANE_JITTER,
  mix32,
  RecordMaker,
  TWO_POW_32,
  type AnalyticsRecord,
  type Customer,
  type EventCount,
} from './records.js';
import { RECORD_ORDERS, samplePermutation, shuffleRange, type RecordOrder } from './order.js';
import { parseIsoDateTime } from './time.js';
import {
  DEFAULT_CUSTOMERS,
  DEFAULT_DUPLICATE_EVERY,
  DEFAULT_END,
  DEFAULT_RECORDS,
  DEFAULT_SEED,
  DEFAULT_SPAN_MS,
  DEFAULT_TIME_PRECISION_MS,
  DEFAULT_USERS,
  MAX_RECORDS,
  resolveInt,
  type DatasetOptions,
} from './dataset-options.js';

interface InsertedEntry {
  ms: number;
  /** Insertion sequence: the tie-breaker that keeps equal timestamps in insertion order. */
  seq: number;
  record: AnalyticsRecord;
  json: string;
  eventIndex: number;
  customerKey: string;
  /** Wall-clock time of the {@link Dataset.insert} call, in ms since the epoch. */
  insertedAtMs: number;
}

/** One inserted record as {@link Dataset.insertions} lists it. */
export interface Insertion {
  /** The record's JSON text, as E6 serves it. */
  json: string;
  /** Wall-clock time the record was inserted, in milliseconds since the epoch. */
  insertedAtMs: number;
}

/** A reference to one merged record: a base index, or an inserted entry. */
type Ref = number | InsertedEntry;

/** A resolved range: base indexes [a, b) and inserted indexes [c, d). */
interface Span {
  a: number;
  b: number;
  c: number;
  d: number;
}

/**
 * A deterministic analytics dataset (the data behind E6 and E7).
 *
 * Record `i` is a pure function of (seed, i); timestamps are non-decreasing in `i`, so the
 * records of a time range are an index range found by binary search (O(log N) per query).
 * Inserted records are merged in by timestamp; at equal timestamps base records come first,
 * then inserted ones in insertion order.
 */
export class Dataset {
  readonly seed: number;
  /** Number of base (generated) records. */
  readonly baseRecords: number;
  /** First instant of the base records (inclusive), a multiple of `timePrecisionMs`. */
  readonly start: Date;
  /** End of the base records (exclusive). */
  readonly end: Date;
  readonly customerCount: number;
  readonly usersPerCustomer: number;
  readonly duplicateEvery: number;
  readonly timePrecisionMs: number;

  readonly #startMs: number;
  readonly #slotQuotient: number;
  readonly #slotRemainder: number;
  readonly #maker: RecordMaker;
  readonly #counts: BaseEventCounts;
  #inserted: InsertedEntry[] = [];
  #insertSeq = 0;

  /**
   * @throws {InvalidArgumentError} when an option breaks its rule (see {@link DatasetOptions});
   *   the message names the option and the value.
   */
  constructor(options: DatasetOptions = {}) {
    this.seed = resolveInt('seed', options.seed, DEFAULT_SEED, 0, TWO_POW_32 - 1);
    this.baseRecords = resolveInt('records', options.records, DEFAULT_RECORDS, 0, MAX_RECORDS);
    this.customerCount = resolveInt('customers', options.customers, DEFAULT_CUSTOMERS, 1, 9999);
    this.usersPerCustomer = resolveInt('users', options.users, DEFAULT_USERS, 1, 9999);
    this.duplicateEvery = resolveInt('duplicateEvery', options.duplicateEvery, DEFAULT_DUPLICATE_EVERY, 0, MAX_RECORDS);
    if (this.duplicateEvery === 1) {
      throw new InvalidArgumentError('dataset option duplicateEvery must be 0 (no copies) or at least 2; got 1');
    }
    this.timePrecisionMs = resolveInt('timePrecisionMs', options.timePrecisionMs, DEFAULT_TIME_PRECISION_MS, 1, 86_400_000);

    const endMs = (options.end ?? DEFAULT_END).getTime();
    const rawStartMs = options.start?.getTime() ?? endMs - DEFAULT_SPAN_MS;
    if (!Number.isFinite(endMs)) throw new InvalidArgumentError('dataset option end must be a valid date');
    if (!Number.isFinite(rawStartMs)) throw new InvalidArgumentError('dataset option start must be a valid date');
    const precision = this.timePrecisionMs;
    const startMs = Math.ceil(rawStartMs / precision) * precision;
    if (!(endMs > startMs)) {
      throw new InvalidArgumentError(
        `dataset option end must be after start (rounded up to ${precision} ms); got start ${new Date(rawStartMs).toISOString()}, end ${new Date(endMs).toISOString()}`,
      );
    }
    this.#startMs = startMs;
    this.start = new Date(startMs);
    this.end = new Date(endMs);
    const span = endMs - startMs;
    const n = Math.max(this.baseRecords, 1);
    this.#slotQuotient = Math.floor(span / n);
    this.#slotRemainder = span % n;
    this.#maker = new RecordMaker(this.seed, this.customerCount, this.usersPerCustomer, precision);
    const maker = this.#maker;
    const cellOf = (h: number): number => maker.eventOf(h) * this.customerCount + maker.customerOf(h);
    this.#counts = new BaseEventCounts(
      this.baseRecords,
      this.customerCount,
      (i) => cellOf(maker.hash(this.#source(i))),
      (i) => (this.#source(i) === i ? cellOf(maker.hash(i)) : -1),
    );
  }

  /** Base plus inserted records. */
  get size(): number {
    return this.baseRecords + this.#inserted.length;
  }

  /** Number of records added with {@link insert}. */
  get insertedRecords(): number {
    return this.#inserted.length;
  }

  /**
   * Every record added with {@link insert}, in insertion order, with when it was inserted: lets
   * a test tell a record that arrived in time to be loaded from one that arrived too late.
   */
  insertions(): Insertion[] {
    return [...this.#inserted].sort((x, y) => x.seq - y.seq).map((e) => ({ json: e.json, insertedAtMs: e.insertedAtMs }));
  }

  /** The customers of the generated data, in id order. */
  customers(): Customer[] {
    return this.#maker.customers.map(({ index, id, name }) => ({ index, id, name }));
  }

  // -------------------------------------------------------------------------------------------
  // Generation of base records.

  /** Index of the record that record `i` copies, or `i` itself. */
  #source(i: number): number {
    const every = this.duplicateEvery;
    return every !== 0 && i > 0 && (i + 1) % every === 0 ? i - 1 : i;
  }

  #slotStart(i: number): number {
    const n = Math.max(this.baseRecords, 1);
    return this.#startMs + i * this.#slotQuotient + Math.floor((i * this.#slotRemainder) / n);
  }

  /** Timestamp of base record `i` in milliseconds; non-decreasing in `i`. */
  #baseMs(i: number): number {
    const s = this.#source(i);
    const lo = this.#slotStart(s);
    const width = this.#slotStart(s + 1) - lo;
    const jitter = Math.floor((mix32(this.#maker.hash(s) ^ LANE_JITTER) / TWO_POW_32) * width);
    const raw = lo + jitter;
    return Math.floor(raw / this.timePrecisionMs) * this.timePrecisionMs;
  }

  /**
   * Formats a timestamp: whole seconds as `…:ssZ` when the precision is whole seconds, otherwise
   * `…:ss.sssZ`; the same text as `Date.prototype.toISOString` (minus `.000`).
   */
  formatTimestamp(ms: number): string {
    return this.#maker.formatTimestamp(ms);
  }

  /**
   * Base record `i` (ignores inserted records).
   *
   * @throws {InvalidArgumentError} when `i` is not an index below {@link baseRecords}.
   */
  record(i: number): AnalyticsRecord {
    if (!Number.isSafeInteger(i) || i < 0 || i >= this.baseRecords) {
      throw new InvalidArgumentError(`record index must be a whole number from 0 to ${this.baseRecords - 1}; got ${i}`);
    }
    const s = this.#source(i);
    return this.#maker.objectFrom(this.#maker.hash(s), this.formatTimestamp(this.#baseMs(s)));
  }

  /** Timestamp of base record `i` in milliseconds since the epoch. */
  timestampMs(i: number): number {
    if (!Number.isSafeInteger(i) || i < 0 || i >= this.baseRecords) {
      throw new InvalidArgumentError(`record index must be a whole number from 0 to ${this.baseRecords - 1}; got ${i}`);
    }
    return this.#baseMs(i);
  }

  // -------------------------------------------------------------------------------------------
  // Inserted records.

  /**
   * Adds records (late arrivals). Each is validated against {@link analyticsRecordSchema} and
   * copied; its JSON text is kept as given, extra fields included. Queries afterwards see it
   * merged by timestamp, after base records and earlier insertions of the same instant.
   *
   * @throws {InvalidArgumentError} naming the first invalid record and field; nothing is inserted then.
   */
  insert(records: readonly AnalyticsRecord[]): void {
    const added: InsertedEntry[] = [];
    const insertedAtMs = Date.now();
    records.forEach((input, n) => {
      const parsed = analyticsRecordSchema.safeParse(input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new InvalidArgumentError(`inserted record ${n}: ${issue.path.join('.') || 'record'} ${issue.message}`);
      }
      const record = structuredClone(parsed.data) as AnalyticsRecord;
      added.push({
        ms: parseIsoDateTime(record.timestamp)!,
        seq: this.#insertSeq + n,
        record,
        json: JSON.stringify(record),
        eventIndex: EVENT_TYPES.indexOf(record.eventType),
        customerKey: `${record.customerId}\u0000${record.customerName}`,
        insertedAtMs,
      });
    });
    this.#insertSeq += records.length;
    this.#inserted = [...this.#inserted, ...added].sort((x, y) => x.ms - y.ms || x.seq - y.seq);
  }

  /**
   * Makes `count` plausible records (customers, users and ids from this dataset) with
   * timestamps spread at random over a range, on this dataset's time precision where the range
   * allows. Deterministic in (seed, salt). Does not insert them; pass them to {@link insert}.
   *
   * @param from first instant (inclusive).
   * @param to last instant, inclusive or exclusive by `toInclusive`.
   * @param salt distinguishes batches made over the same range.
   * @throws {InvalidArgumentError} when the range holds no instant or `count` is negative.
   */
  plausibleRecords(count: number, from: Date, to: Date, toInclusive = true, salt = 0): AnalyticsRecord[] {
    return this.#maker.plausibleRecords(count, from, to, toInclusive, salt, this.timePrecisionMs);
  }

  // -------------------------------------------------------------------------------------------
  // Queries.

  /** First base index in [lo, hi) whose timestamp satisfies `ms >= t` (or `> t` when `strict`). */
  #baseBound(t: number, strict: boolean, lo = 0, hi = this.baseRecords): number {
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const ms = this.#baseMs(mid);
      if (strict ? ms > t : ms >= t) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  #insertedBound(t: number, strict: boolean): number {
    const list = this.#inserted;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const ms = list[mid]!.ms;
      if (strict ? ms > t : ms >= t) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  #span(from: Date | undefined, to: Date | undefined, toInclusive: boolean): Span {
    const fromMs = from === undefined ? -Infinity : from.getTime();
    const toMs = to === undefined ? Infinity : to.getTime();
    if (Number.isNaN(fromMs) || Number.isNaN(toMs)) throw new InvalidArgumentError('range bounds must be valid dates');
    const a = from === undefined ? 0 : this.#baseBound(fromMs, false);
    let b = to === undefined ? this.baseRecords : this.#baseBound(toMs, toInclusive, a);
    const c = from === undefined ? 0 : this.#insertedBound(fromMs, false);
    let d = to === undefined ? this.#inserted.length : this.#insertedBound(toMs, toInclusive);
    // An empty range (to before from) holds nothing, rather than a negative count.
    if (b < a) b = a;
    if (d < c) d = c;
    return { a, b, c, d };
  }

  /** Merged position, within the span, of inserted entry `j` (c ≤ j < d). Strictly increasing in j. */
  #insertedPosition(span: Span, j: number): number {
    const basesBefore = this.#baseBound(this.#inserted[j]!.ms, true, span.a, span.b) - span.a;
    return basesBefore + (j - span.c);
  }

  /** References to the merged records at positions [offset, offset + limit) of a span, in order. */
  *#walk(span: Span, offset: number, limit: number): Generator<Ref> {
    const total = span.b - span.a + (span.d - span.c);
    const stop = Math.min(total, offset + limit);
    if (offset >= stop) return;
    // First inserted entry at or after merged position `offset`.
    let lo = span.c;
    let hi = span.d;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#insertedPosition(span, mid) >= offset) hi = mid;
      else lo = mid + 1;
    }
    let j = lo;
    let i = span.a + (offset - (j - span.c));
    const inserted = this.#inserted;
    for (let position = offset; position < stop; position++) {
      const entry = j < span.d ? inserted[j]! : undefined;
      if (i < span.b && (entry === undefined || this.#baseMs(i) <= entry.ms)) {
        yield i;
        i++;
      } else {
        yield entry!;
        j++;
      }
    }
  }

  #refToRecord(ref: Ref): AnalyticsRecord {
    return typeof ref === 'number' ? this.record(ref) : structuredClone<AnalyticsRecord>(ref.record);
  }

  #refToJson(ref: Ref): string {
    if (typeof ref !== 'number') return ref.json;
    const s = this.#source(ref);
    return this.#maker.jsonFrom(this.#maker.hash(s), this.formatTimestamp(this.#baseMs(s)));
  }

  /**
   * Number of records (base and inserted) in a range; what E6 reports as `totalRecords`.
   * O(log N + log M).
   *
   * @param from `startDate`, inclusive; `undefined` = no lower bound.
   * @param to `toDate`; `undefined` = no upper bound.
   * @param toInclusive whether a record exactly at `to` is in the range.
   */
  count(from: Date | undefined, to: Date | undefined, toInclusive: boolean): number {
    const span = this.#span(from, to, toInclusive);
    return span.b - span.a + (span.d - span.c);
  }

  #checkOffsetLimit(offset: number, limit: number): void {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new InvalidArgumentError(`offset must be a whole number ≥ 0; got ${offset}`);
    if (!Number.isSafeInteger(limit) || limit < 0) throw new InvalidArgumentError(`limit must be a whole number ≥ 0; got ${limit}`);
  }

  /**
   * Records at positions [offset, offset + limit) of a range, in merged order: one E6 page is
   * `page(startDate, toDate, inclusive, (pageNumber - 1) * pageSize, pageSize)`.
   * Arguments as in {@link count}.
   *
   * @throws {InvalidArgumentError} for a negative or fractional offset or limit.
   */
  page(from: Date | undefined, to: Date | undefined, toInclusive: boolean, offset: number, limit: number): AnalyticsRecord[] {
    this.#checkOffsetLimit(offset, limit);
    const out: AnalyticsRecord[] = [];
    for (const ref of this.#walk(this.#span(from, to, toInclusive), offset, limit)) out.push(this.#refToRecord(ref));
    return out;
  }

  /**
   * Like {@link page}, but each record as its JSON text (what the server writes). Faster than
   * serialising objects: base records are written straight from their hash.
   */
  pageJson(from: Date | undefined, to: Date | undefined, toInclusive: boolean, offset: number, limit: number): string[] {
    this.#checkOffsetLimit(offset, limit);
    const out: string[] = [];
    for (const ref of this.#walk(this.#span(from, to, toInclusive), offset, limit)) out.push(this.#refToJson(ref));
    return out;
  }

  /**
   * Like {@link pageJson}, but in the given order, drawn anew on each call from `random` (one
   * request of E6, whose reference promises no order of records):
   * - `stable`: merged order, exactly {@link pageJson} (and as fast);
   * - `ties`: by timestamp, records with equal timestamps in an order shuffled per call, as
   *   `ORDER BY timestamp OFFSET … LIMIT …` leaves ties to chance. A tie group the page cuts
   *   shows a random part of its members, so pages of one paging can overlap and miss records;
   * - `random`: positions [offset, offset + limit) of the range shuffled per call.
   *
   * Whatever the order, a call is a sample without replacement from the range (no record more
   * often than the range holds it), `count` is unchanged, and a page holding the whole range
   * holds exactly the range's records.
   *
   * Cost: O(page + log N + log M) for `ties`, whatever the size of the tie groups the page cuts;
   * O(page × log M × log N) for `random` (N base, M inserted records), not the range's size.
   *
   * @param random uniform in [0, 1); advanced by the draw, so a seeded generator repeats a run.
   * @throws {InvalidArgumentError} for a negative or fractional offset or limit, or an unknown order.
   */
  pageJsonOrdered(
    from: Date | undefined,
    to: Date | undefined,
    toInclusive: boolean,
    offset: number,
    limit: number,
    order: RecordOrder,
    random: () => number,
  ): string[] {
    if (order === 'stable') return this.pageJson(from, to, toInclusive, offset, limit);
    if (order !== 'ties' && order !== 'random') {
      throw new InvalidArgumentError(`order must be ${RECORD_ORDERS.join(', ')}; got ${String(order)}`);
    }
    this.#checkOffsetLimit(offset, limit);
    const span = this.#span(from, to, toInclusive);
    const total = span.b - span.a + (span.d - span.c);
    const stop = Math.min(total, offset + limit);
    if (offset >= stop) return [];
    if (order === 'random') {
      return samplePermutation(total, stop - offset, random).map((position) => this.#refToJson(this.#refAt(span, position)));
    }
    const refs = [...this.#walk(span, offset, stop - offset)];
    for (let i = 0; i < refs.length;) {
      const ms = this.#refMs(refs[i]!);
      let j = i + 1;
      while (j < refs.length && this.#refMs(refs[j]!) === ms) j++;
      // Only the first and the last run can belong to a tie group reaching past the page.
      const group = i === 0 || j === refs.length ? this.#tieGroup(span, ms) : undefined;
      if (group !== undefined && group.size > j - i) {
        const picks = samplePermutation(group.size, j - i, random);
        for (let k = 0; k < picks.length; k++) refs[i + k] = group.member(picks[k]!);
      } else {
        shuffleRange(refs, i, j, random);
      }
      i = j;
    }
    return refs.map((ref) => this.#refToJson(ref));
  }

  #refMs(ref: Ref): number {
    return typeof ref === 'number' ? this.#baseMs(ref) : ref.ms;
  }

  /** The merged record at `position` of a span (0 ≤ position < the span's count). */
  #refAt(span: Span, position: number): Ref {
    return this.#walk(span, position, 1).next().value as Ref;
  }

  /**
   * The records of a span with timestamp `ms`: in merged order the base records [i0, i1) come
   * first, then inserted entries [j0, j1), so member `k` is found without walking. O(log N + log M).
   */
  #tieGroup(span: Span, ms: number): { size: number; member: (k: number) => Ref } {
    const i0 = this.#baseBound(ms, false, span.a, span.b);
    const i1 = this.#baseBound(ms, true, i0, span.b);
    const clamp = (j: number) => Math.min(span.d, Math.max(span.c, j));
    const j0 = clamp(this.#insertedBound(ms, false));
    const j1 = clamp(this.#insertedBound(ms, true));
    const bases = i1 - i0;
    const inserted = this.#inserted;
    return { size: bases + (j1 - j0), member: (k) => (k < bases ? i0 + k : inserted[j0 + k - bases]!) };
  }

  /**
   * Every record of a range in merged order, lazily: the expected content of a complete E6
   * paging of the range. Arguments as in {@link count}. Inserting while iterating is not supported.
   */
  *iterate(from: Date | undefined, to: Date | undefined, toInclusive: boolean): Generator<AnalyticsRecord> {
    const span = this.#span(from, to, toInclusive);
    for (const ref of this.#walk(span, 0, Number.MAX_SAFE_INTEGER)) yield this.#refToRecord(ref);
  }

  // -------------------------------------------------------------------------------------------
  // E7 counts.

  /**
   * Events per (event type, customer) in a range: the data of one E7 response. Arguments as
   * in {@link count}. Every event type × every generated customer is listed, zeros included;
   * customers that occur only in inserted records are listed where their count is not zero.
   * Order: event type as in {@link EVENT_TYPES}, then generated customers in id order, then the others
   * by id and name.
   *
   * Cost: the first call scans all base records once to build prefix counts every
   * {@link CHECKPOINT_RECORDS} records; each call then scans at most two partial blocks.
   */
  eventCounts(from: Date | undefined, to: Date | undefined, toInclusive: boolean): EventCount[] {
    const span = this.#span(from, to, toInclusive);
    const inserted = this.#inserted.slice(span.c, span.d);
    return eventCountRows(this.#counts.countRange(span.a, span.b), inserted, this.#maker.customers, this.#maker.customerIndexByKey);
  }
}

/** Creates a {@link Dataset}; same as `new Dataset(options)`. @throws {InvalidArgumentError} as the constructor. */
export function createDataset(options: DatasetOptions = {}): Dataset {
  return new Dataset(options);
}
