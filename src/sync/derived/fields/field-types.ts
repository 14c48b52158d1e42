/**
 * What record_fields says of one top-level field and how a parsed value's JSON type is named there
 * (`string`, `date-time`, `number`, `boolean`, `object`, `array`, `null`). A leaf: it imports no
 * other module of the exporter.
 */

/** Characters of an example's JSON text. */
export const EXAMPLE_MAX_CHARS = 40;

/** Names whose example is never kept. */
export const SECRET_FIELD_PATTERN = '(pass|secret|token|auth|cred|key|session|cookie|signature|ssn|card|iban|cvv)';

/**
 * A field whose strings all match is timestamptz in records_typed; a match that is no instant (February 30th) is null there.
 * @internal the product checks by character codes ({@link isDateTime}); the tests hold it to this.
 */
export const ISO_DATE_TIME_PATTERN =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])[T ]([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d+)?)?(Z|[+-]([01]\\d|2[0-3])(:?[0-5]\\d)?)$';

const SECRET_FIELD = new RegExp(SECRET_FIELD_PATTERN, 'i');

/** What some records hold of one top-level field. */
export interface FieldStats {
  types: Set<string>;
  records: number;
  /** Earliest and latest event time, ms (±Infinity when none had one). */
  first: number;
  last: number;
  /** One had no event time (its window start counts then). */
  untimed: boolean;
  /** Null for a secret-like name. */
  example: string | null;
}

export type WindowFields = Map<string, FieldStats>;

/** `TYPE_NAMES[typeCode(v)]` is `jsonType(v)`. */
export const TYPE_NAMES: readonly string[] = ['string', 'date-time', 'number', 'boolean', 'object', 'array', 'null'];

/** Whether `s` holds two decimal digits at `i` making a number from 0 to `max`. */
function twoDigits(s: string, i: number, max: number): boolean {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 && a * 10 + b <= max;
}

/** Whether `s` holds a decimal digit at `i`. */
function digit(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return c >= 48 && c <= 57;
}

/** {@link ISO_DATE_TIME_PATTERN}'s zone from `i` to the end: `Z`, or `±hh` then `[:]mm` or nothing. */
function isZone(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  if (c === 90) return i + 1 === s.length; // Z
  if ((c !== 43 && c !== 45) || !twoDigits(s, i + 1, 23)) return false; // + -
  let at = i + 3;
  if (at === s.length) return true;
  if (s.charCodeAt(at) === 58) at++;
  return twoDigits(s, at, 59) && at + 2 === s.length;
}

/**
 * `ISO_DATE_TIME.test(value)` by character codes (called for every string of every record): the
 * date `YYYY-MM-DD`, `T` or a space, `hh:mm`, optional `:ss` with an optional fraction, a zone.
 */
export function isDateTime(s: string): boolean {
  if (s.length < 17 || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45) return false;
  if (!digit(s, 0) || !digit(s, 1) || !digit(s, 2) || !digit(s, 3)) return false;
  if (!twoDigits(s, 5, 12) || !twoDigits(s, 8, 31) || s.charCodeAt(5) + s.charCodeAt(6) === 96 || s.charCodeAt(8) + s.charCodeAt(9) === 96) return false;
  const t = s.charCodeAt(10);
  if ((t !== 84 && t !== 32) || !twoDigits(s, 11, 23) || s.charCodeAt(13) !== 58 || !twoDigits(s, 14, 59)) return false;
  let i = 16;
  if (s.charCodeAt(i) === 58) {
    if (!twoDigits(s, i + 1, 59)) return false;
    i += 3;
    if (s.charCodeAt(i) === 46) {
      if (!digit(s, ++i)) return false;
      while (digit(s, i)) i++;
    }
  }
  return isZone(s, i);
}

/** The position in {@link TYPE_NAMES}: compared without a string. */
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

/** `known` (the field's types) spares the date-time pattern when it holds both `string` and `date-time`. */
export function jsonType(value: unknown, known?: ReadonlySet<string>): string {
  if (typeof value === 'string' && known !== undefined && known.has('date-time') && known.has('string')) return 'string';
  return TYPE_NAMES[typeCode(value)]!;
}

export function isSecretField(name: string): boolean {
  return SECRET_FIELD.test(name);
}

export function exampleOf(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > EXAMPLE_MAX_CHARS ? `${text.slice(0, EXAMPLE_MAX_CHARS - 1)}…` : text;
}

/** Field name → the JSON types seen. */
export type KnownFields = Map<string, Set<string>>;

/** A field, or a JSON type of a field, that the catalogue did not hold. */
export interface FieldChange {
  /** A top-level key. */
  path: string;
  type: string;
  /** Else a known field got a new type. */
  newField: boolean;
}
