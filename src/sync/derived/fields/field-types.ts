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

/** {@link ISO_DATE_TIME_PATTERN} for JavaScript. */
const ISO_DATE_TIME = new RegExp(ISO_DATE_TIME_PATTERN);
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

/** Whether a string is an ISO 8601 date-time with a zone ({@link ISO_DATE_TIME_PATTERN}); the cheap checks first: most strings are not. */
function isDateTime(value: string): boolean {
  return value.length >= 16 && value.charCodeAt(4) === 45 && ISO_DATE_TIME.test(value);
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

/** A source's catalogue as the contract reads it: field name (a top-level key) → the JSON types seen. */
export type KnownFields = Map<string, Set<string>>;

/** A field, or a JSON type of a field, that the catalogue did not hold. */
export interface FieldChange {
  /** The field's name (record_fields.path: a top-level key of the payload). */
  path: string;
  /** The JSON type, as record_fields names it (`string`, `date-time`, `number`, `boolean`, `object`, `array`, `null`). */
  type: string;
  /** Whether the field itself was new (else a known field got a new type). */
  newField: boolean;
}
