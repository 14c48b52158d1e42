/**
 * Configuration: one zod schema over environment variables, with CLI flags
 * overriding them, validated once at start. Defaults live here and nowhere else.
 *
 * A broken rule throws {@link ConfigError} naming the variable, the rule and the
 * value given (secrets masked); the CLI turns it into exit status 2.
 */
import { readFileSync } from 'node:fs';
import cron from 'node-cron';
import { z } from 'zod';
import { FILE_ONLY_VARIABLES, fileKeyOf, fileLocation, parseSourcesFile, type FileSource } from './configfile.js';
import { ConfigError, maskSecret } from './errors.js';
import { parseDuration, parseDurationOrZero, parseIsoDateTime } from './time.js';
import type { RateLimit } from './upstream/budget.js';
import { DEFAULT_SSL_MODE, PLAIN_TLS, resolveDatabaseTarget, SSL_MODES, type DatabaseTls, type SslMode } from './db/tls.js';

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

/** PARTITION_INTERVAL: the length of the partitions of `records` the sync creates, in UTC (src/sync/partitions.ts). */
export const PARTITION_INTERVALS = ['month', 'week', 'day'] as const;
export type PartitionInterval = (typeof PARTITION_INTERVALS)[number];

/** Where and how to reach the platform (reference: Authentication, E0, E6, E7). */
export interface UpstreamConfig {
  /** {statistics_url}: base of E6 `/analytics` and E7 `/analytics/prometheus`. */
  statisticsUrl: URL;
  /** {auth_url}/connect/token (E0). */
  tokenUrl: URL;
  clientId: string;
  /** The secret as read at start (CLIENT_SECRET, or CLIENT_SECRET_FILE's content then). */
  clientSecret: string;
  /** CLIENT_SECRET_FILE, read again at every token request (E0) so a rotated secret applies without a restart. */
  clientSecretFile?: string;
  /**
   * The setting the secret came from, named in warnings about it (never its value): CLIENT_SECRET,
   * CLIENT_SECRET_FILE, or CONFIG_FILE's key path (`sources[0].client_secret_file`); CLIENT_SECRET when absent.
   */
  clientSecretVariable?: string;
  tokenAuthMethod: TokenAuthMethod;
  /** Space-separated OAuth2 scopes; the reference's is `api.external`. */
  scope: string;
  tls: TlsFiles;
  /** Connect, headers and body timeout of one upstream request, in milliseconds. */
  timeoutMs: number;
  /** Attempts per request, first one included, for retryable failures. */
  maxAttempts: number;
  /** Upper bound on one backoff delay, including a server's Retry-After, in milliseconds. */
  retryMaxDelayMs: number;
  /** The request budget of E6 and E7 (UPSTREAM_RATE_LIMIT, UPSTREAM_RATE_BURST); absent = requests are not paced. */
  rateLimit?: RateLimit;
}

/** PEM contents (not paths) of the TLS files, read once at start. */
export interface TlsFiles {
  cert?: string;
  key?: string;
  ca?: string;
}

export interface DatabaseConfig {
  /**
   * libpq-style URL without its `ssl*` parameters (those are in `tls`); absent means the
   * embedded database under `dataDir`.
   */
  url: string | undefined;
  /** TLS of DATABASE_URL, libpq's way (src/db/tls.ts): its parameters, else PGSSLMODE and the other PGSSL* variables. */
  tls: DatabaseTls;
  schema: string;
  dataDir: string;
}

/** How `sync` reads E6 into the database (see src/sync/). */
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
  /** Whether E6 returns records exactly at `toDate` (UPSTREAM_TO_DATE; the reference is silent). */
  toDate: 'inclusive' | 'exclusive';
  /**
   * A committed window re-read with fewer records than are stored (E6's retention, a deletion):
   * `keep` leaves the stored rows as they were, `replace` stores what E6 returns now.
   */
  shrink: 'keep' | 'replace';
  /** Cron expression of the schedule inside `serve`; undefined when `off`. */
  schedule: string | undefined;
  /** Path of the record's event-time field (split on dots); undefined when `none`. */
  recordTimeField: string[] | undefined;
  /** Length of the partitions of `records` the sync creates (UTC). */
  partitionInterval: PartitionInterval;
  /** Each run drops partitions whose range ends at or before now minus this; undefined when `off`. */
  retentionMs: number | undefined;
  /** The hourly rollup (ROLLUP_DIMENSIONS, ROLLUP_RETENTION; src/sync/rollup.ts). */
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

/** Column names `records_hourly` uses itself, so no dimension may take them. */
const ROLLUP_RESERVED_COLUMNS = new Set(['bucket', 'window_start', 'records']);
/** Column names `records_hourly_distinct` and `records_daily_distinct` use besides those, so no ROLLUP_DISTINCT_BY column may take them. */
const DISTINCT_RESERVED_COLUMNS = new Set(['value_column', 'distinct_values', 'day']);

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
  /** Prefix added to upstream metric names; undefined for none. */
  upstreamPrefix: string | undefined;
  /** TLS and basic auth of the HTTP server (WEB_CONFIG_FILE): the file's path, read by serve (src/serve/webconfig.ts); undefined for plain HTTP without auth. */
  webConfigFile: string | undefined;
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
   * How this source is synced. The table layout settings (partitionInterval, retentionMs, rollup)
   * are the same for every source: they describe the shared tables.
   */
  sync: SyncConfig;
}

