/**
 * The configuration's plain types: what {@link loadConfig} (src/config/load.ts) returns, and the
 * glossary of every setting's meaning once validated. Settings of the whole schema (database,
 * tables, serve, logs) are apart from those of one source (upstream, credentials, labels, sync).
 *
 * Files a setting names are paths here ({@link SettingFile}); the module that uses a file reads it
 * (the client's secret and TLS files: src/upstream/files.ts; the database's TLS files:
 * src/db/tls.ts; WEB_CONFIG_FILE: src/serve/web/webconfig.ts).
 */
import type { DatabaseTlsSettings } from './database.js';
import type { SettingFile } from './setting-file.js';

/** How the client authenticates at the token endpoint (RFC 6749 §2.3.1; reference Authentication 3–4). */
export type TokenAuthMethod = 'client_secret_post' | 'client_secret_basic';

/** Upper bound of UPSTREAM_RATE_LIMIT and UPSTREAM_RATE_BURST: far above any published API limit, low enough to catch a typo. */
export const MAX_RATE_LIMIT_PER_SECOND = 10_000;

/** Default port of `serve` (METRICS_LISTEN). */
export const DEFAULT_METRICS_PORT = 9877;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How log lines are written: `json` (one pino object per line), `pretty` (for people), `auto` (pretty on a TTY, JSON otherwise). */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** PARTITION_INTERVAL: the length of the partitions of `records` the sync creates, in UTC (src/sync/store/pg/partitions.ts). */
export const PARTITION_INTERVALS = ['month', 'week', 'day'] as const;
export type PartitionInterval = (typeof PARTITION_INTERVALS)[number];

/** UPSTREAM_RATE_LIMIT and UPSTREAM_RATE_BURST: the request budget of E6 and E7 (reference: Limits; src/upstream/budget.ts). */
export interface RateLimit {
  /** Requests per second, E6 and E7 together; > 0. */
  ratePerSecond: number;
  /** Requests that may be sent at once after a quiet spell; a whole number ≥ 1. */
  burst: number;
}

/** Where and how to reach the platform (reference: Authentication, E0, E6, E7). */
export interface UpstreamConfig {
  /** {statistics_url}: base of E6 `/analytics` and E7 `/analytics/prometheus`. */
  statisticsUrl: URL;
  /** {auth_url}/connect/token (E0). */
  tokenUrl: URL;
  clientId: string;
  /** CLIENT_SECRET's value; absent when the secret is in `clientSecretFile` (exactly one of the two is set). */
  clientSecret?: string;
  /** CLIENT_SECRET_FILE: read at start and again at every token request (E0), so a rotated secret applies without a restart. */
  clientSecretFile?: SettingFile;
  /**
   * The setting the secret came from, named in warnings about it (never its value): CLIENT_SECRET,
   * CLIENT_SECRET_FILE, or CONFIG_FILE's key path (`sources[0].client_secret_file`); CLIENT_SECRET when absent.
   */
  clientSecretVariable?: string;
  tokenAuthMethod: TokenAuthMethod;
  /** Space-separated OAuth2 scopes; the reference's is `api.external`. */
  scope: string;
  tls: TlsFileSettings;
  /** Connect, headers and body timeout of one upstream request, in milliseconds. */
  timeoutMs: number;
  /**
   * Largest response body, in bytes, as received and once decoded from its Content-Encoding
   * (UPSTREAM_MAX_BODY); a larger one fails its request with reason `response_too_large`.
   */
  maxBodyBytes: number;
  /** Attempts per request, first one included, for retryable failures. */
  maxAttempts: number;
  /** Upper bound on one backoff delay, including a server's Retry-After, in milliseconds. */
  retryMaxDelayMs: number;
  /** The request budget of E6 and E7 (UPSTREAM_RATE_LIMIT, UPSTREAM_RATE_BURST); absent = requests are not paced. */
  rateLimit?: RateLimit;
}

/** How the client sends its requests, whatever the platform: the part of {@link UpstreamConfig} the demo simulator takes too. */
export type UpstreamRequests = Pick<UpstreamConfig, 'timeoutMs' | 'maxBodyBytes' | 'maxAttempts' | 'retryMaxDelayMs' | 'rateLimit'>;

