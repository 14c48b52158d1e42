import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SETTINGS, loadConfig } from '../../src/config.js';
import { loadCommandConfig } from '../../src/commands/common.js';
import { parseDuration } from '../../src/time.js';
import { ConfigError } from '../../src/errors.js';
import { readClientFiles } from '../../src/upstream/files.js';
import { readDatabaseTls } from '../../src/db/tls.js';
import { scratchDir } from '../helpers/scratch.js';

const base = {
  STATISTICS_URL: 'https://stats.example.test/api',
  AUTH_URL: 'https://auth.example.test',
  CLIENT_ID: 'client-1',
  CLIENT_SECRET: 's3cr3t-value',
};

/** The error a command stops with: a broken rule, or a file a setting names that cannot be used. */
function configError(env: Record<string, string>, overrides: Record<string, string> = {}): ConfigError {
  try {
    loadCommandConfig(env, overrides);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig(base);
    expect(config.sources[0]!.upstream).toMatchObject({
      tokenAuthMethod: 'client_secret_post',
      scope: 'api.external',
      timeoutMs: 30_000,
      maxAttempts: 5,
      retryMaxDelayMs: 30_000,
    });
    expect(config.sources[0]!.upstream!.tokenUrl.href).toBe('https://auth.example.test/connect/token');
    expect(config.database).toEqual({ url: undefined, tls: { mode: 'disable', roots: 'system' }, schema: 'analytics', migrate: 'auto', dataDir: './data' });
    expect(config.logLevel).toBe('info');
  });

  it('reads the request budget: off by default, the burst defaulting to the rate rounded up', () => {
    expect(loadConfig(base).sources[0]!.upstream!.rateLimit).toBeUndefined();
    expect(loadConfig({ ...base, UPSTREAM_RATE_LIMIT: 'off' }).sources[0]!.upstream!.rateLimit).toBeUndefined();
    expect(loadConfig({ ...base, UPSTREAM_RATE_LIMIT: '10' }).sources[0]!.upstream!.rateLimit).toEqual({ ratePerSecond: 10, burst: 10 });
    expect(loadConfig({ ...base, UPSTREAM_RATE_LIMIT: '0.5' }).sources[0]!.upstream!.rateLimit).toEqual({ ratePerSecond: 0.5, burst: 1 });
    expect(loadConfig({ ...base }, { UPSTREAM_RATE_LIMIT: '2.5', UPSTREAM_RATE_BURST: '7' }).sources[0]!.upstream!.rateLimit).toEqual({
      ratePerSecond: 2.5,
      burst: 7,
    });
  });

  it.each([
    ['64MiB', 64 * 1024 ** 2],
    ['128 MiB', 128 * 1024 ** 2],
    ['0.5GiB', 512 * 1024 ** 2],
    ['100MB', 100_000_000],
    ['65536', 65_536],
    ['512KiB', 512 * 1024],
  ])('reads UPSTREAM_MAX_BODY=%s as %i bytes', (value, bytes) => {
    expect(loadConfig({ ...base, UPSTREAM_MAX_BODY: value }).sources[0]!.upstream!.maxBodyBytes).toBe(bytes);
  });

  it('caps upstream bodies at 64 MiB by default', () => {
    expect(loadConfig(base).sources[0]!.upstream!.maxBodyBytes).toBe(64 * 1024 ** 2);
  });

  it.each([['0'], ['1KiB'], ['1GiB'], ['64 parsecs'], ['-5MiB'], ['MiB'], ['1e6']])('rejects UPSTREAM_MAX_BODY=%s, naming it', (value) => {
    const err = configError({ ...base, UPSTREAM_MAX_BODY: value });
    expect(err.variable).toBe('UPSTREAM_MAX_BODY');
    expect(err.message).toContain('UPSTREAM_MAX_BODY must be a byte size from 64KiB to 512MiB, such as 64MiB');
  });

  it.each([['1.5'], ['70000.5B']])('rejects a fraction of a byte, UPSTREAM_MAX_BODY=%s', (value) => {
    expect(configError({ ...base, UPSTREAM_MAX_BODY: value }).variable).toBe('UPSTREAM_MAX_BODY');
  });

  it('reads a fraction of a larger unit, UPSTREAM_MAX_BODY=0.5MiB', () => {
    expect(loadConfig({ ...base, UPSTREAM_MAX_BODY: '0.5MiB' }).sources[0]!.upstream!.maxBodyBytes).toBe(512 * 1024);
  });

  it("bounds DATABASE_LOCK_TIMEOUT below PostgreSQL's lock_timeout limit", () => {
    expect(loadConfig({ ...base, DATABASE_LOCK_TIMEOUT: '24d' }).database.lockTimeoutMs).toBe(24 * 86_400_000);
    const err = configError({ ...base, DATABASE_LOCK_TIMEOUT: '25d' });
    expect(err.variable).toBe('DATABASE_LOCK_TIMEOUT');
    expect(err.message).toContain('DATABASE_LOCK_TIMEOUT must be a positive duration of at most 24d');
  });

  it('names the flag when the bad value came from the command line', () => {
    const flag = configError(base, { MIGRATE: 'banana' });
    expect(flag.variable).toBe('MIGRATE');
    expect(flag.message).toContain(`--migrate (MIGRATE) must be 'auto' or 'off'; got "banana"`);
    expect(configError({ ...base, MIGRATE: 'banana' }).message).toMatch(/^MIGRATE must be 'auto' or 'off'; got "banana"/);
  });

  it.each([['0'], ['-1'], ['10/s'], ['1e3'], ['10001'], ['on']])('rejects UPSTREAM_RATE_LIMIT=%s, naming it', (value) => {
    const err = configError({ ...base, UPSTREAM_RATE_LIMIT: value });
    expect(err.variable).toBe('UPSTREAM_RATE_LIMIT');
    expect(err.message).toContain("or 'off'");
  });

  it('rejects a burst without a rate, and a burst that is not a whole number', () => {
    expect(configError({ ...base, UPSTREAM_RATE_BURST: '5' }).message).toContain('UPSTREAM_RATE_BURST needs UPSTREAM_RATE_LIMIT');
    expect(configError({ ...base, UPSTREAM_RATE_LIMIT: '5', UPSTREAM_RATE_BURST: '1.5' }).variable).toBe('UPSTREAM_RATE_BURST');
  });

  it('keeps a path prefix of AUTH_URL in the token URL', () => {
    expect(loadConfig({ ...base, AUTH_URL: 'https://h.test/identity' }).sources[0]!.upstream!.tokenUrl.href).toBe('https://h.test/identity/connect/token');
  });

  it('is in demo mode without STATISTICS_URL', () => {
    expect(loadConfig({}).sources[0]!.upstream).toBeUndefined();
  });

  it('lets flags win over the environment', () => {
    const config = loadConfig({ ...base, LOG_LEVEL: 'warn' }, { LOG_LEVEL: 'debug' });
    expect(config.logLevel).toBe('debug');
  });

  it('reads LOG_FORMAT: auto by default, json or pretty from the variable or --log-format, anything else refused naming it', () => {
    expect(loadConfig(base).logFormat).toBe('auto');
    expect(loadConfig({ ...base, LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadConfig({ ...base, LOG_FORMAT: 'json' }, { LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(loadConfig({ ...base, LOG_FORMAT: '' }).logFormat).toBe('auto');
    const err = configError({ ...base, LOG_FORMAT: 'text' });
    expect(err.variable).toBe('LOG_FORMAT');
    expect(err.message).toBe('LOG_FORMAT must be one of auto, json, pretty; got "text"');
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ ...base, TOKEN_AUTH_METHOD: '' }).sources[0]!.upstream!.tokenAuthMethod).toBe('client_secret_post');
  });

  it('names the variable, the rule and the value for a bad enum', () => {
    const err = configError({ ...base, TOKEN_AUTH_METHOD: 'foo' });
    expect(err.variable).toBe('TOKEN_AUTH_METHOD');
    expect(err.message).toContain('TOKEN_AUTH_METHOD must be client_secret_post or client_secret_basic; got "foo"');
  });

  it('lists every broken rule', () => {
    const err = configError({ ...base, LOG_LEVEL: 'loud', UPSTREAM_TIMEOUT: '10 seconds' });
    expect(err.message).toMatch(/UPSTREAM_TIMEOUT must be a positive duration/);
    expect(err.message).toMatch(/LOG_LEVEL must be one of/);
  });

  it.each([
    ['STATISTICS_URL', 'ftp://x', 'must be an http:// or https:// URL'],
    ['AUTH_URL', 'not a url', 'must be an http:// or https:// URL'],
    ['UPSTREAM_MAX_ATTEMPTS', '0', 'must be a whole number from 1 to 20'],
    ['UPSTREAM_MAX_ATTEMPTS', 'many', 'must be a whole number from 1 to 20'],
    // Decimal digits only: a number coercion would read 0x10 as 16 and 1e3 as 1000.
    ['UPSTREAM_SAMPLE_LIMIT', '0x10', 'must be a whole number from 0 to 100000000'],
    ['UPSTREAM_LABEL_VALUE_LENGTH_LIMIT', '1e3', 'must be a whole number from 0 to 16777216'],
    ['METRICS_MAX_CONNECTIONS', '1_000', 'must be a whole number from 1 to 1048576'],
    ['SYNC_PAGE_SIZE', '10.0', 'must be a whole number from 1 to 1000'],
    // PostgreSQL's 1600 columns of a view, less records_typed's own 7.
    ['TYPED_VIEW_MAX_FIELDS', '1594', 'must be a whole number from 1 to 1593'],
    ['TYPED_VIEW_MAX_FIELDS', '0', 'must be a whole number from 1 to 1593'],
    ['DATABASE_SCHEMA', 'Robert"; drop', 'must be a lower-case SQL identifier'],
    ['DATABASE_URL', 'mysql://x', 'must be a postgres:// or postgresql:// URL'],
    ['TOKEN_SCOPE', 'a"b', 'must be space-separated scope tokens'],
  ])('rejects %s=%s', (variable, value, rule) => {
    const err = configError({ ...base, [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(rule);
    expect(err.message).toContain(JSON.stringify(value));
  });

  it('requires AUTH_URL, CLIENT_ID and a secret with STATISTICS_URL', () => {
    expect(configError({ STATISTICS_URL: base.STATISTICS_URL }).variable).toBe('AUTH_URL');
    expect(configError({ STATISTICS_URL: base.STATISTICS_URL, AUTH_URL: base.AUTH_URL }).variable).toBe('CLIENT_ID');
    const err = configError({ ...base, CLIENT_SECRET: '' });
    expect(err.variable).toBe('CLIENT_SECRET');
    expect(err.message).toContain('(unset)');
  });

  it('never shows the secret or a database password', () => {
    const both = configError({ ...base, CLIENT_SECRET_FILE: '/nonexistent' });
    expect(both.message).not.toContain('s3cr3t-value');
    const db = configError({ ...base, DATABASE_URL: 'postgres://u:hunter2@h/db', LOG_LEVEL: 'x' });
    expect(db.message).not.toContain('hunter2');
    const badDb = configError({ ...base, DATABASE_URL: 'http://u:hunter2@h/db' });
    expect(badDb.message).not.toContain('hunter2');
    expect(badDb.message).toContain('***');
  });

  it.each(['postgres://exporter:hunter2#x@db/analytics', 'postgres://exporter:hunter2@h1:5432,h2:5432/analytics'])(
    'masks the password of a DATABASE_URL the URL parser rejects: %s',
    (url) => {
      const err = configError({ ...base, DATABASE_URL: url });
      expect(err.variable).toBe('DATABASE_URL');
      expect(err.message).not.toContain('hunter2');
      expect(err.message).toContain('postgres://***@');
    },
  );

  // issue 25: libpq's keyword form is refused (a URL is required), and was echoed whole.
  it.each([
    ['host=db port=5432 user=u password=Secret123 dbname=x', ['Secret123']],
    ["host=db password = 'Sec ret\\'s 123' dbname=x sslpassword=KeyPass-77", ['Sec ret', 's 123', 'KeyPass-77']],
    ['password=Back\\ slash-Secret host=db', ['Back', 'slash-Secret']],
    ["host=db password='unterminated-Secret", ['unterminated-Secret']],
  ])('masks the password of a keyword-form DATABASE_URL: %s', (value, secrets) => {
    const err = configError({ ...base, DATABASE_URL: value });
    expect(err.variable).toBe('DATABASE_URL');
    expect(err.message).toContain('must be a postgres:// or postgresql:// URL');
    expect(err.message).toContain('password');
    expect(err.message).toContain('***');
    for (const secret of secrets) expect(err.message).not.toContain(secret);
  });

  it('shows no user info and no password parameter of a DATABASE_URL or another URL', () => {
    // Port 0 is refused, so the URL is shown.
    const query = configError({ ...base, DATABASE_URL: 'postgres://h:0/db?password=QueryPass-1&application_name=a' });
    expect(query.message).toContain('must have a port from 1 to 65535');
    expect(query.message).toContain('application_name=a');
    expect(query.message).not.toContain('QueryPass-1');
    const userOnly = configError({ ...base, DATABASE_URL: 'postgres://dbuser-7@h:0/db' });
    expect(userOnly.message).toContain('postgres://***@h:0/db');
    expect(userOnly.message).not.toContain('dbuser-7');
    const statistics = configError({ ...base, STATISTICS_URL: 'ftp://statuser:UrlPass-Stat-123@h/' });
    expect(statistics.variable).toBe('STATISTICS_URL');
    expect(statistics.message).not.toContain('UrlPass-Stat-123');
    expect(statistics.message).not.toContain('statuser');
  });

  it('reads CLIENT_SECRET_FILE without its trailing newline', () => {
    const dir = scratchDir('ae-config-');
    const file = join(dir, 'secret');
    writeFileSync(file, 'from-file\n');
    const { CLIENT_SECRET: _omit, ...rest } = base;
    expect(readClientFiles(loadConfig({ ...rest, CLIENT_SECRET_FILE: file }).sources[0]!.upstream!).clientSecret).toBe('from-file');
    writeFileSync(file, '\n');
    expect(configError({ ...rest, CLIENT_SECRET_FILE: file }).variable).toBe('CLIENT_SECRET_FILE');
  });

  it('names an unreadable file and requires the certificate pair', () => {
    const err = configError({ ...base, TLS_CA_FILE: '/nonexistent/ca.pem' });
    expect(err.variable).toBe('TLS_CA_FILE');
    expect(err.message).toContain('ENOENT');
    expect(configError({ ...base, TLS_CLIENT_CERT_FILE: '/x' }).variable).toBe('TLS_CLIENT_KEY_FILE');
  });
});

describe('the configuration as a leaf', () => {
  it('keeps the files settings name as paths, which a command reads once right after loading it', () => {
    const { CLIENT_SECRET: _omit, ...rest } = base;
    const env = {
      ...rest,
      CLIENT_SECRET_FILE: '/nonexistent/secret',
      TLS_CA_FILE: '/nonexistent/ca.pem',
      DATABASE_URL: 'postgres://u@h/a',
      PGSSLROOTCERT: '/nonexistent/root.pem',
    };
    const config = loadConfig(env);
    expect(config.sources[0]!.upstream).toMatchObject({
      clientSecretFile: { file: '/nonexistent/secret', variable: 'CLIENT_SECRET_FILE', key: 'CLIENT_SECRET_FILE' },
      tls: { ca: { file: '/nonexistent/ca.pem', variable: 'TLS_CA_FILE' } },
    });
    expect(config.database.tls).toMatchObject({ roots: { file: '/nonexistent/root.pem', variable: 'PGSSLROOTCERT' } });
    expect(configError(env).message).toBe('CLIENT_SECRET_FILE must name a readable file (ENOENT); got "/nonexistent/secret"');
  });

  it('imports nothing from the modules that use it', () => {
    const folder = fileURLToPath(new URL('../../src/config/', import.meta.url));
    const files = [fileURLToPath(new URL('../../src/config.ts', import.meta.url)), ...readdirSync(folder).map((name) => join(folder, name))];
    const imports = files.flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)\b[^;]*?\sfrom\s+'([^']+)'/gm)].map((m) => m[1]!));
    expect(imports).toContain('../errors.js');
    expect(imports.filter((target) => /(^|\/)(db|upstream|sync|app|commands|metrics|exposition|simulator)\//.test(target))).toEqual([]);
  });
});

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['15m', 900_000],
    ['1h30m', 5_400_000],
    ['1d', 86_400_000],
  ])('%s = %d ms', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(['', '30', 's', '1m1h', '1.5h', '-1s', '1h 30m'])('rejects %j', (text) => expect(parseDuration(text)).toBeUndefined());
});

