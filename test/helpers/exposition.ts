/** What the exposition format's tests ask of src/exposition/ beyond what the product uses. */
import { ExpositionLimitScanner, type ExpositionLimits } from '../../src/exposition/index.js';
import type { LimitBreach } from '../../src/exposition/limits.js';
import type { InvalidReason, MetricType } from '../../src/exposition/types.js';

/** The types in the order the text format's documentation lists them. */
export const METRIC_TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

/** Every {@link InvalidReason}. */
export const INVALID_REASONS: readonly InvalidReason[] = [
  'bad_syntax',
  'bad_metric_name',
  'bad_label_name',
  'duplicate_label',
  'bad_escape',
  'bad_value',
  'bad_timestamp',
  'bad_type',
  'duplicate_metadata',
  'late_metadata',
  'family_mismatch',
  'duplicate_series',
];

/**
 * Checks a whole exposition against `limits`, as serve's read does chunk by chunk
 * ({@link ExpositionLimitScanner}).
 *
 * @param body the exposition as text (measured in UTF-8) or bytes.
 * @returns the first breach, or undefined when it is within every limit.
 */
export function checkExpositionLimits(body: string | Uint8Array, limits: ExpositionLimits): LimitBreach | undefined {
  return new ExpositionLimitScanner(limits).write(typeof body === 'string' ? Buffer.from(body) : body);
}