/** The name of the one source the environment describes (no CONFIG_FILE). */
export const DEFAULT_SOURCE = 'default';

export interface Config {
  /** At least one; names unique. */
  sources: SourceConfig[];
  /** Sources `sync` runs at once (SYNC_SOURCE_CONCURRENCY). */
  syncSourceConcurrency: number;
  database: DatabaseConfig;
  serve: ServeConfig;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

const duration = (rule: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === undefined || ms <= 0) {
      ctx.addIssue({ code: 'custom', message: `must be a positive duration such as ${rule}` });
      return z.NEVER;
    }
    return ms;
  });

/** A positive duration, or `off` (read as undefined): retention settings that may keep everything. */
const durationOrOff = (example: string) =>
  z.string().transform((text, ctx): number | undefined => {
    if (text === 'off') return undefined;
    const ms = parseDuration(text);
    if (ms !== undefined && ms > 0) return ms;
    ctx.addIssue({ code: 'custom', message: `must be a positive duration such as ${example}, or 'off'` });
    return z.NEVER;
  });

/** A duration that may be zero (`0`, `0s`): settle and lookback can be switched off. */
const durationOrZero = (rule: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDurationOrZero(text);
    if (ms === undefined) {
      ctx.addIssue({ code: 'custom', message: `must be a duration such as ${rule}, or 0` });
      return z.NEVER;
    }
    return ms;
  });

const wholeNumber = (min: number, max: number) => {
  const rule = `must be a whole number from ${min} to ${max}`;
  return z.coerce.number({ error: rule }).int(rule).min(min, rule).max(max, rule);
};

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

const optional = <T extends z.ZodType>(schema: T) => schema.optional();

/**
 * One entry per setting: its environment variable (the key), CLI flag, zod schema (reading the
 * variable's text), default (the text a user would write, read by the same schema), help and
 * secrecy. The zod object of {@link loadConfig}, the CLI's options and `--help`
 * (src/cli.ts, src/commands/options.ts) and the README's configuration table (checked by
 * test/unit/config.test.ts) all come from here.
 */
interface SettingSpec {
  /** CLI flag overriding the variable; secrets have none (a flag shows in `ps`). */
  flag?: string;
  secret?: boolean;
  /** The default as a user would write it; absent = unset by default. */
  default?: string;
  help: string;
  schema: z.ZodType;
}