/** The client's TLS files (TLS_CLIENT_CERT_FILE and TLS_CLIENT_KEY_FILE together, TLS_CA_FILE), as paths. */
export interface TlsFileSettings {
  cert?: SettingFile;
  key?: SettingFile;
  ca?: SettingFile;
}

export interface DatabaseConfig {
  /**
   * libpq-style URL without its `ssl*` parameters (those are in `tls`); absent means the
   * embedded database under `dataDir`.
   */
  url: string | undefined;
  /** TLS of DATABASE_URL, libpq's way: its parameters, else PGSSLMODE and the other PGSSL* variables (src/config/database.ts). */
  tls: DatabaseTlsSettings;
  schema: string;
  dataDir: string;
}

/** How `sync` reads one source's E6 into the database (see src/sync/). */
export interface SyncConfig {
  /** Where a first run starts: a fixed instant, or a span before the run's start. */
  startDate: { at: Date } | { agoMs: number };
  /** Window length; windows are aligned to multiples of it since the Unix epoch (UTC). */
  windowMs: number;
  /** A run ends this long before now, for data that lands late. */
  settleMs: number;
  /** Each run re-reads this much before the watermark, for records that arrived late. */
  lookbackMs: number;
  /** E6 pageSize, 1 to 1000. */
  pageSize: number;
  /** E6 pages fetched at once, ahead of the one being written. */
  concurrency: number;
  /**
   * Pairs of reads of an instant (a part of `minSplitMs` holding more than a page) before its
   * window fails the run when the two reads keep disagreeing.
   */
  windowAttempts: number;
  /**
   * Finest split of a window, in milliseconds: parts are cut on multiples of it since the epoch
   * (the API's time resolution is not published).
   */
  minSplitMs: number;
  /** UPSTREAM_TO_DATE: how records E6 returns with two parts next to a cut are found (src/sync/membership/boundary.ts; the reference is silent on toDate). */
  toDate: 'auto' | 'inclusive' | 'exclusive';
  /**
   * A committed window re-read with fewer records than are stored (E6's retention, a deletion):
   * `keep` leaves the stored rows as they were, `replace` stores what E6 returns now.
   */
  shrink: 'keep' | 'replace';
  /** Cron expression of the schedule inside `serve`; undefined when `off`. */
  schedule: string | undefined;
  /** Path of the record's event-time field (split on dots); undefined when `none`. */
  recordTimeField: string[] | undefined;
  /** FIELD_CONTRACT: what a record bringing a new top-level field or type does (src/sync/run/field-contract.ts). */
  fieldContract: FieldContractMode;
}

/**
 * FIELD_CONTRACT, in dlt's `schema_contract` terms: `evolve` stores records that bring a new
 * top-level field or type and reports the change; `freeze` quarantines them (reason `contract`).
 */
export type FieldContractMode = 'evolve' | 'freeze';

/** The layout of the tables every source shares: `records`' partitions, their retention, the derived tables. */
export interface TablesConfig {
  /** Length of the partitions of `records` the sync creates (UTC). */
  partitionInterval: PartitionInterval;
  /** Each run drops partitions whose range ends at or before now minus this; undefined when `off`. */
  retentionMs: number | undefined;
  /** The tables derived from `records` (ROLLUP_*, FIELD_CATALOGUE; src/sync/derived/index.ts). */
  rollup: RollupConfig;
}

/** One dimension of `records_hourly`: a text column filled from a record field. */
export interface RollupDimension {
  /** Column name in `records_hourly`: a lower-case SQL identifier. */
  column: string;
  /** Path of the record field (split on dots). */
  path: string[];
}

/** The hourly rollup's grouping and how long its buckets are kept. */
export interface RollupConfig {
  /** Whether records_hourly and records_hourly_distinct are kept at all (ROLLUP_DIMENSIONS other than `off`). */
  enabled: boolean;
  dimensions: RollupDimension[];
  /**
   * Fields whose distinct values records_hourly_distinct keeps per hour (ROLLUP_DISTINCT), each
   * under its column name (the table's `value_column`); empty for `none`.
   */
  distinct: RollupDimension[];
  /** What records_hourly_distinct is grouped by besides the hour (ROLLUP_DISTINCT_BY): text columns like `dimensions`. */
  distinctBy: RollupDimension[];
  /** Whether record_fields and records_typed are kept (FIELD_CATALOGUE). */
  catalogue: boolean;
  /** Buckets older than this are deleted at the end of each run; undefined = kept forever. */
  retentionMs: number | undefined;
}

