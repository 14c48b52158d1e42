/**
 * loadConfig: the settings table's schemas over environment variables, CLI flags over them and
 * CONFIG_FILE's sources over both, validated once into the plain types of types.ts. Defaults live
 * in the settings table only. A broken rule throws {@link ConfigError} naming the variable, rule
 * and value (secrets masked). Only CONFIG_FILE is read; other files, by the modules that use them.
 */
import { databaseTlsSettings, type DatabaseTlsSettings, type SslMode } from './database-url.js';
import { settingError, type SettingFile, type SettingName } from './setting-file.js';
import { displayValue, parseSettings, SETTINGS, type ParsedSettings, type RawEnv } from './settings.js';
import { FILE_ONLY_VARIABLES, fileKeyOf, fileLocation, readSourcesFile, type FileSource } from './sources-file.js';
import {
  DEFAULT_SOURCE,
  type Config,
  type RollupConfig,
  type RollupDimension,
  type SourceConfig,
  type SyncConfig,
  type TlsFileSettings,
  type UpstreamConfig,
  type UpstreamLimits,
  type UpstreamRequests,
} from './types.js';

/** One source's settings and how messages name them: by variable, or by CONFIG_FILE line and key path. */
interface SourceSettings {
  /** The environment's text with the file's values over it. */
  raw: RawEnv;
  /** `SYNC_WINDOW` or `sources[0].sync.window`. */
  key: (variable: string) => string;
  named: (variable: string) => SettingName;
  /** As the file writes it (`${NAME}` not expanded), else the environment's; not for secrets. */
  written: (variable: string) => string | undefined;
}

function fail(settings: SourceSettings, variable: string, rule: string): never {
  throw settingError(settings.named(variable), rule);
}

function settingFile(settings: SourceSettings, variable: string): SettingFile {
  return { file: settings.raw[variable]!, ...settings.named(variable) };
}

const FLAGS = new Map(SETTINGS.map((setting) => [setting.env, setting.flag]));

/** How a message names `variable`: by its flag too when the value came from the command line. */
function givenAs(variable: string, overrides: Record<string, string | undefined>): string {
  const flag = FLAGS.get(variable);
  return overrides[variable] !== undefined && flag !== undefined ? `${flag} (${variable})` : variable;
}

function environmentSettings(raw: RawEnv, overrides: Record<string, string | undefined>): SourceSettings {
  return {
    raw,
    key: (variable) => givenAs(variable, overrides),
    named: (variable) => ({ variable, at: '', key: givenAs(variable, overrides), shown: displayValue(variable, raw[variable]) }),
    written: (variable) => raw[variable],
  };
}

function fileSettings(file: string, source: FileSource, environment: RawEnv): SourceSettings {
  const raw: RawEnv = { ...environment };
  for (const [variable, value] of source.values) raw[variable] = value.text;
  // A key the file leaves out is named by the variable that applies, or the file key to add.
  const key = (variable: string) => {
    const fileKey = (FILE_ONLY_VARIABLES as readonly string[]).includes(variable) ? fileKeyOf(variable) : undefined;
    return source.values.get(variable)?.keyPath ?? (fileKey !== undefined ? `${source.keyPath}.${fileKey}` : variable);
  };
  return {
    raw,
    key,
    named: (variable) => {
      const value = source.values.get(variable);
      return {
        variable: 'CONFIG_FILE',
        at: fileLocation(file, value?.line ?? source.line),
        key: key(variable),
        shown: displayValue(variable, value ? value.shown : environment[variable]),
      };
    },
    written: (variable) => source.values.get(variable)?.shown ?? environment[variable],
  };
}

/**
 * The configuration from the environment, CLI overrides and CONFIG_FILE's sources, each source read
 * by the same schemas and rules as the variables; a setting a source leaves out takes the
 * environment's value.
 *
 * @param env empty strings count as unset; also where CONFIG_FILE's `${NAME}` are looked up.
 * @param overrides CLI flags by variable name; they win over `env`.
 * @returns one source, {@link DEFAULT_SOURCE}, without CONFIG_FILE; the file's in its order with it.
 * @throws {ConfigError} listing every broken rule, named by the first's variable (CONFIG_FILE, with
 *   file, line and key path, for a source of the file); secrets masked.
 */
