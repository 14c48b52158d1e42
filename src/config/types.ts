/**
 * The configuration's plain types, what loadConfig returns: the whole schema's settings apart from
 * each source's. A file a setting names is a path here; durations are milliseconds; what each
 * setting means is its help in settings.ts.
 */
import type { DatabaseTlsSettings } from './database-url.js';
import type { SettingFile } from './setting-file.js';

export type TokenAuthMethod = 'client_secret_post' | 'client_secret_basic';

/** Far above any published API limit, low enough to catch a typo. */
export const MAX_RATE_LIMIT_PER_SECOND = 10_000;

export const DEFAULT_METRICS_PORT = 9877;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `auto`: pretty on a TTY, JSON otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const PARTITION_INTERVALS = ['month', 'week', 'day'] as const;
export type PartitionInterval = (typeof PARTITION_INTERVALS)[number];

export interface RateLimit {
  /** E6 and E7 together. */
  ratePerSecond: number;
  burst: number;
}

/** Where and how to reach the platform (reference: Authentication, E0, E6, E7). */
export interface UpstreamConfig {
  statisticsUrl: URL;
  /** {auth_url}/connect/token. */
  tokenUrl: URL;
  clientId: string;
  /** Exactly one of `clientSecret` and `clientSecretFile` is set. */
  clientSecret?: string;
  clientSecretFile?: SettingFile;
  /** A variable or CONFIG_FILE key path, for warnings. */
  clientSecretVariable?: string;
  tokenAuthMethod: TokenAuthMethod;
  scope: string;
  tls: TlsFileSettings;
  /** Connect, headers and body each. */
  timeoutMs: number;
  /** As received and once decoded. */
  maxBodyBytes: number;
  maxAttempts: number;
  /** Retry-After included. */
  retryMaxDelayMs: number;
  /** Absent: requests are not paced. */
  rateLimit?: RateLimit;
}

/** The request settings, which the demo simulator's client takes too. */
export type UpstreamRequests = Pick<UpstreamConfig, 'timeoutMs' | 'maxBodyBytes' | 'maxAttempts' | 'retryMaxDelayMs' | 'rateLimit'>;

/** `cert` and `key` together, or neither. */
export interface TlsFileSettings {
  cert?: SettingFile;
  key?: SettingFile;
  ca?: SettingFile;
}

export interface DatabaseConfig {
  /** Without its `ssl*` parameters; undefined: the embedded database under `dataDir`. */
  url: string | undefined;
  /** libpq's way: the URL's parameters, else PGSSL*. */
  tls: DatabaseTlsSettings;
  schema: string;
  /** MIGRATE: `off` refuses a pending migration instead of applying it. */
  migrate: 'auto' | 'off';
  dataDir: string;
  /** DATABASE_LOCK_TIMEOUT (ms): a window's wait on a lock fails it after this long; undefined: no bound. */
  lockTimeoutMs: number | undefined;
}

export interface SyncConfig {
  startDate: { at: Date } | { agoMs: number };
  /** Windows align to its multiples since the epoch (UTC). */
  windowMs: number;
  settleMs: number;
  lookbackMs: number;
  pageSize: number;
  concurrency: number;
  /** SYNC_READ_AHEAD: bytes of E6 bodies read before a window's transaction opens. */
  readAheadBytes: number;
  windowAttempts: number;
  /** SYNC_WINDOW_MAX_REQUESTS; 0 = auto. */
  windowMaxRequests: number;
  /** Slices are cut on its multiples since the epoch. */
  minSplitMs: number;
  toDate: 'auto' | 'inclusive' | 'exclusive';
  shrink: 'keep' | 'replace';
  /** Cron; undefined for `off`. */
  schedule: string | undefined;
  /** Split on dots; undefined for `none`. */
  recordTimeField: string[] | undefined;
  fieldContract: FieldContractMode;
}

/** FIELD_CONTRACT, in dlt's `schema_contract` terms: `freeze` quarantines new fields (reason `contract`). */
export type FieldContractMode = 'evolve' | 'freeze';

/** The tables every source shares (PARTITION_INTERVAL, RETENTION, ROLLUP_*, FIELD_CATALOGUE). */
export interface TablesConfig {
  partitionInterval: PartitionInterval;
  /** Undefined for `off`. */
  retentionMs: number | undefined;
  rollup: RollupConfig;
}

/** A text column of a derived table, filled from a record field. */
export interface RollupDimension {
  /** A lower-case SQL identifier. */
  column: string;
  /** Split on dots. */
  path: string[];
}

export interface RollupConfig {
  /** ROLLUP_DIMENSIONS other than `off`. */
  enabled: boolean;
  dimensions: RollupDimension[];
  /** Empty for `none`. */
  distinct: RollupDimension[];
  distinctBy: RollupDimension[];
  catalogue: boolean;
  /** TYPED_VIEW_MAX_FIELDS: field columns of records_typed. */
  typedViewMaxFields: number;
  /** Undefined: kept forever. */
  retentionMs: number | undefined;
}

/** How `serve` exposes /metrics. */
export interface ServeConfig {
  host: string;
  port: number;
  /** E7 is read for [now − window, now]. */
  metricsWindowMs: number;
  cacheTtlMs: number;
  scrapeTimeoutMs: number;
  maxConnectionsPerClient: number;
  maxConnections: number;
  upstreamPrefix: string | undefined;
  /** Read by serve; undefined for plain HTTP without auth. */
  webConfigFile: string | undefined;
  /** /healthz and /readyz answer without credentials when basic auth is on. */
  healthWithoutAuth: boolean;
  /** Failed logins per client address per minute; 0 for no budget. */
  authFailureBudget: number;
  /** Cron (UTC); undefined for `off`. */
  auditSchedule: string | undefined;
}

/** One environment and API client, with its own token, ledger, schedule and E7 samples. */
export interface SourceConfig {
  /** `[a-z0-9_-]+`, unique among the sources. */
  name: string;
  /** Added to every E7 sample besides `source`. */
  labels: Readonly<Record<string, string>>;
  /** Undefined: the built-in simulator (demo mode). */
  upstream: UpstreamConfig | undefined;
  /** Demo mode: the request settings for the simulator's client. */
  demo?: UpstreamRequests;
  sync: SyncConfig;
  limits: UpstreamLimits;
}

/** Prometheus's scrape limits on one E7 text; 0 turns one off. */
export interface UpstreamLimits {
  sampleLimit: number;
  /** The metric name not counted. */
  labelLimit: number;
  /** Bytes, unescaped. */
  labelValueLengthLimit: number;
}

export const DEFAULT_SOURCE = 'default';

export interface Config {
  /** At least one; names unique. */
  sources: SourceConfig[];
  syncSourceConcurrency: number;
  database: DatabaseConfig;
  tables: TablesConfig;
  serve: ServeConfig;
  logLevel: LogLevel;
  logFormat: LogFormat;
}
