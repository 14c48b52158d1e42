/**
 * The configuration's plain types, what {@link loadConfig} returns: settings of the whole schema
 * (database, tables, serve, logs) apart from those of one source (upstream, labels, sync). A file
 * a setting names is a path here ({@link SettingFile}), read by the module that uses it. Durations
 * are milliseconds. What each setting means: its help in the settings table (settings.ts).
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
  /** E6 and E7 together; > 0. */
  ratePerSecond: number;
  /** A whole number ≥ 1. */
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
  /** The setting the secret came from, for warnings: a variable or CONFIG_FILE key path. */
  clientSecretVariable?: string;
  tokenAuthMethod: TokenAuthMethod;
  scope: string;
  tls: TlsFileSettings;
  /** Connect, headers and body each. */
  timeoutMs: number;
  /** As received and once decoded. */
  maxBodyBytes: number;
  maxAttempts: number;
  /** Cap on one backoff delay, Retry-After included. */
  retryMaxDelayMs: number;
  /** Absent: requests are not paced. */
  rateLimit?: RateLimit;
}

/** The request settings, which the demo simulator's client takes too. */
export type UpstreamRequests = Pick<UpstreamConfig, 'timeoutMs' | 'maxBodyBytes' | 'maxAttempts' | 'retryMaxDelayMs' | 'rateLimit'>;

/** `cert` and `key` together or neither. */
export interface TlsFileSettings {
  cert?: SettingFile;
  key?: SettingFile;
  ca?: SettingFile;
}

export interface DatabaseConfig {
  /** Without its `ssl*` parameters; undefined: the embedded database under `dataDir`. */
  url: string | undefined;
  /** TLS of DATABASE_URL, libpq's way: its parameters, else PGSSLMODE and the other PGSSL* variables (src/config/database-url.ts). */
  tls: DatabaseTlsSettings;
  schema: string;
  dataDir: string;
}

export interface SyncConfig {
  startDate: { at: Date } | { agoMs: number };
  /** Windows align to its multiples since the epoch (UTC). */
  windowMs: number;
  settleMs: number;
  lookbackMs: number;
  pageSize: number;
  concurrency: number;
  windowAttempts: number;
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
  /** Undefined: kept forever. */
  retentionMs: number | undefined;
}

/** How `serve` exposes /metrics (METRICS_*; reference E7 for the upstream part). */
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
  /** A path, read by serve; undefined for plain HTTP without auth. */
  webConfigFile: string | undefined;
  /** Failed logins per client address per minute; 0 for no budget. */
  authFailureBudget: number;
  /** Cron (UTC); undefined for `off`. */
  auditSchedule: string | undefined;
}

/**
 * One upstream environment and API client, with its own token, watermark, ledger, schedule and E7
 * samples, labelled `source="<name>"`. Without CONFIG_FILE: one source, {@link DEFAULT_SOURCE}.
 */
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

/** Prometheus's scrape limits on one E7 text; 0 turns one off. Over one, the source's read fails. */
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