const SETTING_TABLE = {
  CONFIG_FILE: {
    flag: '--config-file',
    help: 'YAML file listing the sources (environments and API clients), each with its upstream, labels and sync overrides; unset = the environment describes one source, default',
    schema: optional(z.string()),
  },
  STATISTICS_URL: {
    flag: '--statistics-url',
    help: 'base URL of the analytics API ({statistics_url}); unset = built-in demo simulator',
    schema: optional(httpUrl),
  },
  AUTH_URL: { flag: '--auth-url', help: 'base URL of the identity host ({auth_url}); tokens come from AUTH_URL/connect/token', schema: optional(httpUrl) },
  CLIENT_ID: { flag: '--client-id', help: 'OAuth2 client id of the API client', schema: optional(z.string()) },
  CLIENT_SECRET: { secret: true, help: 'OAuth2 client secret (or CLIENT_SECRET_FILE)', schema: optional(z.string()) },
  CLIENT_SECRET_FILE: { flag: '--client-secret-file', help: 'file holding the client secret, read at every token request', schema: optional(z.string()) },
  TOKEN_AUTH_METHOD: {
    flag: '--token-auth-method',
    default: 'client_secret_post',
    help: 'client_secret_post or client_secret_basic',
    schema: z.enum(['client_secret_post', 'client_secret_basic'], { error: 'must be client_secret_post or client_secret_basic' }),
  },
  TOKEN_SCOPE: {
    flag: '--token-scope',
    default: 'api.external',
    help: 'scope requested with the token',
    schema: z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'must be space-separated scope tokens (RFC 6749 §3.3)'),
  },
  TLS_CLIENT_CERT_FILE: { flag: '--tls-client-cert-file', help: 'PEM client certificate for mutual TLS', schema: optional(z.string()) },
  TLS_CLIENT_KEY_FILE: { flag: '--tls-client-key-file', help: 'PEM private key of the client certificate', schema: optional(z.string()) },
  TLS_CA_FILE: { flag: '--tls-ca-file', help: 'PEM CA bundle to trust for the platform (private CAs)', schema: optional(z.string()) },
  UPSTREAM_TIMEOUT: { flag: '--upstream-timeout', default: '30s', help: 'connect/headers/body timeout per upstream request', schema: duration('30s') },
  UPSTREAM_MAX_ATTEMPTS: { flag: '--upstream-max-attempts', default: '5', help: 'attempts per upstream request, retries included', schema: wholeNumber(1, 20) },
  UPSTREAM_RETRY_MAX_DELAY: {
    flag: '--upstream-retry-max-delay',
    default: '30s',
    help: 'cap on one retry delay, Retry-After included',
    schema: duration('30s'),
  },
  UPSTREAM_TO_DATE: {
    flag: '--upstream-to-date',
    default: 'inclusive',
    help: "whether E6 returns records exactly at toDate: 'inclusive' (safe either way with RECORD_TIME_FIELD) or 'exclusive'",
    schema: z.enum(['inclusive', 'exclusive'], { error: "must be 'inclusive' or 'exclusive'" }),
  },
  UPSTREAM_RATE_LIMIT: {
    flag: '--upstream-rate-limit',
    default: 'off',
    help: "E6 and E7 requests per second, together, paced before they are sent (lowered after a 429, recovering gradually), or 'off'",
    schema: z.string().transform((text, ctx): number | undefined => {
      if (text === 'off') return undefined;
      const rate = /^(\d+(\.\d*)?|\.\d+)$/.test(text) ? Number(text) : NaN;
      if (!(rate > 0 && rate <= MAX_RATE_LIMIT_PER_SECOND)) {
        ctx.addIssue({
          code: 'custom',
          message: `must be requests per second, more than 0 and at most ${MAX_RATE_LIMIT_PER_SECOND} (such as 10 or 0.5), or 'off'`,
        });
        return z.NEVER;
      }
      return rate;
    }),
  },
  UPSTREAM_RATE_BURST: {
    flag: '--upstream-rate-burst',
    help: 'requests UPSTREAM_RATE_LIMIT lets through at once after a quiet spell; unset = the rate, rounded up',
    schema: optional(wholeNumber(1, MAX_RATE_LIMIT_PER_SECOND)),
  },
  DATABASE_URL: {
    flag: '--database-url',
    help: 'PostgreSQL URL (sslmode, sslrootcert, sslcert, sslkey as libpq); unset = embedded database under DATA_DIR',
    schema: optional(
      z.string().superRefine((v, ctx) => {
        if (/^postgres(ql)?:\/\//.test(v) && URL.canParse(v) && new URL(v).port !== '0') return;
        // URL() rejects a port past 65535 or not a number with the rest: say which part is wrong.
        const port = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?(?:\[[^\]]*\]|[^:/?#]*):([^/?#]*)/.exec(v)?.[1];
        const badPort = port !== undefined && port !== '' && !(/^\d+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535);
        ctx.addIssue({ code: 'custom', message: badPort ? 'must have a port from 1 to 65535 in its host part' : 'must be a postgres:// or postgresql:// URL' });
      }),
    ),
  },
  PGSSLMODE: {
    flag: '--pgsslmode',
    help: `libpq's sslmode for DATABASE_URL when the URL has none: ${SSL_MODES.join(', ')}; unset = ${DEFAULT_SSL_MODE}`,
    schema: optional(z.enum(SSL_MODES, { error: `must be one of ${SSL_MODES.join(', ')}` })),
  },
  PGSSLROOTCERT: {
    flag: '--pgsslrootcert',
    help: "PEM CA bundle verify-ca and verify-full trust (or 'system') when DATABASE_URL has no sslrootcert",
    schema: optional(z.string()),
  },
  PGSSLCERT: { flag: '--pgsslcert', help: 'PEM client certificate when DATABASE_URL has no sslcert', schema: optional(z.string()) },
  PGSSLKEY: { flag: '--pgsslkey', help: 'PEM private key of that certificate when DATABASE_URL has no sslkey', schema: optional(z.string()) },
  DATABASE_SCHEMA: {
    flag: '--database-schema',
    default: 'analytics',
    help: 'schema holding the tables',
    schema: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier: a-z, 0-9 and _, not starting with a digit, at most 63 characters'),
  },
  DATA_DIR: { flag: '--data-dir', default: './data', help: 'folder of the embedded database', schema: z.string() },
  SYNC_START_DATE: {
    flag: '--sync-start-date',
    default: '30d',
    help: 'where a first sync starts: ISO 8601 date-time, or a duration before now',
    schema: z.string().transform((text, ctx): { at: Date } | { agoMs: number } => {
      const ago = parseDuration(text);
      if (ago !== undefined) return { agoMs: ago };
      // A zone is required: a bare date or local time would depend on the host's zone.
      const at = parseIsoDateTime(text);
      if (at !== undefined) return { at: new Date(at) };
      ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time with a zone (2026-01-01T00:00:00Z) or a duration before now (30d)' });
      return z.NEVER;
    }),
  },
  SYNC_WINDOW: {
    flag: '--sync-window',
    default: '1h',
    help: 'window length; windows align to multiples of it in UTC',
    schema: duration('1h')
      .refine((ms) => ms >= 60_000 && ms <= 31 * 86_400_000, 'must be from 1m to 31d')
      .refine((ms) => ms % 1000 === 0, 'must be whole seconds'),
  },
  SYNC_SETTLE: { flag: '--sync-settle', default: '5m', help: 'a run ends this long before now, for late data', schema: durationOrZero('5m') },
  SYNC_LOOKBACK: { flag: '--sync-lookback', default: '1h', help: 'each run re-reads this much before the watermark', schema: durationOrZero('1h') },
  SYNC_PAGE_SIZE: { flag: '--sync-page-size', default: '1000', help: 'E6 pageSize, 1 to 1000', schema: wholeNumber(1, 1000) },
  SYNC_CONCURRENCY: { flag: '--sync-concurrency', default: '4', help: 'E6 pages fetched at once, 1 to 32', schema: wholeNumber(1, 32) },
  SYNC_WINDOW_ATTEMPTS: {
    flag: '--sync-window-attempts',
    default: '3',
    help: 'pairs of reads of an instant holding more than a page, while they disagree, before the run fails',
    schema: wholeNumber(1, 10),
  },
  SYNC_MIN_SPLIT: {
    flag: '--sync-min-split',
    default: '1s',
    help: 'finest time split of a window into parts of one page each; cuts lie on its multiples',
    schema: duration('1s'),
  },
  SYNC_SHRINK: {
    flag: '--sync-shrink',
    default: 'keep',
    help: "a re-read window now holding fewer records than stored: 'keep' the stored rows or 'replace' them",
    schema: z.enum(['keep', 'replace'], { error: "must be 'keep' or 'replace'" }),
  },
  SYNC_SCHEDULE: {
    flag: '--sync-schedule',
    default: '*/15 * * * *',
    help: "cron expression of the sync inside serve, or 'off'",
    schema: z
      .string()
      .refine((text) => text === 'off' || cron.validate(text), "must be a cron expression (minute hour day month weekday, optional seconds first) or 'off'"),
  },
  SYNC_SOURCE_CONCURRENCY: {
    flag: '--sync-source-concurrency',
    default: '4',
    help: 'sources `sync` runs at once, 1 to 64 (each its own run, lock and upstream client)',
    schema: wholeNumber(1, 64),
  },
  RECORD_TIME_FIELD: {
    flag: '--record-time-field',
    default: 'timestamp',
    help: "record field holding its event time, dotted for nesting, or 'none'",
    schema: z.string().regex(/^(none|[^.\s]+(\.[^.\s]+)*)$/, "must be a field name, dotted for nested fields, or 'none'"),
  },
  PARTITION_INTERVAL: {
    flag: '--partition-interval',
    default: 'month',
    help: "length of the partitions of records the sync creates, in UTC: 'month', 'week' or 'day'",
    schema: z.enum(PARTITION_INTERVALS, { error: "must be 'month', 'week' or 'day'" }),
  },
  RETENTION: {
    flag: '--retention',
    default: 'off',
    help: "each run drops partitions of records wholly older than now minus this, or 'off'",
    schema: durationOrOff('90d'),
  },
  ROLLUP_DIMENSIONS: {
    flag: '--rollup-dimensions',
    default: 'event_type=eventType,customer_id=customerId',
    help: "column=field pairs, comma-separated, grouping records_hourly (fields dotted for nesting), 'none', or 'off' for no rollup tables",
    schema: z.string().transform((text, ctx) => {
      if (text.trim() === 'off') return undefined;
      const dimensions = parseRollupDimensions(text);
      if (typeof dimensions === 'string') {
        ctx.addIssue({ code: 'custom', message: dimensions });
        return z.NEVER;
      }
      return dimensions;
    }),
  },
  ROLLUP_RETENTION: {
    flag: '--rollup-retention',
    default: 'off',
    help: "records_hourly buckets older than this are deleted after each run, or 'off' to keep them",
    schema: durationOrOff('400d'),
  },
  ROLLUP_DISTINCT: {
    flag: '--rollup-distinct',
    default: 'user_id=userId',
    help: "column=field pairs, comma-separated, whose distinct values records_hourly_distinct keeps per hour, or 'none'",
    schema: z.string().transform((text, ctx) => {
      const distinct = parseRollupDimensions(text);
      if (typeof distinct === 'string') {
        ctx.addIssue({ code: 'custom', message: distinct.replace('records_hourly', 'records_hourly_distinct') });
        return z.NEVER;
      }
      return distinct;
    }),
  },
  ROLLUP_DISTINCT_BY: {
    flag: '--rollup-distinct-by',
    default: 'customer_id=customerId',
    help: "column=field pairs, comma-separated, grouping records_hourly_distinct besides the hour (fields dotted for nesting), or 'none'",
    schema: z.string().transform((text, ctx) => {
      const by = parseRollupDimensions(text);
      if (typeof by === 'string' || by.some((d) => DISTINCT_RESERVED_COLUMNS.has(d.column))) {
        ctx.addIssue({
          code: 'custom',
          message:
            typeof by === 'string'
              ? by.replace('records_hourly', 'records_hourly_distinct')
              : 'must not use the column names value_column, distinct_values or day',
        });
        return z.NEVER;
      }
      return by;
    }),
  },
  FIELD_CATALOGUE: {
    flag: '--field-catalogue',
    default: 'on',
    help: "'off' stops maintaining the field catalogue record_fields and the view records_typed",
    schema: z.enum(['on', 'off'], { error: "must be 'on' or 'off'" }),
  },
  METRICS_LISTEN: {
    flag: '--metrics-listen',
    default: `0.0.0.0:${DEFAULT_METRICS_PORT}`,
    help: "host:port of serve's HTTP server",
    schema: z.string().transform((text, ctx) => {
      const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s]*):(\d{1,5})$/.exec(text);
      const port = Number(match?.[2]);
      if (!match || port > 65535) {
        ctx.addIssue({ code: 'custom', message: 'must be host:port (for example 0.0.0.0:9877, :9877 or [::]:9877), port 0 to 65535' });
        return z.NEVER;
      }
      return { host: match[1]!.replace(/^\[|\]$/g, '') || '0.0.0.0', port };
    }),
  },
  METRICS_WINDOW: { flag: '--metrics-window', default: '24h', help: 'upstream E7 values are counts over now minus this', schema: duration('24h') },
  METRICS_CACHE_TTL: {
    flag: '--metrics-cache-ttl',
    default: '30s',
    help: 'an upstream read is reused by scrapes for this long',
    schema: durationOrZero('30s'),
  },
  METRICS_SCRAPE_TIMEOUT: { flag: '--metrics-scrape-timeout', default: '10s', help: 'scrape timeout when Prometheus sends none', schema: duration('10s') },
  WEB_CONFIG_FILE: {
    flag: '--web-config-file',
    help: "TLS and basic auth of serve, in exporter-toolkit's web configuration format; read again when it changes",
    schema: optional(z.string()),
  },
  UPSTREAM_METRIC_PREFIX: {
    flag: '--upstream-metric-prefix',
    help: 'prefix added to upstream metric names',
    schema: optional(z.string().regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a metric name prefix: letters, digits, _ and :, not starting with a digit')),
  },
  LOG_LEVEL: {
    flag: '--log-level',
    default: 'info',
    help: 'fatal, error, warn, info, debug, trace or silent',
    schema: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }),
  },
  LOG_FORMAT: {
    flag: '--log-format',
    default: 'auto',
    help: 'json, pretty, or auto: pretty when stderr is a terminal, JSON otherwise',
    schema: z.enum(LOG_FORMATS, { error: `must be one of ${LOG_FORMATS.join(', ')}` }),
  },
} satisfies Record<string, SettingSpec>;

