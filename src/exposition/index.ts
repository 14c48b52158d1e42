/**
 * Prometheus exposition text: parse text format 0.0.4 (E7), merge families, and
 * serialize as text 0.0.4 or OpenMetrics 1.0.0.
 */
export type { MetricFamily, MetricType, Sample } from './types.js';
export { isValidLabelName } from './lexical.js';
export { parseExposition } from './parse.js';
export { normalizeFamilies } from './normalize.js';
export { TEXT_CONTENT_TYPE, serializeTextBuffer } from './text.js';
export { OPENMETRICS_CONTENT_TYPE, openMetricsClaims, serializeOpenMetricsBuffer, serializeOpenMetricsFamily } from './openmetrics.js';
export { negotiateFormat } from './negotiate.js';
export { collidesWithReserved, relabelInPlace, reservedNameSet, reservedNamesOf } from './merge.js';
export type { IndexedPart, TargetLabels } from './part.js';
export { PartWriter, mergeParts, targetLabels } from './part.js';
export type { ExpositionLimits } from './limits.js';
export { ExpositionLimitScanner, describeLimit } from './limits.js';
