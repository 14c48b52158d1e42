/**
 * The one table of settings (CONTRIBUTING.md, "Settings"): each setting declared once with its
 * environment variable, CLI flag, zod schema, default, help and secrecy. The zod object loadConfig
 * reads with (src/config/load.ts), the CLI's options, `--help` and `--help-settings`
 * (src/commands/options.ts) and docs/configuration.md (`npm run docs:settings`) all come from here.
 */
import cron from 'node-cron';
import { z } from 'zod';
import { ConfigError, maskSecret } from '../errors.js';
import { parseDuration, parseIsoDateTime } from '../time.js';
import { byteSize, duration, durationOrOff, durationOrZero, httpUrl, optional, wholeNumber } from './setting-schemas.js';
import { DEFAULT_SSL_MODE, maskDatabaseUrl, SSL_MODES } from './database-url.js';
import { DEFAULT_METRICS_PORT, LOG_FORMATS, LOG_LEVELS, MAX_RATE_LIMIT_PER_SECOND, PARTITION_INTERVALS, type RollupDimension } from './types.js';

/** `records_hourly`'s own columns. */
const ROLLUP_RESERVED_COLUMNS = new Set(['bucket', 'window_start', 'records']);
/** The distinct tables' own columns besides those. */
const DISTINCT_RESERVED_COLUMNS = new Set(['value_column', 'distinct_values', 'day']);