/** How `serve` exposes /metrics (reference E7 for the upstream part). */
export interface ServeConfig {
  host: string;
  port: number;
  /** E7 is read for [now − window, now]: upstream values are counts over this window. */
  metricsWindowMs: number;
  /** An upstream read is reused for this long by later scrapes. */
  cacheTtlMs: number;
  /** Scrape timeout assumed when Prometheus sends no X-Prometheus-Scrape-Timeout-Seconds. */
  scrapeTimeoutMs: number;
  /** Connections one client address may hold open (METRICS_MAX_CONNECTIONS_PER_CLIENT), and all together (METRICS_MAX_CONNECTIONS). */
  maxConnectionsPerClient: number;
  maxConnections: number;
  /** Prefix added to upstream metric names; undefined for none. */
  upstreamPrefix: string | undefined;
  /** TLS and basic auth of the HTTP server (WEB_CONFIG_FILE): the file's path, read by serve (src/serve/web/webconfig.ts); undefined for plain HTTP without auth. */
  webConfigFile: string | undefined;
  /** Failed basic-auth logins one client address may spend per minute (AUTH_FAILURE_BUDGET); 0 for no budget. */
  authFailureBudget: number;
  /** Cron expression (UTC) of the audit of every source inside `serve` (AUDIT_SCHEDULE); undefined when `off`. */
  auditSchedule: string | undefined;
}

/**
 * One upstream environment and API client, read and loaded on its own: its own token, watermark,
 * ledger, schedule and E7 samples, labelled `source="<name>"` in the database and in /metrics.
 * Without CONFIG_FILE the environment describes one source named {@link DEFAULT_SOURCE}.
 */
export interface SourceConfig {
  /** `[a-z0-9_-]+`, unique among the sources: the `source` column and label value. */
  name: string;
  /** Labels added to every upstream (E7) sample of this source, besides `source`. */
  labels: Readonly<Record<string, string>>;
  /** Absent for the environment's source when STATISTICS_URL is unset: the built-in simulator (demo mode). */
  upstream: UpstreamConfig | undefined;
  /**
   * Without `upstream` (demo mode): how the client calls the built-in simulator, from the same
   * settings (UPSTREAM_TIMEOUT, UPSTREAM_MAX_BODY, UPSTREAM_MAX_ATTEMPTS, UPSTREAM_RETRY_MAX_DELAY,
   * UPSTREAM_RATE_LIMIT, UPSTREAM_RATE_BURST), so that they apply to the demo too.
   */
  demo?: UpstreamRequests;
  /** How this source is synced; the tables it is synced into are {@link Config.tables}, the same for every source. */
  sync: SyncConfig;
  /** What serve reads of this source's E7 text at most. */
  limits: UpstreamLimits;
}

/**
 * The limits one E7 text (`GET /analytics/prometheus`) is read under, as Prometheus's scrape
 * configuration names them; 0 turns a limit off. Over one, serve's read of the source fails
 * (`upstream_up 0`, reason `limit`).
 */
export interface UpstreamLimits {
  /** sample_limit (UPSTREAM_SAMPLE_LIMIT): sample lines of one text. */
  sampleLimit: number;
  /** label_limit (UPSTREAM_LABEL_LIMIT): label pairs of one sample, the metric name not counted. */
  labelLimit: number;
  /** label_value_length_limit (UPSTREAM_LABEL_VALUE_LENGTH_LIMIT): bytes of one label value, unescaped. */
  labelValueLengthLimit: number;
}

/** The name of the one source the environment describes (no CONFIG_FILE). */
export const DEFAULT_SOURCE = 'default';

export interface Config {
  /** At least one; names unique. */
  sources: SourceConfig[];
  /** Sources `sync` runs at once (SYNC_SOURCE_CONCURRENCY). */
  syncSourceConcurrency: number;
  database: DatabaseConfig;
  /** The shared tables' layout (PARTITION_INTERVAL, RETENTION, ROLLUP_*, FIELD_CATALOGUE). */
  tables: TablesConfig;
  serve: ServeConfig;
  logLevel: LogLevel;
  logFormat: LogFormat;
}
