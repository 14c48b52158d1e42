/**
 * What record_fields says of one top-level field, and how a parsed value is named there: the JSON
 * types (`string`, `date-time`, `number`, `boolean`, `object`, `array`, `null`), the example's
 * text and which names keep none. Shared by the page walk (page-walk.ts), the catalogue
 * (catalogue.ts) and the field contract (contract.ts); it imports no other module of the exporter.
 */

/** Examples in the catalogue are cut to this many characters (of their JSON text). */
export const EXAMPLE_MAX_CHARS = 40;

/** Field names whose example is never kept: they suggest a secret or a credential. */
export const SECRET_FIELD_PATTERN = '(pass|secret|token|auth|cred|key|session|cookie|signature|ssn|card|iban|cvv)';

/**
 * An ISO 8601 date-time with a zone: a field whose strings all match it is typed timestamptz in
 * records_typed. A string matching it that is still no instant (February 30th) becomes null there.
 */
export const ISO_DATE_TIME_PATTERN =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])[T ]([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d+)?)?(Z|[+-]([01]\\d|2[0-3])(:?[0-5]\\d)?)$';

/** {@link SECRET_FIELD_PATTERN} for JavaScript, case-insensitive. */
const SECRET_FIELD = new RegExp(SECRET_FIELD_PATTERN, 'i');

/** What some records hold of one top-level field, merged into record_fields at a window's commit. */
export interface FieldStats {
  /** JSON types seen (`date-time` for an ISO 8601 date-time string). */
  types: Set<string>;
  /** Records holding the field. */
  records: number;
  /** Earliest and latest event time of those records, in milliseconds (±Infinity when none had one). */
  first: number;
  last: number;
  /** Whether one of them had no event time (its window start counts then). */
  untimed: boolean;
  /** A non-null value's JSON text, cut to {@link EXAMPLE_MAX_CHARS}; null for a secret-like name. */
  example: string | null;
}

/** Field name → its stats over some records. */
export type WindowFields = Map<string, FieldStats>;

/**
 * The JSON types by number, as {@link typeCode} gives them: `TYPE_NAMES[typeCode(v)]` is
 * `jsonType(v)`.
 */
export const TYPE_NAMES: readonly string[] = ['string', 'date-time', 'number', 'boolean', 'object', 'array', 'null'];

/** Whether the code unit at `i` of `s` is an ASCII digit from `lo` to `hi`. */
function digit(s: string, i: number, lo = 48, hi = 57): boolean {
  const c = s.charCodeAt(i);
  return c >= lo && c <= hi;
}

/** `[0-5]\d` at `i`. */
function minutes(s: string, i: number): boolean {
  return digit(s, i, 48, 53) && digit(s, i + 1);
}

/** `([01]\d|2[0-3])` at `i`. */
function hours(s: string, i: number): boolean {
  return s.charCodeAt(i) === 50 ? digit(s, i + 1, 48, 51) : digit(s, i, 48, 49) && digit(s, i + 1);
}

/**
 * Whether a string matches {@link ISO_DATE_TIME_PATTERN}, read code unit by code unit (a
 * record's time field is tested once per record: this is what the pattern says, without the
 * regular expression engine; a property test holds the two equal).
 */
export function isDateTime(s: string): boolean {
  const n = s.length;
  if (n < 17 || s.charCodeAt(4) !== 45) return false;
  if (!(digit(s, 0) && digit(s, 1) && digit(s, 2) && digit(s, 3))) return false;
  // Month 01–12, day 01–31.
  const m = s.charCodeAt(5);
  if (!(m === 48 ? digit(s, 6, 49, 57) : m === 49 && digit(s, 6, 48, 50))) return false;
  if (s.charCodeAt(7) !== 45) return false;
  const d = s.charCodeAt(8);
  if (!(d === 48 ? digit(s, 9, 49, 57) : d === 49 || d === 50 ? digit(s, 9) : d === 51 && digit(s, 9, 48, 49))) return false;
  const t = s.charCodeAt(10);
  if (t !== 84 && t !== 32) return false;
  if (!hours(s, 11) || s.charCodeAt(13) !== 58 || !minutes(s, 14)) return false;
  let i = 16;
  // Optional seconds, then an optional fraction of at least one digit.
  if (s.charCodeAt(i) === 58) {
    if (!minutes(s, i + 1)) return false;
    i += 3;
    if (s.charCodeAt(i) === 46) {
      i++;
      if (!digit(s, i)) return false;
      while (digit(s, i)) i++;
    }
  }
  // The zone: Z, or ±hh with optional minutes (`:mm` or `mm`), then the end.
  const z = s.charCodeAt(i);
  if (z === 90) return i + 1 === n;
  if (z !== 43 && z !== 45) return false;
  if (!hours(s, i + 1)) return false;
  const rest = n - (i + 3);
  if (rest === 0) return true;
  if (rest === 2) return minutes(s, i + 3);
  return rest === 3 && s.charCodeAt(i + 3) === 58 && minutes(s, i + 4);
}

/** The JSON type of a parsed value as its position in {@link TYPE_NAMES} (a number: compared without a string). */
export function typeCode(value: unknown): number {
  if (value === null) return 6;
  switch (typeof value) {
    case 'string':
      return isDateTime(value) ? 1 : 0;
    case 'number':
      return 2;
    case 'boolean':
      return 3;
    default:
      return Array.isArray(value) ? 5 : 4;
  }
}

/**
 * The JSON type of a parsed value as record_fields names it (`string`, `date-time`, `number`,
 * `boolean`, `object`, `array`, `null`); `known`, the types its field already has, spares the
 * date-time pattern when both `string` and `date-time` are among them (either answer then adds
 * nothing, so `string` is returned).
 */
export function jsonType(value: unknown, known?: ReadonlySet<string>): string {
  if (typeof value === 'string' && known !== undefined && known.has('date-time') && known.has('string')) return 'string';
  return TYPE_NAMES[typeCode(value)]!;
}

/** Whether a field's name suggests a secret ({@link SECRET_FIELD_PATTERN}): the catalogue keeps no example of it. */
export function isSecretField(name: string): boolean {
  return SECRET_FIELD.test(name);
}

/** A value's JSON text cut to {@link EXAMPLE_MAX_CHARS} characters (the last one an ellipsis when cut). */
export function exampleOf(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > EXAMPLE_MAX_CHARS ? `${text.slice(0, EXAMPLE_MAX_CHARS - 1)}…` : text;
}
