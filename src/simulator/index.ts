/**
 * The simulator: a deterministic stand-in for the platform's token endpoint (E0) and
 * analytics API (E6, E7), used by tests, by `analytics-exporter simulate` and by demo mode.
 */
export {
  analyticsRecordSchema,
  CHANNELS,
  CHECKPOINT_RECORDS,
  createDataset,
  Dataset,
  DEFAULT_CUSTOMERS,
  DEFAULT_DUPLICATE_EVERY,
  DEFAULT_END,
  DEFAULT_RECORDS,
  DEFAULT_SEED,
  DEFAULT_SPAN_MS,
  DEFAULT_TIME_PRECISION_MS,
  DEFAULT_USERS,
  EVENT_TYPES,
  MAX_RECORDS,
  RECORD_ORDERS,
  type AnalyticsRecord,
  type Channel,
  type Customer,
  type DatasetOptions,
  type EventCount,
  type EventType,
  type RecordOrder,
} from './dataset.js';
export {
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  DEFAULT_PAGE_SIZE,
  DEFAULT_SCOPE,
  DEFAULT_TOKEN_LIFETIME_SECONDS,
  escapeLabelValue,
  MAX_PAGE_SIZE,
  metricName,
  NO_FAULTS,
  startSimulator,
  type FaultSettings,
  type FaultRequest,
  type FaultTarget,
  type QueuedFault,
  type Simulator,
  type SimulatorOptions,
  type SimulatorRequestEvent,
  type SimulatorStats,
  type SimulatorTlsOptions,
} from './server.js';
export { parseIsoDateTime } from '../time.js';
export { mulberry32 } from './random.js';