/** Documentation of a setting, as `--help` and the README table show it. */
export interface SettingDoc {
  env: string;
  /** CLI flag overriding the variable; secrets have none (a flag shows in `ps`). */
  flag?: string;
  secret?: boolean;
  /** The default as a user would write it; absent = unset by default. */
  default?: string;
  help: string;
}

/** Every setting, in the order `--help` and the README list them. */
export const SETTINGS: readonly SettingDoc[] = Object.entries(SETTING_TABLE).map(([env, spec]: [string, SettingSpec]) => ({
  env,
  ...(spec.flag !== undefined ? { flag: spec.flag } : {}),
  ...(spec.secret ? { secret: true } : {}),
  ...(spec.default !== undefined ? { default: spec.default } : {}),
  help: spec.help,
}));

const SECRET_VARIABLES = new Set(SETTINGS.filter((s) => s.secret).map((s) => s.env));

type SchemaShape<T> = { [K in keyof T]: T[K] extends { schema: infer S extends z.ZodType } ? S : never };

/** The raw schema: one key per environment variable, values as strings (defaults filled in first, as text). */
const envSchema = z.object(
  Object.fromEntries(Object.entries(SETTING_TABLE).map(([env, spec]: [string, SettingSpec]) => [env, spec.schema])) as SchemaShape<typeof SETTING_TABLE>,
);

