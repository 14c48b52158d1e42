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
import { z } from 'zod';
import { parseIsoDateTime } from '../time.js';
import { InvalidArgumentError } from '../errors.js';

/** Event types, in the order E7 families are written. Our guess; the reference names only `userlogin_event_count`. */
export const EVENT_TYPES = ['UserLogin', 'DialogCreated', 'DialogSubmitted', 'DocumentCreated', 'PdfCreated', 'SmsSent', 'EmailSent'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Relative frequency of each event type, parallel to {@link EVENT_TYPES}: logins dominate. */
const EVENT_WEIGHTS = [40, 18, 14, 10, 8, 4, 6] as const;

export const CHANNELS = ['web', 'api'] as const;
export type Channel = (typeof CHANNELS)[number];

/**
 * One analytics record as E6 returns it in `data`. Field names and values are our guess
 * (the reference shows none). There is deliberately no unique id: two identical records are
 * two events, and consumers must keep both.
 */
export interface AnalyticsRecord {
  /** ISO 8601 UTC, `YYYY-MM-DDTHH:mm:ssZ`, or with `.sss` when the dataset has millisecond precision. */
  timestamp: string;
  eventType: EventType;
  /** `cust-0007`: four digits, 1-based. */
  customerId: string;
  customerName: string;
  /** `user-0007-0042`: customer number, then user number within the customer. */
  userId: string;
  /** Present on dialog events (DialogCreated, DialogSubmitted) and on notifications (SmsSent, EmailSent). */
  dialogDefinitionId?: string;
  /** Present on DocumentCreated and PdfCreated. */
  documentTemplate?: string;
  channel: Channel;
}

/** Events of one type for one customer within a range: one E7 sample. */
export interface EventCount {
  eventType: EventType;
  customerId: string;
  customerName: string;
  count: number;
}

/** A customer of the generated data. */
export interface Customer {
  /** 0-based position; `id` carries it 1-based. */
  index: number;
  id: string;
  name: string;
}

/** Options of {@link Dataset}. Every field is optional; defaults are the exported `DEFAULT_*` constants. */
export interface DatasetOptions {
  /** Unsigned 32-bit integer. Same seed, same records. */
  seed?: number;
  /** Number of base records, 0 to {@link MAX_RECORDS}. */
  records?: number;
  /** First instant of the data (inclusive). Default: 30 days before `end`. Rounded up to `timePrecisionMs`. */
  start?: Date;
  /** Instant after the last record (exclusive). Default {@link DEFAULT_END}. */
  end?: Date;
  /** Number of customers, 1 to 9999. */
  customers?: number;
  /** Users per customer, 1 to 9999. */
  users?: number;
  /** Every Nth record (1-based) is an exact copy of its predecessor. 0 = no copies; otherwise at least 2. */
  duplicateEvery?: number;
  /** Timestamps are multiples of this many milliseconds: 1000 = whole seconds, 1 = milliseconds. */
  timePrecisionMs?: number;
}

export const DEFAULT_SEED = 42;
export const DEFAULT_RECORDS = 200_000;
/** Fixed, so that two runs without options serve the same data. */
export const DEFAULT_END = new Date('2026-11-01T00:00:00Z');
export const DEFAULT_SPAN_MS = 30 * 86_400_000;
export const DEFAULT_CUSTOMERS = 12;
export const DEFAULT_USERS = 40;
export const DEFAULT_DUPLICATE_EVERY = 5000;
export const DEFAULT_TIME_PRECISION_MS = 1000;
/**
 * Upper bound on `records`. Slot arithmetic multiplies an index by (span mod records), which
 * must stay below 2^53 to be exact in a double.
 */
export const MAX_RECORDS = 90_000_000;
/** Base records between two E7 prefix-count checkpoints (raised for very many customers, to bound memory). */
export const CHECKPOINT_RECORDS = 4096;
/** Upper bound on checkpoint counter cells (4 bytes each). */
const MAX_CHECKPOINT_CELLS = 8_000_000;

const DIALOG_DEFINITIONS_PER_CUSTOMER = 6;
const DOCUMENT_TEMPLATES = ['EmploymentContract', 'OfferLetter', 'Invoice', 'ConsentForm', 'MeetingMinutes', 'LeaseAgreement', 'PowerOfAttorney'] as const;

/** Names of the first customers; later ones are composed from the word lists below. */
const CUSTOMER_NAMES = [
  'Acme AS',
  'Nordlys Energi AS',
  'Fjordvik Kommune',
  'Bergen Havnelogistikk AS',
  'Tromsø Helse HF',
  'Vestlandsbanken ASA',
  'Solberg & Sønner AS',
  'Polarsirkel Forsikring AS',
  'Grønn Bygg AS',
  'Kystlinje Sjømat AS',
  'Midtnorsk Regnskap DA',
  'Aurora Eiendom AS',
] as const;
const NAME_PREFIXES = [
  'Fjell',
  'Havblikk',
  'Nordkapp',
  'Solvang',
  'Elvebakken',
  'Lysaker',
  'Skogheim',
  'Bjørkli',
  'Fosen',
  'Lindesnes',
  'Haugen',
  'Østfold',
  'Viken',
  'Trollheim',
  'Sandvika',
  'Dovre',
  'Valdres',
  'Helgeland',
  'Jæren',
  'Romsdal',
] as const;
const NAME_INDUSTRIES = [
  'Transport',
  'Advokatfirma',
  'Eiendom',
  'Energi',
  'Bygg',
  'Regnskap',
  'Helse',
  'Sparebank',
  'Forsikring',
  'Logistikk',
  'Maskin',
  'Rådgivning',
  'Elektro',
  'Marine',
  'Data',
] as const;
const NAME_SUFFIXES = ['AS', 'ASA', 'DA', 'SA'] as const;

const MS_PER_SECOND = 1000;
const MS_PER_DAY = 86_400_000;
/** From here on toISOString writes six-digit years; such instants take the slow path. */
const YEAR_10000_MS = 253_402_300_800_000;
const TWO_DIGITS = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
const TWO_POW_32 = 4_294_967_296;

// ---------------------------------------------------------------------------------------------
// Hashing. lowbias32 (Chris Wellons' hash-prospector): a bijective 32-bit mixer with good
// avalanche, two multiplies per call, so a record costs a handful of integer operations.

function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Independent lanes derived from a record's first hash, one per field. */
const LANE_CUSTOMER = 0x68e31da4;
const LANE_USER = 0xb5297a4d;
const LANE_DETAIL = 0x1b56c4e9;
const LANE_JITTER = 0x6a09e667;
const GOLDEN_32 = 0x9e3779b9;

/** Validation of inserted records: the fields of {@link AnalyticsRecord}; extra fields are kept as given. */
export const analyticsRecordSchema = z.looseObject({
  timestamp: z.string().refine((s) => parseIsoDateTime(s) !== undefined, 'must be an ISO 8601 date-time with a zone'),
  eventType: z.enum(EVENT_TYPES),
  customerId: z.string(),
  customerName: z.string(),
  userId: z.string(),
  dialogDefinitionId: z.string().optional(),
  documentTemplate: z.string().optional(),
  channel: z.enum(CHANNELS),
});

// ---------------------------------------------------------------------------------------------

interface InsertedEntry {
  ms: number;
  /** Insertion sequence: the tie-breaker that keeps equal timestamps in insertion order. */
  seq: number;
  record: AnalyticsRecord;
  json: string;
  eventIndex: number;
  customerKey: string;
}

/**
 * The orders of records within an E6 response the simulator can serve; the reference promises
 * none. `stable`: timestamp, then a fixed tie order. `ties`: timestamp, ties in an order drawn per
 * request. `random`: an order drawn per request. See {@link Dataset.pageJsonOrdered}.
 */
export const RECORD_ORDERS = ['stable', 'ties', 'random'] as const;
export type RecordOrder = (typeof RECORD_ORDERS)[number];

/** Fisher–Yates of `items[from … to)`, in place. */
function shuffleRange<T>(items: T[], from: number, to: number, random: () => number): void {
  for (let i = to - 1; i > from; i--) {
    const j = from + Math.floor(random() * (i - from + 1));
    const swap = items[i]!;
    items[i] = items[j]!;
    items[j] = swap;
  }
}

/**
 * The first `k` entries of a uniformly random permutation of 0 … n-1 (a random ordered sample
 * without replacement), by a Fisher–Yates stopped after `k` steps that keeps only the cells it
 * moved: O(k) time and memory whatever `n`.
 *
 * One request shows positions [s, s + k) of its own permutation and no other position of it;
 * those are distributed exactly as positions [0, k), so drawing only the part served is the same
 * as shuffling everything and cutting the page out.
 */
function samplePermutation(n: number, k: number, random: () => number): number[] {
  const moved = new Map<number, number>();
  const out = new Array<number>(k);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(random() * (n - i));
    out[i] = moved.get(j) ?? j;
    moved.set(j, moved.get(i) ?? i);
  }
  return out;
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

interface CustomerInfo extends Customer {
  /** `"customerId":"…","customerName":"…"`, pre-escaped. */
  jsonFragment: string;
  /** Four-digit customer number used in user ids. */
  number: string;
  dialogDefinitions: string[] | undefined;
}

/** Scratch fields of one generated record, reused to avoid an allocation per record. */
interface Parts {
  eventIndex: number;
  customer: number;
  user: number;
  channel: number;
  dialogDefinition: number;
  template: number;
}

function resolveInt(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new InvalidArgumentError(`dataset option ${name} must be a whole number from ${min} to ${max}; got ${String(value)}`);
  }
  return v;
}

