/**
 * Prometheus exposition text: parse text format 0.0.4 (E7), merge families, and
 * serialize as text 0.0.4 or OpenMetrics 1.0.0.
 */
export type { InvalidReason, MetricFamily, MetricType, Sample } from './types.js';
export { INVALID_REASONS, METRIC_TYPES } from './types.js';
export { isValidLabelName, isValidMetricName } from './lexical.js';
export { parseGoFloat } from './number.js';
export { parseExposition } from './parse.js';
export { normalizeFamilies } from './normalize.js';
export { formatValue } from './format.js';
export { TEXT_CONTENT_TYPE, serializeText, serializeTextBuffer } from './text.js';
export { OPENMETRICS_CONTENT_TYPE, openMetricsClaims, serializeOpenMetrics, serializeOpenMetricsBuffer, serializeOpenMetricsFamily } from './openmetrics.js';
export { canonicalFloat } from './openmetrics-points.js';
export { negotiateFormat } from './negotiate.js';
export {
  addTargetLabels,
  collidesWithReserved,
  mergeFamilies,
  mergeSources,
  prefixFamilies,
  relabelInPlace,
  reservedNameSet,
  reservedNamesOf,
} from './merge.js';
export type { IndexedPart, TargetLabels } from './part.js';
export { PartWriter, mergeParts, targetLabels } from './part.js';
export type { ExpositionLimits } from './limits.js';
export { ExpositionLimitScanner, checkExpositionLimits, describeLimit } from './limits.js';