describe('sync settings', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config.sources[0]!.sync).toEqual({
      startDate: { agoMs: 30 * 86_400_000 },
      windowMs: 3_600_000,
      settleMs: 300_000,
      lookbackMs: 3_600_000,
      pageSize: 1000,
      concurrency: 4,
      readAheadBytes: 32 * 1024 ** 2,
      windowAttempts: 3,
      windowMaxRequests: 0,
      minSplitMs: 1000,
      toDate: 'auto',
      shrink: 'keep',
      schedule: '*/15 * * * *',
      recordTimeField: ['timestamp'],
      fieldContract: 'evolve',
    });
    expect(config.tables).toEqual({
      partitionInterval: 'month',
      retentionMs: undefined,
      rollup: {
        enabled: true,
        dimensions: [
          { column: 'event_type', path: ['eventType'] },
          { column: 'customer_id', path: ['customerId'] },
        ],
        distinct: [{ column: 'user_id', path: ['userId'] }],
        distinctBy: [{ column: 'customer_id', path: ['customerId'] }],
        catalogue: true,
        typedViewMaxFields: 1000,
        retentionMs: undefined,
      },
    });
  });

  it('reads ROLLUP_DIMENSIONS (dotted fields, none) and ROLLUP_RETENTION', () => {
    const { rollup } = loadConfig({ ROLLUP_DIMENSIONS: ' form = form.id ,kind=type', ROLLUP_RETENTION: '400d' }).tables;
    expect(rollup).toEqual({
      enabled: true,
      dimensions: [
        { column: 'form', path: ['form', 'id'] },
        { column: 'kind', path: ['type'] },
      ],
      distinct: [{ column: 'user_id', path: ['userId'] }],
      distinctBy: [{ column: 'customer_id', path: ['customerId'] }],
      catalogue: true,
      typedViewMaxFields: 1000,
      retentionMs: 400 * 86_400_000,
    });
    expect(loadConfig({ ROLLUP_DIMENSIONS: 'none', ROLLUP_DISTINCT_BY: 'none' }).tables.rollup.dimensions).toEqual([]);
  });

  it('reads ROLLUP_DISTINCT, ROLLUP_DISTINCT_BY, ROLLUP_DIMENSIONS=off and FIELD_CATALOGUE', () => {
    const rollupOf = (env: Record<string, string>) => loadConfig(env).tables.rollup;
    expect(rollupOf({ ROLLUP_DISTINCT: 'user=actor.id, form=formId', ROLLUP_DISTINCT_BY: ' customer = account.id ' })).toMatchObject({
      distinct: [
        { column: 'user', path: ['actor', 'id'] },
        { column: 'form', path: ['formId'] },
      ],
      distinctBy: [{ column: 'customer', path: ['account', 'id'] }],
    });
    expect(rollupOf({ ROLLUP_DISTINCT: 'none' }).distinct).toEqual([]);
    expect(rollupOf({ ROLLUP_DISTINCT_BY: 'none' }).distinctBy).toEqual([]);
    expect(rollupOf({ ROLLUP_DIMENSIONS: 'off' })).toMatchObject({ enabled: false, dimensions: [], distinct: [], catalogue: true });
    expect(rollupOf({ FIELD_CATALOGUE: 'off' })).toMatchObject({ enabled: true, catalogue: false });
    expect(rollupOf({ TYPED_VIEW_MAX_FIELDS: '1593' }).typedViewMaxFields).toBe(1593);
  });

  it.each([
    [{ ROLLUP_DISTINCT: 'userId' }, /ROLLUP_DISTINCT\b/],
    [{ ROLLUP_DISTINCT: 'a=b,a=c' }, /ROLLUP_DISTINCT\b/],
    [{ ROLLUP_DISTINCT_BY: 'Customer=customerId' }, /ROLLUP_DISTINCT_BY/],
    [{ ROLLUP_DISTINCT_BY: 'customer_id' }, /ROLLUP_DISTINCT_BY/],
    [{ ROLLUP_DISTINCT_BY: 'distinct_values=x' }, /ROLLUP_DISTINCT_BY must not use the column names value_column, distinct_values or day/],
    [{ ROLLUP_DISTINCT_BY: 'day=x' }, /ROLLUP_DISTINCT_BY must not use the column names value_column, distinct_values or day/],
    [{ ROLLUP_DISTINCT_BY: 'bucket=x' }, /ROLLUP_DISTINCT_BY must not use the column name bucket: records_hourly_distinct has its own/],
    [{ FIELD_CATALOGUE: 'yes' }, /FIELD_CATALOGUE/],
    [{ ROLLUP_DIMENSIONS: 'offf' }, /ROLLUP_DIMENSIONS/],
  ])('rejects %j, naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
    expect(() => loadConfig(env)).toThrow(ConfigError);
  });

  it.each(['eventType', 'Event=eventType', '1x=a', 'a=b,a=c', 'bucket=a', 'window_start=a', 'records=a', 'a=b..c', 'a=', 'x"y=a', 'a=b,'])(
    'rejects ROLLUP_DIMENSIONS=%j, naming it',
    (value) => {
      expect(() => loadConfig({ ROLLUP_DIMENSIONS: value })).toThrow(/ROLLUP_DIMENSIONS/);
    },
  );

  it.each(['0', 'forever', '-1d'])('rejects ROLLUP_RETENTION=%j, naming it', (value) => {
    expect(() => loadConfig({ ROLLUP_RETENTION: value })).toThrow(/ROLLUP_RETENTION/);
  });

  it('reads dates, durations, zero, off and none', () => {
    const sync = loadConfig({
      SYNC_START_DATE: '2026-01-01T00:00:00Z',
      SYNC_SETTLE: '0',
      SYNC_LOOKBACK: '0s',
      SYNC_SCHEDULE: 'off',
      RECORD_TIME_FIELD: 'meta.time',
    }).sources[0]!.sync;
    expect(sync.startDate).toEqual({ at: new Date('2026-01-01T00:00:00Z') });
    expect(sync.settleMs).toBe(0);
    expect(sync.lookbackMs).toBe(0);
    expect(sync.schedule).toBeUndefined();
    expect(sync.recordTimeField).toEqual(['meta', 'time']);
    expect(loadConfig({ RECORD_TIME_FIELD: 'none', UPSTREAM_TO_DATE: 'exclusive' }).sources[0]!.sync.recordTimeField).toBeUndefined();
    expect(loadConfig({ SYNC_MIN_SPLIT: '100ms' }).sources[0]!.sync.minSplitMs).toBe(100);
  });

  it('reads AUDIT_SCHEDULE: once a day by default, a cron expression, or off', () => {
    expect(loadConfig({}).serve.auditSchedule).toBe('30 3 * * *');
    expect(loadConfig({ AUDIT_SCHEDULE: '*/5 * * * * *' }).serve.auditSchedule).toBe('*/5 * * * * *');
    expect(loadConfig({ AUDIT_SCHEDULE: 'off' }).serve.auditSchedule).toBeUndefined();
    expect(configError({ AUDIT_SCHEDULE: 'daily' }).variable).toBe('AUDIT_SCHEDULE');
  });

  it('takes RECORD_TIME_FIELD=none with any UPSTREAM_TO_DATE (membership never reads a record field), default auto', () => {
    expect(loadConfig({}).sources[0]!.sync.toDate).toBe('auto');
    for (const toDate of ['auto', 'inclusive', 'exclusive'] as const) {
      const sync = loadConfig({ RECORD_TIME_FIELD: 'none', UPSTREAM_TO_DATE: toDate }).sources[0]!.sync;
      expect(sync).toMatchObject({ recordTimeField: undefined, toDate });
    }
    expect(configError({ UPSTREAM_TO_DATE: 'open' }).message).toContain("UPSTREAM_TO_DATE must be 'auto', 'inclusive' or 'exclusive'");
    expect(configError({ SYNC_MIN_SPLIT: '2h' }).message).toContain('SYNC_MIN_SPLIT must not be longer than SYNC_WINDOW');
    expect(configError({ SYNC_MIN_SPLIT: '0s' }).variable).toBe('SYNC_MIN_SPLIT');
    expect(loadConfig({ SYNC_START_DATE: '7d' }).sources[0]!.sync.startDate).toEqual({ agoMs: 7 * 86_400_000 });
  });

  it.each([
    ['SYNC_PAGE_SIZE', '1001', 'must be a whole number from 1 to 1000'],
    ['SYNC_PAGE_SIZE', '0', 'must be a whole number from 1 to 1000'],
    ['SYNC_CONCURRENCY', '0', 'must be a whole number from 1 to 32'],
    ['SYNC_WINDOW', '30s', 'must be from 1m to 31d'],
    ['SYNC_START_DATE', '2026-01-01', 'must be an ISO 8601 date-time with a zone'],
    // An impossible date is refused, not rolled over to March 2.
    ['SYNC_START_DATE', '2026-02-30T00:00:00Z', 'must be an ISO 8601 date-time with a zone'],
    ['SYNC_START_DATE', '2026-11-01T24:00:00Z', 'must be an ISO 8601 date-time with a zone'],
    ['SYNC_START_DATE', 'yesterday', 'must be an ISO 8601 date-time with a zone'],
    ['SYNC_SCHEDULE', 'every 5 minutes', 'must be a cron expression'],
    ['SYNC_LOOKBACK', '-1h', 'must be a duration such as 1h, or 0'],
    ['RECORD_TIME_FIELD', 'a..b', "must be a field name, dotted for nested fields, or 'none'"],
  ])('rejects %s=%s', (variable, value, rule) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(rule);
  });
});