export function loadConfig(env: NodeJS.ProcessEnv, overrides: Record<string, string | undefined> = {}): Config {
  const raw: RawEnv = {};
  for (const setting of SETTINGS) {
    const value = overrides[setting.env] ?? env[setting.env];
    raw[setting.env] = value === '' ? undefined : value;
  }
  // Defaults are text read by the same schema: a default can break no rule unseen.
  const withDefaults: RawEnv = { ...raw };
  for (const setting of SETTINGS) if (withDefaults[setting.env] === undefined && setting.default !== undefined) withDefaults[setting.env] = setting.default;

  const named = (variable: string, rule: string) => ({
    variable,
    text: `${givenAs(variable, overrides)} ${rule}; got ${displayValue(variable, raw[variable])}`,
  });
  const v = parseSettings(withDefaults, named);

  let sources: SourceConfig[];
  const environment = environmentSettings(raw, overrides);
  if (v.CONFIG_FILE === undefined) {
    sources = [buildSource(DEFAULT_SOURCE, {}, v, environment, false)];
  } else {
    // The file names each source's upstream: these would be ambiguous.
    for (const variable of FILE_ONLY_VARIABLES) {
      if (raw[variable] !== undefined) fail(environment, variable, 'must not be set together with CONFIG_FILE: each source of the file has its own');
    }
    const file = v.CONFIG_FILE;
    sources = readSourcesFile(settingFile(environment, 'CONFIG_FILE'), env).map((source) => {
      const settings = fileSettings(file, source, withDefaults);
      const sv = parseSettings(settings.raw, (variable, rule) => {
        const value = source.values.get(variable);
        if (value === undefined) return named(variable, rule);
        return { variable: 'CONFIG_FILE', text: `${fileLocation(file, value.line)}${value.keyPath} ${rule}; got ${displayValue(variable, value.shown)}` };
      });
      return buildSource(source.name, source.labels, sv, settings, true);
    });
  }

  return {
    sources,
    syncSourceConcurrency: v.SYNC_SOURCE_CONCURRENCY,
    database: {
      ...databaseTarget(v.DATABASE_URL, v),
      schema: v.DATABASE_SCHEMA,
      migrate: v.MIGRATE,
      dataDir: v.DATA_DIR,
      lockTimeoutMs: v.DATABASE_LOCK_TIMEOUT,
    },
    tables: { partitionInterval: v.PARTITION_INTERVAL, retentionMs: v.RETENTION, rollup: rollupConfig(v) },
    serve: {
      host: v.METRICS_LISTEN.host,
      port: v.METRICS_LISTEN.port,
      metricsWindowMs: v.METRICS_WINDOW,
      cacheTtlMs: v.METRICS_CACHE_TTL,
      scrapeTimeoutMs: v.METRICS_SCRAPE_TIMEOUT,
      maxConnectionsPerClient: v.METRICS_MAX_CONNECTIONS_PER_CLIENT,
      maxConnections: v.METRICS_MAX_CONNECTIONS,
      upstreamPrefix: v.UPSTREAM_METRIC_PREFIX,
      webConfigFile: v.WEB_CONFIG_FILE,
      healthWithoutAuth: v.WEB_HEALTH_WITHOUT_AUTH === 'on',
      authFailureBudget: v.AUTH_FAILURE_BUDGET,
      auditSchedule: v.AUDIT_SCHEDULE === 'off' ? undefined : v.AUDIT_SCHEDULE,
    },
    logLevel: v.LOG_LEVEL,
    logFormat: v.LOG_FORMAT,
  };
}

