/**
 * @analytics-exporter/simulator: a deterministic stand-in for the platform's token endpoint (E0)
 * and analytics API (E6, E7), used by the exporter's tests, benchmarks and soak, by the exporter's
 * demo mode (`npm start` with STATISTICS_URL unset) and by the `analytics-simulator` program.
 */
export { MAX_ADMIN_BODY_BYTES, MAX_ADMIN_RECORDS } from './admin.js';
export { BANDWIDTH_RULE, LINK_CHUNK_BYTES, Link, parseBandwidth, writePaced, type LinkClock } from './bandwidth.js';
export { MAX_FILTER_TIME_LAG_MS, PAGE_SIZE_ECHOES, type BehaviourOptions, type PageSizeEcho } from './behaviours.js';
export { configureSimulateCommand, DEFAULT_SIMULATE_PORT, runSimulate, type SimulateIo } from './cli.js';
export { CHECKPOINT_RECORDS } from './counts.js';
export { createDataset, Dataset, type Insertion } from './dataset.js';
export {
  DEFAULT_CUSTOMERS,
  DEFAULT_DUPLICATE_EVERY,
  DEFAULT_END,
  DEFAULT_RECORDS,
  DEFAULT_SEED,
  DEFAULT_SPAN_MS,
  DEFAULT_TIME_PRECISION_MS,
  DEFAULT_USERS,
  MAX_RECORDS,
  type DatasetOptions,
} from './dataset-options.js';
export type { DeleteSelection } from './deletions.js';
export { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_EPOCH_MS, DEMO_RECORD_INTERVAL_MS, demoDatasetBounds } from './demo.js';
export { escapeLabelValue, metricName } from './endpoints.js';
export { InvalidArgumentError } from './errors.js';
export { acceptsGzip, GZIP_MODES, type GzipMode } from './gzip.js';
export { createLogger, silentLogger } from './log.js';
export { RECORD_ORDERS, type RecordOrder } from './order.js';
export { DEFAULT_OUT_OF_RANGE_VALUES, OUT_OF_RANGE_FIELD } from './out-of-range.js';
export { mulberry32 } from './random.js';
export { analyticsRecordSchema, CHANNELS, EVENT_TYPES, type AnalyticsRecord, type Channel, type Customer, type EventCount, type EventType } from './records.js';
export { startSimulator } from './server.js';
export {
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  DEFAULT_PAGE_SIZE,
  DEFAULT_SCOPE,
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  MAX_PAGE_SIZE,
  NO_FAULTS,
  type FaultRequest,
  type FaultSettings,
  type RangeFault,
  type FaultTarget,
  type QueuedFault,
  type Simulator,
  type SimulatorOptions,
  type SimulatorRequestEvent,
  type SimulatorStats,
  type SimulatorTlsOptions,
  type WireEndpoint,
} from './settings.js';
export { parseIsoDateTime } from './time.js';
