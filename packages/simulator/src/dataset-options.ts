/** The options of a dataset, their defaults and their bounds. */
import { InvalidArgumentError } from './errors.js';

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

/**
 * `value`, or `fallback` when absent, checked to be a whole number in [min, max].
 *
 * @throws {InvalidArgumentError} naming the option and the value.
 */
export function resolveInt(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new InvalidArgumentError(`dataset option ${name} must be a whole number from ${min} to ${max}; got ${String(value)}`);
  }
  return v;
}