type RawEnv = Record<string, string | undefined>;

/** Shows a given value in an error message, masking secrets and URL passwords. */
function displayValue(variable: string, value: string | undefined): string {
  if (value === undefined) return '(unset)';
  if (SECRET_VARIABLES.has(variable)) return maskSecret(value);
  if (variable === 'DATABASE_URL' && !URL.canParse(value)) {
    // libpq URLs can be multi-host or hold characters URL() rejects: mask everything before the last '@'.
    return JSON.stringify(value.replace(/^([a-z]+:\/\/)[^/]*@/i, '$1***@'));
  }
  if (URL.canParse(value)) {
    const url = new URL(value);
    if (url.password) {
      url.password = '***';
      return JSON.stringify(url.toString());
    }
  }
  return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value);
}

function fail(variable: string, rule: string, raw: RawEnv, cause?: unknown): never {
  throw new ConfigError(variable, `${variable} ${rule}; got ${displayValue(variable, raw[variable])}`, { cause });
}

/**
 * How the rules of one source name its settings and report a broken one: by environment variable
 * for the environment's source, by CONFIG_FILE, line and key path for a source of the file.
 */
interface SourceSettings {
  /** The settings' text (the environment's, with the file's values over them), as the schemas read it. */
  raw: RawEnv;
  /** What a message calls the setting: `SYNC_WINDOW` or `sources[0].sync.window`. */
  key: (variable: string) => string;
  /** Throws the ConfigError for a broken rule of `variable`, showing its value (secrets masked). */
  fail: (variable: string, rule: string) => never;
}

function environmentSettings(raw: RawEnv): SourceSettings {
  return { raw, key: (variable) => variable, fail: (variable, rule) => fail(variable, rule, raw) };
}