describe('DATABASE_URL and libpq TLS settings', () => {
  it("takes sslmode from the URL over PGSSLMODE, PGSSLMODE over libpq's default prefer", () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db.example.com/a' }).database).toMatchObject({
      url: 'postgres://u@db.example.com/a',
      tls: { mode: 'prefer', roots: 'system' },
    });
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db.example.com/a', PGSSLMODE: 'require' }).database.tls.mode).toBe('require');
    const both = loadConfig({ DATABASE_URL: 'postgres://u@db.example.com/a?sslmode=disable', PGSSLMODE: 'verify-full' }).database;
    expect(both).toMatchObject({ url: 'postgres://u@db.example.com/a', tls: { mode: 'disable' } });
    // The flag sets what the variable would; the URL still wins.
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h/a' }, { PGSSLMODE: 'verify-ca' }).database.tls.mode).toBe('verify-ca');
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h/a?sslmode=allow' }, { PGSSLMODE: 'verify-ca' }).database.tls.mode).toBe('allow');
  });

  it('reads the files PGSSLROOTCERT, PGSSLCERT and PGSSLKEY name', () => {
    const dir = scratchDir('ae-config-pgssl-');
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const pems = {
      ca: '-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n',
      cert: '-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n',
      key: '-----BEGIN PRIVATE KEY-----\nC\n-----END PRIVATE KEY-----\n',
    };
    const ca = file('ca.pem', pems.ca);
    const cert = file('c.pem', pems.cert);
    const key = file('c.key', pems.key);
    const { tls } = loadConfig({ DATABASE_URL: 'postgres://u@h/a?sslmode=verify-full', PGSSLROOTCERT: ca, PGSSLCERT: cert, PGSSLKEY: key }).database;
    expect(tls).toMatchObject({ mode: 'verify-full', roots: { file: ca }, client: { cert: { file: cert }, key: { file: key } } });
    // The configuration names them; the database module reads them (src/db/tls.ts).
    expect(readDatabaseTls(tls)).toEqual({
      mode: 'verify-full',
      roots: { file: ca, pem: pems.ca },
      client: { cert: { file: cert, pem: pems.cert }, key: { file: key, pem: pems.key } },
    });
  });

  it.each([
    [
      'DATABASE_URL',
      'postgres://u:Pa55word@h/a?sslmode=on',
      'DATABASE_URL parameter sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full; got "on"',
    ],
    ['PGSSLMODE', 'verify', 'PGSSLMODE must be one of disable, allow, prefer, require, verify-ca, verify-full; got "verify"'],
    [
      'DATABASE_URL',
      'postgres://u:Pa55word@h/a?sslrootcert=/nonexistent/ca.pem',
      'DATABASE_URL parameter sslrootcert must name a readable PEM file; cannot read /nonexistent/ca.pem (ENOENT)',
    ],
    ['PGSSLROOTCERT', '/nonexistent/ca.pem', 'PGSSLROOTCERT must name a readable PEM file; cannot read /nonexistent/ca.pem (ENOENT)'],
  ])('exits 2 naming %s for %s', (variable, value, message) => {
    const env = variable === 'DATABASE_URL' ? { DATABASE_URL: value } : { DATABASE_URL: 'postgres://u:Pa55word@h/a', [variable]: value };
    const err = configError(env);
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(message);
    expect(err.message).not.toContain('Pa55word');
  });

  it('validates PGSSLMODE even without DATABASE_URL (the embedded database is plain)', () => {
    expect(configError({ PGSSLMODE: 'sometimes' }).variable).toBe('PGSSLMODE');
    expect(loadConfig({ PGSSLMODE: 'verify-full' }).database.tls.mode).toBe('disable');
  });

  it.each(['postgres://u:Pa55word@h:99999/db', 'postgres://u:Pa55word@h:abc/db', 'postgresql://h:65536/db', 'postgres://[::1]:7x/db', 'postgres://h:0/db'])(
    'says "port" for DATABASE_URL=%s',
    (url) => {
      const err = configError({ DATABASE_URL: url });
      expect(err.variable).toBe('DATABASE_URL');
      expect(err.message).toContain('DATABASE_URL must have a port from 1 to 65535');
      expect(err.message).not.toContain('Pa55word');
    },
  );

  it('still says what a DATABASE_URL must be when the port is not the problem', () => {
    expect(configError({ DATABASE_URL: 'mysql://h:3306/db' }).message).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL');
    expect(loadConfig({ DATABASE_URL: 'postgres://h:6543/db' }).database.url).toBe('postgres://h:6543/db');
  });
});