/** Dialog events and the notifications sent when a dialog is created carry a dialogDefinitionId. */
function hasDialog(eventIndex: number): boolean {
  const type = EVENT_TYPES[eventIndex];
  return type === 'DialogCreated' || type === 'DialogSubmitted' || type === 'SmsSent' || type === 'EmailSent';
}

function hasDocument(eventIndex: number): boolean {
  const type = EVENT_TYPES[eventIndex];
  return type === 'DocumentCreated' || type === 'PdfCreated';
}

function pad4(n: number): string {
  return String(n).padStart(4, '0');
}

/** Weighted lookup table: `size` slots, each holding an item index, in proportion to `weights`. */
function buildTable(weights: readonly number[], size: number): Uint16Array {
  const total = weights.reduce((s, w) => s + w, 0);
  const table = new Uint16Array(size);
  let item = 0;
  let cumulative = weights[0]!;
  for (let slot = 0; slot < size; slot++) {
    const point = ((slot + 0.5) / size) * total;
    while (point > cumulative && item < weights.length - 1) {
      item++;
      cumulative += weights[item]!;
    }
    table[slot] = item;
  }
  return table;
}

/** Name of customer `index` (0-based): the curated list first, then composed names. */
function customerName(index: number): string {
  const curated = CUSTOMER_NAMES[index];
  if (curated !== undefined) return curated;
  const k = index - CUSTOMER_NAMES.length;
  const p = k % NAME_PREFIXES.length;
  const row = Math.floor(k / NAME_PREFIXES.length);
  // Shifting the industry by the prefix makes (prefix, industry) unique for the first 300 names.
  const industry = NAME_INDUSTRIES[(row + p) % NAME_INDUSTRIES.length]!;
  const suffix = NAME_SUFFIXES[(k * 7) % NAME_SUFFIXES.length]!;
  const round = Math.floor(k / (NAME_PREFIXES.length * NAME_INDUSTRIES.length));
  return `${NAME_PREFIXES[p]!} ${industry}${round > 0 ? ` ${round + 1}` : ''} ${suffix}`;
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

  readonly #seedKey: number;
  readonly #startMs: number;
  readonly #slotQuotient: number;
  readonly #slotRemainder: number;
  readonly #secondsFormat: boolean;
  readonly #eventTable: Uint16Array;
  readonly #eventTableShift: number;
  readonly #customerTable: Uint16Array;
  readonly #customerTableShift: number;
  readonly #customers: CustomerInfo[];
  readonly #customerIndexByKey = new Map<string, number>();
  readonly #parts: Parts = { eventIndex: 0, customer: 0, user: 0, channel: 0, dialogDefinition: 0, template: 0 };
  #inserted: InsertedEntry[] = [];
  #insertSeq = 0;
  #checkpoints: { every: number; cells: Uint32Array } | undefined;
  #cachedDay = NaN;
  #cachedDayPrefix = '';
  /** `0001` … : four-digit user numbers, precomputed because every record needs one. */
  readonly #userNumbers: string[];

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
    this.#secondsFormat = precision % MS_PER_SECOND === 0;

    this.#seedKey = mix32(this.seed ^ 0x5bd1e995);
    this.#eventTable = buildTable(EVENT_WEIGHTS, 1024);
    this.#eventTableShift = 22;
    // A mild Zipf skew: customer k gets weight 1/(k+1)^0.7, so a few customers are busy.
    const customerWeights = Array.from({ length: this.customerCount }, (_, k) => 1 / (k + 1) ** 0.7);
    const customerBits = Math.min(20, Math.max(12, Math.ceil(Math.log2(this.customerCount * 16))));
    this.#customerTable = buildTable(customerWeights, 2 ** customerBits);
    this.#customerTableShift = 32 - customerBits;
    this.#userNumbers = Array.from({ length: this.usersPerCustomer }, (_, u) => pad4(u + 1));
    this.#customers = Array.from({ length: this.customerCount }, (_, index) => {
      const id = `cust-${pad4(index + 1)}`;
      const name = customerName(index);
      this.#customerIndexByKey.set(`${id}\u0000${name}`, index);
      return {
        index,
        id,
        name,
        number: pad4(index + 1),
        jsonFragment: `"customerId":${JSON.stringify(id)},"customerName":${JSON.stringify(name)}`,
        dialogDefinitions: undefined,
      };
    });
  }

  /** Base plus inserted records. */
  get size(): number {
    return this.baseRecords + this.#inserted.length;
  }

  /** Number of records added with {@link insert}. */
  get insertedRecords(): number {
    return this.#inserted.length;
  }

  /** The customers of the generated data, in id order. */
  customers(): Customer[] {
    return this.#customers.map(({ index, id, name }) => ({ index, id, name }));
  }

  // -------------------------------------------------------------------------------------------
  // Generation of base records.

  /** Index of the record that record `i` copies, or `i` itself. */
  #source(i: number): number {
    const every = this.duplicateEvery;
    return every !== 0 && i > 0 && (i + 1) % every === 0 ? i - 1 : i;
  }

  #hash(i: number): number {
    return mix32(Math.imul(i, GOLDEN_32) ^ this.#seedKey);
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
    const jitter = Math.floor((mix32(this.#hash(s) ^ LANE_JITTER) / TWO_POW_32) * width);
    const raw = lo + jitter;
    return Math.floor(raw / this.timePrecisionMs) * this.timePrecisionMs;
  }

  #eventOf(h: number): number {
    return this.#eventTable[h >>> this.#eventTableShift]!;
  }

  #customerOf(h: number): number {
    return this.#customerTable[mix32(h ^ LANE_CUSTOMER) >>> this.#customerTableShift]!;
  }

  /** Fills the scratch parts from a record hash. */
  #fillParts(h: number): Parts {
    const p = this.#parts;
    p.eventIndex = this.#eventOf(h);
    p.customer = this.#customerOf(h);
    p.user = Math.floor((mix32(h ^ LANE_USER) / TWO_POW_32) * this.usersPerCustomer);
    const detail = mix32(h ^ LANE_DETAIL);
    // Logins come mostly from the browser; other events come from integrations a quarter of the time.
    const apiShare = p.eventIndex === 0 ? 26 : 64; // out of 256
    p.channel = detail >>> 24 < apiShare ? 1 : 0;
    p.dialogDefinition = (detail & 0xffff) % DIALOG_DEFINITIONS_PER_CUSTOMER;
    p.template = ((detail >>> 16) & 0xff) % DOCUMENT_TEMPLATES.length;
    return p;
  }

  #dialogDefinitionId(customer: CustomerInfo, k: number): string {
    if (customer.dialogDefinitions === undefined) {
      customer.dialogDefinitions = Array.from({ length: DIALOG_DEFINITIONS_PER_CUSTOMER }, (_, d) => {
        let h = mix32(this.#seedKey ^ mix32(customer.index * DIALOG_DEFINITIONS_PER_CUSTOMER + d + 1));
        let hex = '';
        for (let w = 0; w < 4; w++) {
          hex += h.toString(16).padStart(8, '0');
          h = mix32(h + GOLDEN_32);
        }
        // UUID version 4 layout, so the id looks like the platform's other ids.
        const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
        return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
      });
    }
    return customer.dialogDefinitions[k]!;
  }

  /**
   * Formats a timestamp: whole seconds as `…:ssZ` when the precision is whole seconds, otherwise
   * `…:ss.sssZ`; the same text as `Date.prototype.toISOString` (minus `.000`). Pages of a
   * thousand records spend most of their time here, so the date part is cached per day.
   */
  formatTimestamp(ms: number): string {
    if (!(ms >= 0 && ms < YEAR_10000_MS)) {
      const iso = new Date(ms).toISOString();
      return this.#secondsFormat && ms % MS_PER_SECOND === 0 ? `${iso.slice(0, -5)}Z` : iso;
    }
    const day = Math.floor(ms / MS_PER_DAY);
    if (day !== this.#cachedDay) {
      this.#cachedDay = day;
      this.#cachedDayPrefix = new Date(day * MS_PER_DAY).toISOString().slice(0, 11);
    }
    let rest = ms - day * MS_PER_DAY;
    const hours = Math.floor(rest / 3_600_000);
    rest -= hours * 3_600_000;
    const minutes = Math.floor(rest / 60_000);
    rest -= minutes * 60_000;
    const seconds = Math.floor(rest / MS_PER_SECOND);
    const millis = rest - seconds * MS_PER_SECOND;
    const text = `${this.#cachedDayPrefix}${TWO_DIGITS[hours]!}:${TWO_DIGITS[minutes]!}:${TWO_DIGITS[seconds]!}`;
    return this.#secondsFormat && millis === 0 ? `${text}Z` : `${text}.${String(millis).padStart(3, '0')}Z`;
  }

  #objectFrom(h: number, timestamp: string): AnalyticsRecord {
    const p = this.#fillParts(h);
    const customer = this.#customers[p.customer]!;
    // Key order matches #jsonFrom, so JSON.stringify of this object equals the served text.
    return {
      timestamp,
      eventType: EVENT_TYPES[p.eventIndex]!,
      customerId: customer.id,
      customerName: customer.name,
      userId: `user-${customer.number}-${this.#userNumbers[p.user]!}`,
      ...(hasDialog(p.eventIndex) ? { dialogDefinitionId: this.#dialogDefinitionId(customer, p.dialogDefinition) } : {}),
      ...(hasDocument(p.eventIndex) ? { documentTemplate: DOCUMENT_TEMPLATES[p.template]! } : {}),
      channel: CHANNELS[p.channel]!,
    };
  }

  /** The same text as `JSON.stringify(#objectFrom(h, timestamp))`, built without the object. */
  #jsonFrom(h: number, timestamp: string): string {
    const p = this.#fillParts(h);
    const customer = this.#customers[p.customer]!;
    let json = `{"timestamp":"${timestamp}","eventType":"${EVENT_TYPES[p.eventIndex]!}",${customer.jsonFragment},"userId":"user-${customer.number}-${this.#userNumbers[p.user]!}"`;
    if (hasDialog(p.eventIndex)) {
      json += `,"dialogDefinitionId":"${this.#dialogDefinitionId(customer, p.dialogDefinition)}"`;
    }
    if (hasDocument(p.eventIndex)) json += `,"documentTemplate":"${DOCUMENT_TEMPLATES[p.template]!}"`;
    return `${json},"channel":"${CHANNELS[p.channel]!}"}`;
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
    return this.#objectFrom(this.#hash(s), this.formatTimestamp(this.#baseMs(s)));
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
    if (!Number.isSafeInteger(count) || count < 0) throw new InvalidArgumentError(`count must be a whole number ≥ 0; got ${count}`);
    const fromMs = from.getTime();
    const toMs = to.getTime();
    const lastMs = toInclusive ? toMs : toMs - 1;
    if (!(lastMs >= fromMs)) {
      throw new InvalidArgumentError(`range ${from.toISOString()} to ${to.toISOString()} (${toInclusive ? 'inclusive' : 'exclusive'}) holds no instant`);
    }
    const precision = this.timePrecisionMs;
    const firstGrid = Math.ceil(fromMs / precision);
    const lastGrid = Math.floor(lastMs / precision);
    const saltKey = mix32(this.#seedKey ^ mix32((salt >>> 0) + 0x3c6ef372));
    const out: AnalyticsRecord[] = [];
    for (let k = 0; k < count; k++) {
      const h = mix32(Math.imul(k, GOLDEN_32) ^ saltKey);
      const u = mix32(h ^ LANE_JITTER) / TWO_POW_32;
      // No grid point in a narrow range: fall back to millisecond timestamps inside it.
      const ms = lastGrid >= firstGrid ? (firstGrid + Math.floor(u * (lastGrid - firstGrid + 1))) * precision : fromMs + Math.floor(u * (lastMs - fromMs + 1));
      out.push(this.#objectFrom(h, this.formatTimestamp(ms)));
    }
    return out;
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
    return this.#jsonFrom(this.#hash(s), this.formatTimestamp(this.#baseMs(s)));
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

  /** Prefix counts: cells[k * C + e * customers + c] = events of type e for customer c among base records [0, k × every). */
  #ensureCheckpoints(): { every: number; cells: Uint32Array } {
    if (this.#checkpoints !== undefined) return this.#checkpoints;
    const cellsPerCheckpoint = EVENT_TYPES.length * this.customerCount;
    const n = this.baseRecords;
    const every = Math.max(CHECKPOINT_RECORDS, Math.ceil((n * cellsPerCheckpoint) / MAX_CHECKPOINT_CELLS));
    const checkpoints = Math.floor(n / every) + 1;
    const cells = new Uint32Array(checkpoints * cellsPerCheckpoint);
    const running = new Uint32Array(cellsPerCheckpoint);
    let next = 0;
    let cell = 0;
    for (let i = 0; i < n; i++) {
      if (i === next * every) {
        cells.set(running, next * cellsPerCheckpoint);
        next++;
      }
      // A copy repeats its predecessor's cell, so only originals are hashed.
      if (this.#source(i) === i) {
        const h = this.#hash(i);
        cell = this.#eventOf(h) * this.customerCount + this.#customerOf(h);
      }
      running[cell]!++;
    }
    if (next < checkpoints) cells.set(running, next * cellsPerCheckpoint);
    this.#checkpoints = { every, cells };
    return this.#checkpoints;
  }

  #scanInto(counts: Float64Array, a: number, b: number): void {
    for (let i = a; i < b; i++) {
      const h = this.#hash(this.#source(i));
      counts[this.#eventOf(h) * this.customerCount + this.#customerOf(h)]!++;
    }
  }

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
    const C = this.customerCount;
    const counts = new Float64Array(EVENT_TYPES.length * C);
    const { a, b } = span;
    if (b > a) {
      const { every, cells } = this.#ensureCheckpoints();
      const ka = Math.ceil(a / every);
      const kb = Math.floor(b / every);
      if (ka >= kb) {
        this.#scanInto(counts, a, b);
      } else {
        const width = counts.length;
        for (let x = 0; x < width; x++) counts[x] = cells[kb * width + x]! - cells[ka * width + x]!;
        this.#scanInto(counts, a, ka * every);
        this.#scanInto(counts, kb * every, b);
      }
    }
    const extra = new Map<string, { eventIndex: number; id: string; name: string; count: number }>();
    for (let j = span.c; j < span.d; j++) {
      const entry = this.#inserted[j]!;
      const known = this.#customerIndexByKey.get(entry.customerKey);
      if (known !== undefined) {
        counts[entry.eventIndex * C + known]!++;
      } else {
        const key = `${entry.eventIndex}\u0000${entry.customerKey}`;
        const row = extra.get(key) ?? { eventIndex: entry.eventIndex, id: entry.record.customerId, name: entry.record.customerName, count: 0 };
        row.count++;
        extra.set(key, row);
      }
    }
    const out: EventCount[] = [];
    const others = [...extra.values()].sort((x, y) => x.id.localeCompare(y.id) || x.name.localeCompare(y.name));
    EVENT_TYPES.forEach((eventType, e) => {
      for (const customer of this.#customers) {
        out.push({ eventType, customerId: customer.id, customerName: customer.name, count: counts[e * C + customer.index]! });
      }
      for (const row of others) {
        if (row.eventIndex === e) out.push({ eventType, customerId: row.id, customerName: row.name, count: row.count });
      }
    });
    return out;
  }
}

/** Creates a {@link Dataset}; same as `new Dataset(options)`. @throws {InvalidArgumentError} as the constructor. */
export function createDataset(options: DatasetOptions = {}): Dataset {
  return new Dataset(options);
}