function fileSettings(file: string, source: FileSource, environment: RawEnv): SourceSettings {
  const raw: RawEnv = { ...environment };
  for (const [variable, value] of source.values) raw[variable] = value.text;
  // A key the file leaves out is named as the environment variable whose value applies, unless
  // the environment cannot hold it (the upstream's identity): then as the file key to add.
  const key = (variable: string) => {
    const fileKey = (FILE_ONLY_VARIABLES as readonly string[]).includes(variable) ? fileKeyOf(variable) : undefined;
    return source.values.get(variable)?.keyPath ?? (fileKey !== undefined ? `${source.keyPath}.${fileKey}` : variable);
  };
  return {
    raw,
    key,
    fail: (variable, rule) => {
      const value = source.values.get(variable);
      const shown = displayValue(variable, value ? value.shown : environment[variable]);
      throw new ConfigError('CONFIG_FILE', `${fileLocation(file, value?.line ?? source.line)}${key(variable)} ${rule}; got ${shown}`);
    },
  };
}

function readConfigFile(variable: string, settings: SourceSettings): string {
  const path = settings.raw[variable]!;
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    return settings.fail(variable, `must name a readable file (${reason})`);
  }
}

type ParsedSettings = z.output<typeof envSchema>;

/** Reads settings text with the settings' schemas; every broken rule is listed, the first one's variable named. */
function parseSettings(text: RawEnv, describe: (variable: string, rule: string) => { variable: string; text: string }): ParsedSettings {
  const parsed = envSchema.safeParse(text);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => describe(String(issue.path[0]), issue.message));
  throw new ConfigError(lines[0]!.variable, lines.map((l) => l.text).join('\n'));
}

/**
 * Builds the configuration from environment variables and CLI overrides, and from CONFIG_FILE's
 * sources when it is set (src/configfile.ts): each source's values are read by the same schemas
 * and rules as the variables they stand for, and a setting a source leaves out takes the
 * environment's value (SYNC_WINDOW=1d in the environment is every source's default window).
 *
 * @param env usually `process.env`; empty strings count as unset (compose files often set `VAR=`).
 *   Also where CONFIG_FILE's `${NAME}` are looked up.
 * @param overrides values from CLI flags, keyed by environment variable name; they win over `env`.
 * @returns the validated {@link Config}: one source named {@link DEFAULT_SOURCE} without CONFIG_FILE,
 *   the file's sources in its order with it; files named by `*_FILE` settings are read here.
 * @throws {ConfigError} for the first broken rule, naming the variable, the rule and the value given
 *   (secrets masked); for a source of CONFIG_FILE, the variable is CONFIG_FILE and the message names
 *   the file, the line and the key path. Every broken rule of one reading is listed in the message.
 */
export function loadConfig(env: NodeJS.ProcessEnv, overrides: Record<string, string | undefined> = {}): Config {
  const raw: RawEnv = {};
  for (const setting of SETTINGS) {
    const value = overrides[setting.env] ?? env[setting.env];
    raw[setting.env] = value === '' ? undefined : value;
  }
  // Defaults are text, read by the same schema as a value given: a default can break no rule unseen.
  const withDefaults: RawEnv = { ...raw };
  for (const setting of SETTINGS) if (withDefaults[setting.env] === undefined && setting.default !== undefined) withDefaults[setting.env] = setting.default;

  const v = parseSettings(withDefaults, (variable, rule) => ({ variable, text: `${variable} ${rule}; got ${displayValue(variable, raw[variable])}` }));

  let sources: SourceConfig[];
  if (v.CONFIG_FILE === undefined) {
    sources = [buildSource(DEFAULT_SOURCE, {}, v, environmentSettings(raw), false)];
  } else {
    // The file names each source's upstream: the same settings in the environment would be ignored or ambiguous.
    for (const variable of FILE_ONLY_VARIABLES) {
      if (raw[variable] !== undefined) fail(variable, 'must not be set together with CONFIG_FILE: each source of the file has its own', raw);
    }
    const file = v.CONFIG_FILE;
    const text = readConfigFile('CONFIG_FILE', environmentSettings(raw));
    sources = parseSourcesFile(file, text, env).map((source) => {
      const settings = fileSettings(file, source, withDefaults);
      const sv = parseSettings(settings.raw, (variable, rule) => {
        const value = source.values.get(variable);
        if (value === undefined) return { variable, text: `${variable} ${rule}; got ${displayValue(variable, raw[variable])}` };
        return { variable: 'CONFIG_FILE', text: `${fileLocation(file, value.line)}${value.keyPath} ${rule}; got ${displayValue(variable, value.shown)}` };
      });
      return buildSource(source.name, source.labels, sv, settings, true);
    });
  }

  return {
    sources,
    syncSourceConcurrency: v.SYNC_SOURCE_CONCURRENCY,
    database: { ...databaseTarget(v.DATABASE_URL, v), schema: v.DATABASE_SCHEMA, dataDir: v.DATA_DIR },
    serve: {
      host: v.METRICS_LISTEN.host,
      port: v.METRICS_LISTEN.port,
      metricsWindowMs: v.METRICS_WINDOW,
      cacheTtlMs: v.METRICS_CACHE_TTL,
      scrapeTimeoutMs: v.METRICS_SCRAPE_TIMEOUT,
      upstreamPrefix: v.UPSTREAM_METRIC_PREFIX,
      webConfigFile: v.WEB_CONFIG_FILE,
    },
    logLevel: v.LOG_LEVEL,
    logFormat: v.LOG_FORMAT,
  };
}