describe('serve settings', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({}).serve).toEqual({
      host: '0.0.0.0',
      port: 9877,
      metricsWindowMs: 86_400_000,
      cacheTtlMs: 30_000,
      scrapeTimeoutMs: 10_000,
      maxConnectionsPerClient: 32,
      maxConnections: 1024,
      upstreamPrefix: undefined,
      healthWithoutAuth: true,
      authFailureBudget: 10,
      auditSchedule: '30 3 * * *',
    });
  });

  it("reads WEB_HEALTH_WITHOUT_AUTH as 'on' or 'off', naming it otherwise", () => {
    expect(loadConfig({ WEB_HEALTH_WITHOUT_AUTH: 'off' }).serve.healthWithoutAuth).toBe(false);
    expect(loadConfig({ WEB_HEALTH_WITHOUT_AUTH: 'on' }).serve.healthWithoutAuth).toBe(true);
    expect(() => loadConfig({ WEB_HEALTH_WITHOUT_AUTH: 'yes' })).toThrow(/WEB_HEALTH_WITHOUT_AUTH.*must be 'on' or 'off'/);
  });

  it('reads AUTH_FAILURE_BUDGET as a whole number of failed logins a minute, 0 for none', () => {
    expect(loadConfig({ AUTH_FAILURE_BUDGET: '0' }).serve.authFailureBudget).toBe(0);
    expect(loadConfig({ AUTH_FAILURE_BUDGET: '25' }).serve.authFailureBudget).toBe(25);
    expect(() => loadConfig({ AUTH_FAILURE_BUDGET: '-1' })).toThrow(/AUTH_FAILURE_BUDGET/);
    expect(() => loadConfig({ AUTH_FAILURE_BUDGET: '2.5' })).toThrow(/AUTH_FAILURE_BUDGET/);
  });

  it.each([
    ['127.0.0.1:9100', '127.0.0.1', 9100],
    [':9100', '0.0.0.0', 9100],
    ['[::]:9100', '::', 9100],
    ['localhost:0', 'localhost', 0],
  ])('reads METRICS_LISTEN=%s', (value, host, port) => {
    expect(loadConfig({ METRICS_LISTEN: value }).serve).toMatchObject({ host, port });
  });

  it.each([
    ['METRICS_LISTEN', '9100', 'must be host:port'],
    ['METRICS_LISTEN', 'host:70000', 'must be host:port'],
    ['METRICS_CACHE_TTL', 'soon', 'must be a duration such as 30s, or 0'],
    ['UPSTREAM_METRIC_PREFIX', '1bad', 'must be a metric name prefix'],
    ['UPSTREAM_METRIC_PREFIX', 'scrape_', 'must not start with scrape_ or ALERTS'],
    ['UPSTREAM_METRIC_PREFIX', 'ALERTS_', 'must not start with scrape_ or ALERTS'],
  ])('rejects %s=%s', (variable, value, rule) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(rule);
  });
});