/** One source: the rules across settings, its upstream (required from the file) and sync. */
function buildSource(name: string, labels: Record<string, string>, v: ParsedSettings, settings: SourceSettings, fromFile: boolean): SourceConfig {
  const { key } = settings;
  const check = (variable: string, rule: string) => fail(settings, variable, rule);
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
  if (v.SYNC_MIN_SPLIT > v.SYNC_WINDOW) check('SYNC_MIN_SPLIT', `must not be longer than ${key('SYNC_WINDOW')} (${settings.written('SYNC_WINDOW') ?? '1h'})`);

  if (v.FIELD_CONTRACT === 'freeze' && v.FIELD_CATALOGUE === 'off')
    check('FIELD_CONTRACT', `'freeze' needs FIELD_CATALOGUE=on (the catalogue it compares records with)`);
  if (fromFile && v.STATISTICS_URL === undefined) check('STATISTICS_URL', 'is required');
  const requests: UpstreamRequests = {
    timeoutMs: v.UPSTREAM_TIMEOUT,
    maxBodyBytes: v.UPSTREAM_MAX_BODY,
    maxAttempts: v.UPSTREAM_MAX_ATTEMPTS,
    retryMaxDelayMs: v.UPSTREAM_RETRY_MAX_DELAY,
    ...(v.UPSTREAM_RATE_LIMIT !== undefined
      ? { rateLimit: { ratePerSecond: v.UPSTREAM_RATE_LIMIT, burst: v.UPSTREAM_RATE_BURST ?? Math.ceil(v.UPSTREAM_RATE_LIMIT) } }
      : {}),
  };
  let upstream: UpstreamConfig | undefined;
  if (v.STATISTICS_URL !== undefined) {
    if (v.AUTH_URL === undefined) check('AUTH_URL', `is required when ${key('STATISTICS_URL')} is set`);
    if (v.CLIENT_ID === undefined) check('CLIENT_ID', `is required when ${key('STATISTICS_URL')} is set`);
    if (v.CLIENT_SECRET === undefined && v.CLIENT_SECRET_FILE === undefined) {
      check('CLIENT_SECRET', `is required when ${key('STATISTICS_URL')} is set (or set ${key('CLIENT_SECRET_FILE')})`);
    }
    const tls: TlsFileSettings = {};
    if (v.TLS_CLIENT_CERT_FILE !== undefined) tls.cert = settingFile(settings, 'TLS_CLIENT_CERT_FILE');
    if (v.TLS_CLIENT_KEY_FILE !== undefined) tls.key = settingFile(settings, 'TLS_CLIENT_KEY_FILE');
    if (v.TLS_CA_FILE !== undefined) tls.ca = settingFile(settings, 'TLS_CA_FILE');

    upstream = {
      statisticsUrl: new URL(v.STATISTICS_URL),
      tokenUrl: new URL('connect/token', withTrailingSlash(v.AUTH_URL!)),
      clientId: v.CLIENT_ID!,
      ...(v.CLIENT_SECRET !== undefined ? { clientSecret: v.CLIENT_SECRET } : {}),
      ...(v.CLIENT_SECRET_FILE !== undefined ? { clientSecretFile: settingFile(settings, 'CLIENT_SECRET_FILE') } : {}),
      clientSecretVariable: key(v.CLIENT_SECRET_FILE !== undefined ? 'CLIENT_SECRET_FILE' : 'CLIENT_SECRET'),
      tokenAuthMethod: v.TOKEN_AUTH_METHOD,
      scope: v.TOKEN_SCOPE,
      tls,
      ...requests,
    };
  }

  const sync: SyncConfig = {
    startDate: v.SYNC_START_DATE,
    windowMs: v.SYNC_WINDOW,
    settleMs: v.SYNC_SETTLE,
    lookbackMs: v.SYNC_LOOKBACK,
    pageSize: v.SYNC_PAGE_SIZE,
    concurrency: v.SYNC_CONCURRENCY,
    readAheadBytes: v.SYNC_READ_AHEAD,
    windowAttempts: v.SYNC_WINDOW_ATTEMPTS,
    windowMaxRequests: v.SYNC_WINDOW_MAX_REQUESTS,
    minSplitMs: v.SYNC_MIN_SPLIT,
    toDate: v.UPSTREAM_TO_DATE,
    shrink: v.SYNC_SHRINK,
    schedule: v.SYNC_SCHEDULE === 'off' ? undefined : v.SYNC_SCHEDULE,
    recordTimeField: v.RECORD_TIME_FIELD === 'none' ? undefined : v.RECORD_TIME_FIELD.split('.'),
    fieldContract: v.FIELD_CONTRACT,
  };
  const limits: UpstreamLimits = {
    sampleLimit: v.UPSTREAM_SAMPLE_LIMIT,
    labelLimit: v.UPSTREAM_LABEL_LIMIT,
    labelValueLengthLimit: v.UPSTREAM_LABEL_VALUE_LENGTH_LIMIT,
  };
  return { name, labels, upstream, ...(upstream === undefined ? { demo: requests } : {}), sync, limits };
}

/** DATABASE_URL without `ssl*` parameters, and its TLS from them or PGSSL* (the URL wins, as in libpq). */
function databaseTarget(
  url: string | undefined,
  v: { PGSSLMODE?: SslMode | undefined; PGSSLROOTCERT?: string | undefined; PGSSLCERT?: string | undefined; PGSSLKEY?: string | undefined },
): { url: string | undefined; tls: DatabaseTlsSettings } {
  if (url === undefined) return { url: undefined, tls: { mode: 'disable', roots: 'system' } };
  return databaseTlsSettings(url, { PGSSLMODE: v.PGSSLMODE, PGSSLROOTCERT: v.PGSSLROOTCERT, PGSSLCERT: v.PGSSLCERT, PGSSLKEY: v.PGSSLKEY });
}

/** The rollup settings as one RollupConfig (ROLLUP_DIMENSIONS=off turns the distinct rollup off too). */
function rollupConfig(v: {
  ROLLUP_DIMENSIONS: RollupDimension[] | undefined;
  ROLLUP_RETENTION: number | undefined;
  ROLLUP_DISTINCT: RollupDimension[];
  ROLLUP_DISTINCT_BY: RollupDimension[];
  FIELD_CATALOGUE: 'on' | 'off';
  TYPED_VIEW_MAX_FIELDS: number;
}): RollupConfig {
  const enabled = v.ROLLUP_DIMENSIONS !== undefined;
  return {
    enabled,
    dimensions: v.ROLLUP_DIMENSIONS ?? [],
    distinct: enabled ? v.ROLLUP_DISTINCT : [],
    distinctBy: v.ROLLUP_DISTINCT_BY,
    catalogue: v.FIELD_CATALOGUE === 'on',
    typedViewMaxFields: v.TYPED_VIEW_MAX_FIELDS,
    retentionMs: v.ROLLUP_RETENTION,
  };
}

/** `https://h/base` → `https://h/base/`, so relative paths resolve below it instead of replacing `base`. */
export function withTrailingSlash(url: string | URL): URL {
  const u = new URL(url);
  if (!u.pathname.endsWith('/')) u.pathname += '/';
  return u;
}