/**
 * One source from its parsed settings: the cross-setting rules, the files read, the upstream and
 * the sync. `fromFile`: a source of CONFIG_FILE, which must name its upstream (no demo simulator).
 */
function buildSource(name: string, labels: Record<string, string>, v: ParsedSettings, settings: SourceSettings, fromFile: boolean): SourceConfig {
  const { key } = settings;
  const check = settings.fail;
  if (v.CLIENT_SECRET !== undefined && v.CLIENT_SECRET_FILE !== undefined) {
    check('CLIENT_SECRET_FILE', `must not be set together with ${key('CLIENT_SECRET')} (choose one)`);
  }
  if ((v.TLS_CLIENT_CERT_FILE === undefined) !== (v.TLS_CLIENT_KEY_FILE === undefined)) {
    const missing = v.TLS_CLIENT_CERT_FILE === undefined ? 'TLS_CLIENT_CERT_FILE' : 'TLS_CLIENT_KEY_FILE';
    check(missing, `must be set together with its pair (${key('TLS_CLIENT_CERT_FILE')} and ${key('TLS_CLIENT_KEY_FILE')})`);
  }

  if (v.UPSTREAM_RATE_BURST !== undefined && v.UPSTREAM_RATE_LIMIT === undefined) {
    check('UPSTREAM_RATE_BURST', `needs ${key('UPSTREAM_RATE_LIMIT')} (the burst of a request budget that is off)`);
  }
  if (v.SYNC_MIN_SPLIT > v.SYNC_WINDOW) check('SYNC_MIN_SPLIT', `must not be longer than ${key('SYNC_WINDOW')} (${settings.raw.SYNC_WINDOW ?? '1h'})`);
  if (v.RECORD_TIME_FIELD === 'none' && v.UPSTREAM_TO_DATE !== 'exclusive') {
    // Windows are split into parts at instants; an inclusive toDate returns a record exactly at
    // a cut with both parts, and without its event time nothing can tell which one keeps it.
    check(
      'RECORD_TIME_FIELD',
      `is 'none', which needs ${key('UPSTREAM_TO_DATE')}=exclusive: windows are split by time into parts, and with an inclusive toDate a record exactly at a cut would be stored twice (set ${key('RECORD_TIME_FIELD')} to the record's event-time field, or ${key('UPSTREAM_TO_DATE')}=exclusive if E6 leaves out records at toDate)`,
    );
  }

  if (fromFile && v.STATISTICS_URL === undefined) check('STATISTICS_URL', 'is required');
  let upstream: UpstreamConfig | undefined;
  if (v.STATISTICS_URL !== undefined) {
    if (v.AUTH_URL === undefined) check('AUTH_URL', `is required when ${key('STATISTICS_URL')} is set`);
    if (v.CLIENT_ID === undefined) check('CLIENT_ID', `is required when ${key('STATISTICS_URL')} is set`);
    let clientSecret = v.CLIENT_SECRET;
    if (v.CLIENT_SECRET_FILE !== undefined) {
      // Read here so a missing or empty file stops the start; the token client reads it again at every token request.
      clientSecret = secretFromFileText(readConfigFile('CLIENT_SECRET_FILE', settings));
      if (clientSecret === '') check('CLIENT_SECRET_FILE', 'must name a file that holds the secret, not an empty file');
    }
    if (clientSecret === undefined) check('CLIENT_SECRET', `is required when ${key('STATISTICS_URL')} is set (or set ${key('CLIENT_SECRET_FILE')})`);

    const tls: TlsFiles = {};
    if (v.TLS_CLIENT_CERT_FILE !== undefined) tls.cert = readConfigFile('TLS_CLIENT_CERT_FILE', settings);
    if (v.TLS_CLIENT_KEY_FILE !== undefined) tls.key = readConfigFile('TLS_CLIENT_KEY_FILE', settings);
    if (v.TLS_CA_FILE !== undefined) tls.ca = readConfigFile('TLS_CA_FILE', settings);

    upstream = {
      statisticsUrl: new URL(v.STATISTICS_URL),
      tokenUrl: new URL('connect/token', withTrailingSlash(v.AUTH_URL!)),
      clientId: v.CLIENT_ID!,
      clientSecret: clientSecret!,
      ...(v.CLIENT_SECRET_FILE !== undefined ? { clientSecretFile: v.CLIENT_SECRET_FILE } : {}),
      clientSecretVariable: key(v.CLIENT_SECRET_FILE !== undefined ? 'CLIENT_SECRET_FILE' : 'CLIENT_SECRET'),
      tokenAuthMethod: v.TOKEN_AUTH_METHOD,
      scope: v.TOKEN_SCOPE,
      tls,
      timeoutMs: v.UPSTREAM_TIMEOUT,
      maxAttempts: v.UPSTREAM_MAX_ATTEMPTS,
      retryMaxDelayMs: v.UPSTREAM_RETRY_MAX_DELAY,
      ...(v.UPSTREAM_RATE_LIMIT !== undefined
        ? { rateLimit: { ratePerSecond: v.UPSTREAM_RATE_LIMIT, burst: v.UPSTREAM_RATE_BURST ?? Math.ceil(v.UPSTREAM_RATE_LIMIT) } }
        : {}),
    };
  }

  const sync: SyncConfig = {
    startDate: v.SYNC_START_DATE,
    windowMs: v.SYNC_WINDOW,
    settleMs: v.SYNC_SETTLE,
    lookbackMs: v.SYNC_LOOKBACK,
    pageSize: v.SYNC_PAGE_SIZE,
    concurrency: v.SYNC_CONCURRENCY,
    windowAttempts: v.SYNC_WINDOW_ATTEMPTS,
    minSplitMs: v.SYNC_MIN_SPLIT,
    toDate: v.UPSTREAM_TO_DATE,
    shrink: v.SYNC_SHRINK,
    schedule: v.SYNC_SCHEDULE === 'off' ? undefined : v.SYNC_SCHEDULE,
    recordTimeField: v.RECORD_TIME_FIELD === 'none' ? undefined : v.RECORD_TIME_FIELD.split('.'),
    partitionInterval: v.PARTITION_INTERVAL,
    retentionMs: v.RETENTION,
    rollup: rollupConfig(v),
  };
  return { name, labels, upstream, sync };
}