describe('the settings table', () => {
  // The README's short table of the settings most people change is written by hand; each row must
  // say what the table says. The full reference, docs/configuration.md, is generated from the table
  // (test/unit/settings-doc.test.ts).
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  const rows = [...readme.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|([^|]*)\|([^|]*)\|/gm)].map((m) => ({ env: m[1]!, flag: m[2]!.trim(), byDefault: m[3]!.trim() }));

  it("lists ten settings in the README, each with the table's flag and default", () => {
    expect(rows).toHaveLength(10);
    for (const row of rows) {
      const setting = SETTINGS.find((s) => s.env === row.env);
      expect(setting, row.env).toBeDefined();
      expect(row.flag, row.env).toBe(setting!.flag === undefined ? 'none' : `\`${setting!.flag}\``);
      if (setting!.default !== undefined) expect(row.byDefault, row.env).toBe(`\`${setting!.default}\``);
      else expect(row.byDefault, row.env).not.toMatch(/^`[^`]*`$/);
    }
  });

  it('reads every default through the setting own schema (a default breaks no rule)', () => {
    const env = Object.fromEntries(SETTINGS.filter((s) => s.default !== undefined).map((s) => [s.env, s.default!]));
    expect(loadConfig(env)).toEqual(loadConfig({}));
  });
});