/** One setting, keyed by its environment variable; `schema` reads the variable's text. */
interface SettingSpec {
  /** Secrets have none: a flag shows in `ps`. */
  flag?: string;
  secret?: boolean;
  /** As a user would write it, read by the same schema. */
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
  UPSTREAM_MAX_BODY: {
    flag: '--upstream-max-body',
    default: '64MiB',
    help: 'largest upstream response body, as received and once decoded; an E6 slice over it is split in time, then read at smaller pages, then its window parked',
    schema: byteSize('64MiB', 64 * 1024, 512 * 1024 ** 2),
  },
  UPSTREAM_SAMPLE_LIMIT: {
    flag: '--upstream-sample-limit',
    default: '200000',
    help: "sample lines one E7 text may hold (Prometheus's sample_limit); over it the source's read fails (reason limit); 0 = no limit",
    schema: wholeNumber(0, 100_000_000),
  },
  UPSTREAM_LABEL_LIMIT: {
    flag: '--upstream-label-limit',
    default: '64',
    help: "labels one E7 sample may carry, the metric name not counted (Prometheus's label_limit); over it the read fails; 0 = no limit",
    schema: wholeNumber(0, 1_000_000),
  },
  UPSTREAM_LABEL_VALUE_LENGTH_LIMIT: {
    flag: '--upstream-label-value-length-limit',
    default: '2048',
    help: "bytes (UTF-8, unescaped) of one E7 label value (Prometheus's label_value_length_limit); over it the read fails; 0 = no limit",
    schema: wholeNumber(0, 16 * 1024 * 1024),
  },
  UPSTREAM_TO_DATE: {
    flag: '--upstream-to-date',
    default: 'auto',
    help:
      "records E6 returns with two slices (toDate inclusive, at the cut between them): 'auto' finds them exactly whatever E6 does (asking E6 for startDate = toDate = the cut when nothing cheaper proves there are none), " +
      "'inclusive' takes the records the two slices share without asking (exact unless two records with the same text lie on either side of a cut), 'exclusive' drops none (E6 leaves out records at toDate)",
    schema: z.enum(['auto', 'inclusive', 'exclusive'], { error: "must be 'auto', 'inclusive' or 'exclusive'" }),
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
        // URL() rejects a bad port with the rest: say which part is wrong.
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
  MIGRATE: {
    flag: '--migrate',
    default: 'auto',
    help: "pending migrations at the start of sync, serve, verify --repair, state set-watermark/reset and rollup rebuild: 'auto' applies them, 'off' refuses to start (exit 1) naming them; the migrate command always applies them",
    schema: z.enum(['auto', 'off'], { error: "must be 'auto' or 'off'" }),
  },
  DATABASE_LOCK_TIMEOUT: {
    flag: '--database-lock-timeout',
    default: 'off',
    help: "a sync run's statement waiting on a lock this long fails the run, its window rolled back (lock_timeout, SQLSTATE 55P03), or 'off' to wait",
    schema: durationOrOff('30s', { ms: 24 * 86_400_000, text: "24d (PostgreSQL's lock_timeout ends below 25d)" }),
  },
  DATA_DIR: { flag: '--data-dir', default: './data', help: 'folder of the embedded database', schema: z.string() },
  SYNC_START_DATE: {
    flag: '--sync-start-date',
    default: '30d',
    help: 'where a first sync starts: ISO 8601 date-time, or a duration before now',
    schema: z.string().transform((text, ctx): { at: Date } | { agoMs: number } => {
      const ago = parseDuration(text);
      if (ago !== undefined) return { agoMs: ago };
      // A zone is required: else the host's zone would decide.
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
  SYNC_READ_AHEAD: {
    flag: '--sync-read-ahead',
    default: '32MiB',
    help: 'bytes of E6 bodies a window reads into memory before its transaction opens; a larger window streams, its transaction open meanwhile; 0 = stream all',
    schema: byteSize('32MiB', 0, 1024 ** 3),
  },
  SYNC_WINDOW_ATTEMPTS: {
    flag: '--sync-window-attempts',
    default: '3',
    help: 'pairs of reads of an instant holding more than a page, while they disagree, before its window is parked',
    schema: wholeNumber(1, 10),
  },
  SYNC_WINDOW_MAX_REQUESTS: {
    flag: '--sync-window-max-requests',
    default: '0',
    help: 'E6 requests one window may spend in a run before it is parked; 0 = auto, 100 + 4 × SYNC_WINDOW_ATTEMPTS × the pages its count implies; at most 1000000',
    schema: wholeNumber(0, 1_000_000),
  },
  SYNC_MIN_SPLIT: {
    flag: '--sync-min-split',
    default: '1s',
    help: 'finest time split of a window into slices of one page each; cuts lie on its multiples',
    schema: duration('1s'),
  },
  SYNC_SHRINK: {
    flag: '--sync-shrink',
    default: 'keep',
    help: "a re-read window that lost records upstream: 'keep' them beside what E6 returns now, or 'replace' the window with it",
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
  AUDIT_SCHEDULE: {
    flag: '--audit-schedule',
    default: '30 3 * * *',
    help: "cron expression of the audit inside serve (verify --repair of every source), or 'off'",
    schema: z
      .string()
      .refine((text) => text === 'off' || cron.validate(text), "must be a cron expression (minute hour day month weekday, optional seconds first) or 'off'"),
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
  TYPED_VIEW_MAX_FIELDS: {
    flag: '--typed-view-max-fields',
    default: '1000',
    help: "records_typed's field columns, for the fields most records carry (others stay in record_fields and payload); at most 1593, PostgreSQL's 1600 less its own 7",
    schema: wholeNumber(1, 1593),
  },
  FIELD_CONTRACT: {
    flag: '--field-contract',
    default: 'evolve',
    help: "records bringing a new top-level field or a new type of one: 'evolve' stores them and reports the change, 'freeze' quarantines them (reason contract) and loads the rest",
    schema: z.enum(['evolve', 'freeze'], { error: "must be 'evolve' or 'freeze'" }),
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
  // 32 per client: a scraper uses one or two. 1024 in all: a few MiB of sockets, far below Node's
  // file descriptor limit; more addresses are the network's to stop.
  METRICS_MAX_CONNECTIONS_PER_CLIENT: {
    flag: '--metrics-max-connections-per-client',
    default: '32',
    help: "connections one client address may hold open to serve's HTTP server; more are closed at once",
    schema: wholeNumber(1, 65_536),
  },
  METRICS_MAX_CONNECTIONS: {
    flag: '--metrics-max-connections',
    default: '1024',
    help: "connections serve's HTTP server holds open in all; more are closed at once",
    schema: wholeNumber(1, 1_048_576),
  },
  WEB_CONFIG_FILE: {
    flag: '--web-config-file',
    help: "TLS and basic auth of serve, in exporter-toolkit's web configuration format; read again when it changes",
    schema: optional(z.string()),
  },
  WEB_HEALTH_WITHOUT_AUTH: {
    flag: '--web-health-without-auth',
    default: 'on',
    help: "'on': /healthz and /readyz answer without credentials when WEB_CONFIG_FILE turns on basic auth (for Kubernetes probes and the image's healthcheck); 'off' puts them behind it like every path",
    schema: z.enum(['on', 'off'], { error: "must be 'on' or 'off'" }),
  },
  AUTH_FAILURE_BUDGET: {
    flag: '--auth-failure-budget',
    default: '10',
    help: 'failed logins (basic_auth_users) one client address may spend per minute; beyond them its uncached attempts answer 429, 0 for no budget',
    schema: wholeNumber(0, 10_000),
  },
  UPSTREAM_METRIC_PREFIX: {
    flag: '--upstream-metric-prefix',
    help: 'prefix added to upstream metric names',
    schema: optional(
      z
        .string()
        .regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a metric name prefix: letters, digits, _ and :, not starting with a digit')
        .refine(
          (v) => !/^(scrape_|ALERTS)/.test(v),
          'must not start with scrape_ or ALERTS: Prometheus reserves those names, and every upstream family would be dropped',
        ),
    ),
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

/** Documentation of a setting, as `--help-settings` and docs/configuration.md show it. */
export interface SettingDoc {
  env: string;
  /** CLI flag overriding the variable; secrets have none (a flag shows in `ps`). */
  flag?: string;
  secret?: boolean;
  /** The default as a user would write it; absent = unset by default. */
  default?: string;
  help: string;
}

/** Every setting, in the order `--help-settings` and docs/configuration.md list them within a group. */
export const SETTINGS: readonly SettingDoc[] = Object.entries(SETTING_TABLE).map(([env, spec]: [string, SettingSpec]) => ({
  env,
  ...(spec.flag !== undefined ? { flag: spec.flag } : {}),
  ...(spec.secret ? { secret: true } : {}),
  ...(spec.default !== undefined ? { default: spec.default } : {}),
  help: spec.help,
}));

const SECRET_VARIABLES = new Set(SETTINGS.filter((s) => s.secret).map((s) => s.env));

type SchemaShape<T> = { [K in keyof T]: T[K] extends { schema: infer S extends z.ZodType } ? S : never };

/** One key per variable, read from text (defaults filled in first, as text). */
const envSchema = z.object(
  Object.fromEntries(Object.entries(SETTING_TABLE).map(([env, spec]: [string, SettingSpec]) => [env, spec.schema])) as SchemaShape<typeof SETTING_TABLE>,
);

export type RawEnv = Record<string, string | undefined>;

export type ParsedSettings = z.output<typeof envSchema>;

/** @throws {ConfigError} listing every broken rule, named by the first one's variable. */
export function parseSettings(text: RawEnv, describe: (variable: string, rule: string) => { variable: string; text: string }): ParsedSettings {
  const parsed = envSchema.safeParse(text);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => describe(String(issue.path[0]), issue.message));
  throw new ConfigError(lines[0]!.variable, lines.map((l) => l.text).join('\n'));
}

/** Shows a given value in an error message, masking secrets, a URL's user info and DATABASE_URL's passwords (src/config/database-url.ts). */
export function displayValue(variable: string, value: string | undefined): string {
  if (value === undefined) return '(unset)';
  if (SECRET_VARIABLES.has(variable)) return maskSecret(value);
  let shown = variable === 'DATABASE_URL' ? maskDatabaseUrl(value) : value;
  if (variable !== 'DATABASE_URL' && URL.canParse(value)) {
    const url = new URL(value);
    if (url.username !== '' || url.password !== '') {
      url.username = '***';
      url.password = '';
      shown = url.href;
    }
  }
  return JSON.stringify(shown.length > 200 ? `${shown.slice(0, 200)}…` : shown);
}

/** ROLLUP_DIMENSIONS: `column=field,…` (field dotted) or `none`; else the rule broken, as a message. */
function parseRollupDimensions(text: string): RollupDimension[] | string {
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