/**
 * DATABASE_URL without its `ssl*` parameters, and its TLS from them or from the PGSSL* settings
 * (the URL wins, as in libpq). Without DATABASE_URL the PGSSL* settings are validated but unused.
 */
function databaseTarget(
  url: string | undefined,
  v: { PGSSLMODE?: SslMode | undefined; PGSSLROOTCERT?: string | undefined; PGSSLCERT?: string | undefined; PGSSLKEY?: string | undefined },
): { url: string | undefined; tls: DatabaseTls } {
  if (url === undefined) return { url: undefined, tls: PLAIN_TLS };
  return resolveDatabaseTarget(url, { PGSSLMODE: v.PGSSLMODE, PGSSLROOTCERT: v.PGSSLROOTCERT, PGSSLCERT: v.PGSSLCERT, PGSSLKEY: v.PGSSLKEY });
}

/** The rollup settings as one RollupConfig (ROLLUP_DIMENSIONS=off turns the distinct rollup off too). */
function rollupConfig(v: {
  ROLLUP_DIMENSIONS: RollupDimension[] | undefined;
  ROLLUP_RETENTION: number | undefined;
  ROLLUP_DISTINCT: RollupDimension[];
  ROLLUP_DISTINCT_BY: RollupDimension[];
  FIELD_CATALOGUE: 'on' | 'off';
}): RollupConfig {
  const enabled = v.ROLLUP_DIMENSIONS !== undefined;
  return {
    enabled,
    dimensions: v.ROLLUP_DIMENSIONS ?? [],
    distinct: enabled ? v.ROLLUP_DISTINCT : [],
    distinctBy: v.ROLLUP_DISTINCT_BY,
    catalogue: v.FIELD_CATALOGUE === 'on',
    retentionMs: v.ROLLUP_RETENTION,
  };
}

/**
 * Parses ROLLUP_DIMENSIONS: `column=field` pairs separated by commas (`event_type=eventType`), the
 * field dotted for nesting like RECORD_TIME_FIELD, or `none` for a rollup by hour alone.
 *
 * @returns the dimensions, or the rule broken as a message.
 */
export function parseRollupDimensions(text: string): RollupDimension[] | string {
  if (text.trim() === 'none') return [];
  const dimensions: RollupDimension[] = [];
  for (const pair of text.split(',')) {
    const match = /^\s*([a-z_][a-z0-9_]{0,62})\s*=\s*([^.\s=,]+(\.[^.\s=,]+)*)\s*$/.exec(pair);
    if (!match)
      return "must be column=field pairs separated by commas (column: lower-case letters, digits and _, not starting with a digit; field dotted for nesting), or 'none'";
    const column = match[1]!;
    if (ROLLUP_RESERVED_COLUMNS.has(column)) return `must not use the column name ${column}: records_hourly has its own`;
    if (dimensions.some((d) => d.column === column)) return `must name each column once (${column} repeats)`;
    dimensions.push({ column, path: match[2]!.split('.') });
  }
  return dimensions;
}

/**
 * The secret in a secret file's text: the text without one trailing newline (`\n` or `\r\n`),
 * which secret files conventionally end with and which is not part of the secret. Never throws.
 */
export function secretFromFileText(text: string): string {
  return text.replace(/\r?\n$/, '');
}

/** `https://h/base` → `https://h/base/`, so relative paths resolve below it instead of replacing `base`. */
export function withTrailingSlash(url: string | URL): URL {
  const u = new URL(url);
  if (!u.pathname.endsWith('/')) u.pathname += '/';
  return u;
}
