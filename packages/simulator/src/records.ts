/**
 * How one generated record is made: record `i` of a dataset is a pure function of (seed, i),
 * built straight from a 32-bit hash with no per-record storage. The field values are our guess
 * (the reference shows no field of an analytics record), documented as such in docs/simulator.md.
 */
import { z } from 'zod';
import { InvalidArgumentError } from './errors.js';
import { parseIsoDateTime } from './time.js';

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
export const TWO_POW_32 = 4_294_967_296;

// ---------------------------------------------------------------------------------------------
// Hashing. lowbias32 (Chris Wellons' hash-prospector): a bijective 32-bit mixer with good
// avalanche, two multiplies per call, so a record costs a handful of integer operations.

export function mix32(x: number): number {
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
export const LANE_JITTER = 0x6a09e667;
export const GOLDEN_32 = 0x9e3779b9;

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

export interface CustomerInfo extends Customer {
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

/** Dialog events and the notifications sent when a dialog is created carry a dialogDefinitionId. */
function hasDialog(eventIndex: number): boolean {
  const type = EVENT_TYPES[eventIndex];
  return type === 'DialogCreated' || type === 'DialogSubmitted' || type === 'SmsSent' || type === 'EmailSent';
}

function hasDocument(eventIndex: number): boolean {
  const type = EVENT_TYPES[eventIndex];
  return type === 'DocumentCreated' || type === 'PdfCreated';
}

export function pad4(n: number): string {
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
 * The generator of one dataset's records: the seed's key, the weighted tables of event types and
 * customers, and the customers. Pages of a thousand records spend most of their time here, so
 * it reuses one scratch {@link Parts} and caches the date part of timestamps per day.
 */
export class RecordMaker {
  /** The customers of the generated data, in id order. */
  readonly customers: readonly CustomerInfo[];
  /** Customer index by `id NUL name`: how an inserted record is counted with a generated customer. */
  readonly customerIndexByKey = new Map<string, number>();
  readonly seedKey: number;
  readonly #usersPerCustomer: number;
  readonly #secondsFormat: boolean;
  readonly #eventTable: Uint16Array;
  readonly #eventTableShift: number;
  readonly #customerTable: Uint16Array;
  readonly #customerTableShift: number;
  readonly #parts: Parts = { eventIndex: 0, customer: 0, user: 0, channel: 0, dialogDefinition: 0, template: 0 };
  /** `0001` … : four-digit user numbers, precomputed because every record needs one. */
  readonly #userNumbers: string[];
  #cachedDay = NaN;
  #cachedDayPrefix = '';

  /** Options as validated by the dataset: seed 0 … 2^32 - 1, customers and users 1 … 9999, precision in ms. */
  constructor(seed: number, customerCount: number, usersPerCustomer: number, timePrecisionMs: number) {
    this.#usersPerCustomer = usersPerCustomer;
    this.#secondsFormat = timePrecisionMs % MS_PER_SECOND === 0;
    this.seedKey = mix32(seed ^ 0x5bd1e995);
    this.#eventTable = buildTable(EVENT_WEIGHTS, 1024);
    this.#eventTableShift = 22;
    // A mild Zipf skew: customer k gets weight 1/(k+1)^0.7, so a few customers are busy.
    const customerWeights = Array.from({ length: customerCount }, (_, k) => 1 / (k + 1) ** 0.7);
    const customerBits = Math.min(20, Math.max(12, Math.ceil(Math.log2(customerCount * 16))));
    this.#customerTable = buildTable(customerWeights, 2 ** customerBits);
    this.#customerTableShift = 32 - customerBits;
    this.#userNumbers = Array.from({ length: usersPerCustomer }, (_, u) => pad4(u + 1));
    this.customers = Array.from({ length: customerCount }, (_, index) => {
      const id = `cust-${pad4(index + 1)}`;
      const name = customerName(index);
      this.customerIndexByKey.set(`${id}\u0000${name}`, index);
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

  /** The hash of base record `i`: everything about the record but its time slot follows from it. */
  hash(i: number): number {
    return mix32(Math.imul(i, GOLDEN_32) ^ this.seedKey);
  }

  /** Index into {@link EVENT_TYPES} of the record with hash `h`. */
  eventOf(h: number): number {
    return this.#eventTable[h >>> this.#eventTableShift]!;
  }

  /** Customer index of the record with hash `h`. */
  customerOf(h: number): number {
    return this.#customerTable[mix32(h ^ LANE_CUSTOMER) >>> this.#customerTableShift]!;
  }

  /** Fills the scratch parts from a record hash. */
  #fillParts(h: number): Parts {
    const p = this.#parts;
    p.eventIndex = this.eventOf(h);
    p.customer = this.customerOf(h);
    p.user = Math.floor((mix32(h ^ LANE_USER) / TWO_POW_32) * this.#usersPerCustomer);
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
        let h = mix32(this.seedKey ^ mix32(customer.index * DIALOG_DEFINITIONS_PER_CUSTOMER + d + 1));
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

  /** Record with hash `h` and the given timestamp text, as an object. */
  objectFrom(h: number, timestamp: string): AnalyticsRecord {
    const p = this.#fillParts(h);
    const customer = this.customers[p.customer]!;
    // Key order matches jsonFrom, so JSON.stringify of this object equals the served text.
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

  /** The same text as `JSON.stringify(objectFrom(h, timestamp))`, built without the object. */
  jsonFrom(h: number, timestamp: string): string {
    const p = this.#fillParts(h);
    const customer = this.customers[p.customer]!;
    let json = `{"timestamp":"${timestamp}","eventType":"${EVENT_TYPES[p.eventIndex]!}",${customer.jsonFragment},"userId":"user-${customer.number}-${this.#userNumbers[p.user]!}"`;
    if (hasDialog(p.eventIndex)) {
      json += `,"dialogDefinitionId":"${this.#dialogDefinitionId(customer, p.dialogDefinition)}"`;
    }
    if (hasDocument(p.eventIndex)) json += `,"documentTemplate":"${DOCUMENT_TEMPLATES[p.template]!}"`;
    return `${json},"channel":"${CHANNELS[p.channel]!}"}`;
  }

  /**
   * `count` plausible records with timestamps spread at random over a range, on `precision` where
   * the range allows; see `Dataset.plausibleRecords`.
   *
   * @throws {InvalidArgumentError} when the range holds no instant or `count` is negative.
   */
  plausibleRecords(count: number, from: Date, to: Date, toInclusive: boolean, salt: number, precision: number): AnalyticsRecord[] {
    if (!Number.isSafeInteger(count) || count < 0) throw new InvalidArgumentError(`count must be a whole number ≥ 0; got ${count}`);
    const fromMs = from.getTime();
    const toMs = to.getTime();
    const lastMs = toInclusive ? toMs : toMs - 1;
    if (!(lastMs >= fromMs)) {
      throw new InvalidArgumentError(`range ${from.toISOString()} to ${to.toISOString()} (${toInclusive ? 'inclusive' : 'exclusive'}) holds no instant`);
    }
    const firstGrid = Math.ceil(fromMs / precision);
    const lastGrid = Math.floor(lastMs / precision);
    const saltKey = mix32(this.seedKey ^ mix32((salt >>> 0) + 0x3c6ef372));
    const out: AnalyticsRecord[] = [];
    for (let k = 0; k < count; k++) {
      const h = mix32(Math.imul(k, GOLDEN_32) ^ saltKey);
      const u = mix32(h ^ LANE_JITTER) / TWO_POW_32;
      // No grid point in a narrow range: fall back to millisecond timestamps inside it.
      const ms = lastGrid >= firstGrid ? (firstGrid + Math.floor(u * (lastGrid - firstGrid + 1))) * precision : fromMs + Math.floor(u * (lastMs - fromMs + 1));
      out.push(this.objectFrom(h, this.formatTimestamp(ms)));
    }
    return out;
  }
}
