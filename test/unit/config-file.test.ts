/**
 * CONFIG_FILE: a YAML list of sources, validated by the settings' own schemas, with errors naming
 * the file, the line and the key path.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { loadCommandConfig } from '../../src/commands/common.js';
import { ConfigError } from '../../src/errors.js';
import { readClientFiles } from '../../src/upstream/files.js';
import { sourceEntry } from '../helpers/source-entry.js';

const dir = mkdtempSync(join(tmpdir(), 'ae-config-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The example file of docs/configuration.md (examples/sources.yaml), with the production secret's path (where a deployment mounts it)
 * pointed at a file of this test's folder. (A mock of node:fs would not reach a config module
 * another file of the same worker imported first: unit files share their module cache.)
 */
const EXAMPLE_SECRET_PATH = join(dir, 'production_client_secret');
const EXAMPLE_SECRET = 'production-secret-from-file';
writeFileSync(EXAMPLE_SECRET_PATH, `${EXAMPLE_SECRET}\n`);
const EXAMPLE_TEXT = readFileSync(fileURLToPath(new URL('../../examples/sources.yaml', import.meta.url)), 'utf8');
if (!EXAMPLE_TEXT.includes('/run/secrets/production_client_secret'))
  throw new Error('examples/sources.yaml no longer names /run/secrets/production_client_secret');
const EXAMPLE = join(dir, 'sources.yaml');
writeFileSync(EXAMPLE, EXAMPLE_TEXT.replace('/run/secrets/production_client_secret', EXAMPLE_SECRET_PATH));

let files = 0;
/** Writes `text` to a new file of the test's folder and returns its path. */
function write(text: string, name = `sources-${++files}.yaml`): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const SECRET = 'file-source-secret-42';

/** A valid source entry with the file's SECRET, as {@link sourceEntry}. */
const entry = (name: string, extra: string[] = []): string => sourceEntry(name, SECRET, extra);

/** The error a command stops with: a broken rule, or a file a setting names that cannot be used. */
function configError(env: Record<string, string>): ConfigError {
  try {
    loadCommandConfig(env, {});
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('CONFIG_FILE', () => {
  it('loads the documented example to its two sources', () => {
    const config = loadConfig({ CONFIG_FILE: EXAMPLE, SANDBOX_CLIENT_SECRET: 'sandbox-secret-from-env' });
    expect(config.sources.map((s) => s.name)).toEqual(['production', 'sandbox']);
    const [production, sandbox] = config.sources as [(typeof config.sources)[0], (typeof config.sources)[0]];
    expect(production.labels).toEqual({ environment: 'production' });
    expect(production.upstream).toMatchObject({
      clientId: 'analytics-exporter',
      clientSecretFile: { file: EXAMPLE_SECRET_PATH },
      clientSecretVariable: 'sources[0].client_secret_file',
      tokenAuthMethod: 'client_secret_post',
    });
    expect(readClientFiles(production.upstream!).clientSecret).toBe(EXAMPLE_SECRET);
    expect(production.upstream!.statisticsUrl.href).toBe('https://statistics.example.com/');
    expect(production.upstream!.tokenUrl.href).toBe('https://identity.example.com/connect/token');
    expect(production.sync).toMatchObject({ startDate: { agoMs: 90 * 86_400_000 }, windowMs: 3_600_000, schedule: '*/15 * * * *' });
    expect(sandbox.labels).toEqual({ environment: 'sandbox' });
    expect(sandbox.upstream).toMatchObject({ clientSecret: 'sandbox-secret-from-env', tokenAuthMethod: 'client_secret_basic', scope: 'api.external' });
    expect(sandbox.upstream!.clientSecretFile).toBeUndefined();
    expect(sandbox.sync).toMatchObject({ windowMs: 86_400_000, schedule: '0 * * * *', startDate: { agoMs: 30 * 86_400_000 } });
  });

  it('takes every setting a source leaves out from the environment, and its own over it', () => {
    const file = write(`sources:\n${entry('a', ['sync: {window: 2h, page_size: 250, to_date: exclusive, record_time_field: none}'])}\n${entry('b')}\n`);
    const config = loadConfig({ CONFIG_FILE: file, SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: '500', TOKEN_SCOPE: 'api.other', UPSTREAM_TIMEOUT: '5s' });
    const [a, b] = config.sources;
    expect(a!.sync).toMatchObject({ windowMs: 7_200_000, pageSize: 250, toDate: 'exclusive', recordTimeField: undefined });
    expect(b!.sync).toMatchObject({ windowMs: 86_400_000, pageSize: 500, toDate: 'auto', recordTimeField: ['timestamp'] });
    for (const source of config.sources) expect(source.upstream).toMatchObject({ scope: 'api.other', timeoutMs: 5000 });
  });

  it('reads relative secret files against the file folder, and a rate limit and a body cap per source', () => {
    writeFileSync(join(dir, 'b.secret'), 'secret-of-b-source\n');
    const file = write(
      `sources:\n${entry('a', ['rate_limit: 2', 'rate_burst: 4', 'max_body: 128MiB'])}\n  - name: b\n    statistics_url: https://b.test/\n    auth_url: https://b.test/\n    client_id: b\n    client_secret_file: b.secret\n`,
    );
    const [a, b] = loadConfig({ CONFIG_FILE: file }).sources;
    expect(a!.upstream!.rateLimit).toEqual({ ratePerSecond: 2, burst: 4 });
    expect(b!.upstream!.rateLimit).toBeUndefined();
    // UPSTREAM_MAX_BODY per source: b keeps the default.
    expect([a!.upstream!.maxBodyBytes, b!.upstream!.maxBodyBytes]).toEqual([128 * 1024 ** 2, 64 * 1024 ** 2]);
    expect(b!.upstream).toMatchObject({ clientSecretFile: { file: join(dir, 'b.secret') } });
    expect(readClientFiles(b!.upstream!).clientSecret).toBe('secret-of-b-source');
  });

  it('reads the E7 limits per source (sample_limit, label_limit, label_value_length_limit) over the environment, 0 for none', () => {
    const file = write(`sources:\n${entry('a', ['sample_limit: 1000', 'label_limit: 0', 'label_value_length_limit: 100'])}\n${entry('b')}\n`);
    const [a, b] = loadConfig({ CONFIG_FILE: file, UPSTREAM_LABEL_LIMIT: '16' }).sources;
    expect(a!.limits).toEqual({ sampleLimit: 1000, labelLimit: 0, labelValueLengthLimit: 100 });
    expect(b!.limits).toEqual({ sampleLimit: 200_000, labelLimit: 16, labelValueLengthLimit: 2048 });
    const bad = write(`sources:\n${entry('a', ['sample_limit: -1'])}\n`);
    expect(configError({ CONFIG_FILE: bad }).message).toMatch(/sources\[0\]\.sample_limit must be a whole number from 0 to 100000000/);
  });

  it('names the key path and line of an unknown key', () => {
    const file = write(`sources:\n${entry('a')}\n${entry('b', ['client_secret_fil: /x'])}\n`);
    const err = configError({ CONFIG_FILE: file });
    expect(err.variable).toBe('CONFIG_FILE');
    expect(err.message).toBe(`CONFIG_FILE ${file} line 12: sources[1].client_secret_fil: unknown key`);
    const nested = write(`sources:\n${entry('a', ['sync:', '  windw: 1h'])}\n`);
    expect(configError({ CONFIG_FILE: nested }).message).toMatch(new RegExp(`^CONFIG_FILE ${nested} line 8: sources\\[0\\]\\.sync\\.windw: unknown key`));
    expect(configError({ CONFIG_FILE: write(`source:\n${entry('a')}\n`) }).message).toContain('line 1: source: unknown key');
  });

  it('refuses a repeated name, a bad name and a missing name', () => {
    const duplicate = write(`sources:\n${entry('prod')}\n${entry('prod')}\n`);
    expect(configError({ CONFIG_FILE: duplicate }).message).toBe(
      `CONFIG_FILE ${duplicate} line 7: sources[1].name: "prod" is also the name of sources[0]; names must be unique`,
    );
    const bad = write(`sources:\n${entry('Prod.EU')}\n`);
    expect(configError({ CONFIG_FILE: bad }).message).toMatch(/line 2: sources\[0\]\.name: must be 1 to 64 lower-case letters, digits, _ or -; got "Prod.EU"/);
    const unnamed = write('sources:\n  - statistics_url: https://x.test/\n');
    expect(configError({ CONFIG_FILE: unnamed }).message).toBe(`CONFIG_FILE ${unnamed} line 2: sources[0].name is required`);
    expect(configError({ CONFIG_FILE: write('sources: []\n') }).message).toContain('line 1: sources: must be a non-empty list of sources');
    expect(configError({ CONFIG_FILE: write(`sources:\n${entry('a', ['scope: ""'])}\n`) }).message).toContain('line 7: sources[0].scope: must not be empty');
  });

  it('names the key and the path of a missing or empty secret file', () => {
    const missing = write(
      `sources:\n  - name: a\n    statistics_url: https://a.test/\n    auth_url: https://a.test/\n    client_id: a\n    client_secret_file: nowhere.secret\n`,
    );
    const err = configError({ CONFIG_FILE: missing });
    expect(err.variable).toBe('CONFIG_FILE');
    expect(err.message).toBe(
      `CONFIG_FILE ${missing} line 6: sources[0].client_secret_file must name a readable file (ENOENT); got ${JSON.stringify(join(dir, 'nowhere.secret'))}`,
    );
    writeFileSync(join(dir, 'empty.secret'), '\n');
    const empty = write(
      `sources:\n  - name: a\n    statistics_url: https://a.test/\n    auth_url: https://a.test/\n    client_id: a\n    client_secret_file: empty.secret\n`,
    );
    expect(configError({ CONFIG_FILE: empty }).message).toContain(
      'line 6: sources[0].client_secret_file must name a file that holds the secret, not an empty file',
    );
    const none = write('sources:\n  - name: a\n    statistics_url: https://a.test/\n    auth_url: https://a.test/\n    client_id: a\n');
    expect(configError({ CONFIG_FILE: none }).message).toContain(
      'line 2: sources[0].client_secret is required when sources[0].statistics_url is set (or set sources[0].client_secret_file)',
    );
  });

  it('expands ${NAME} from the environment, keeps $${ literal, and names an unset NAME without showing values', () => {
    const file = write(
      'sources:\n  - name: a\n    statistics_url: ${A_URL}\n    auth_url: https://a.test/\n    client_id: id-$${literal}\n    client_secret: ${A_SECRET}\n    labels: {team: "${TEAM}"}\n',
    );
    const source = loadConfig({ CONFIG_FILE: file, A_URL: 'https://a.test/base', A_SECRET: 'secret-from-env-77', TEAM: 'forms' }).sources[0]!;
    expect(source.upstream).toMatchObject({ clientId: 'id-${literal}', clientSecret: 'secret-from-env-77' });
    expect(source.upstream!.statisticsUrl.href).toBe('https://a.test/base');
    expect(source.labels).toEqual({ team: 'forms' });

    const unset = configError({ CONFIG_FILE: file, A_URL: 'https://a.test/base', TEAM: 'forms' });
    expect(unset.message).toBe(
      `CONFIG_FILE ${file} line 6: sources[0].client_secret: \${A_SECRET} names environment variable A_SECRET, which is unset or empty`,
    );
    // A value from the environment is shown as the file writes it, never as expanded.
    const badUrl = configError({ CONFIG_FILE: file, A_URL: 'ftp://private-host.test/', A_SECRET: 'x', TEAM: 'forms' });
    expect(badUrl.message).toBe(`CONFIG_FILE ${file} line 3: sources[0].statistics_url must be an http:// or https:// URL; got "\${A_URL}"`);
    expect(badUrl.message).not.toContain('private-host');
  });

  // issue 25: the name and the path keys showed what ${NAME} held.
  it('shows a refused name or path written as ${NAME} as the file writes it, never the value', () => {
    const secret = 'Sup3r+Name/Secret=77';
    const named = write(`sources:\n${entry('${SECRET1}')}\n`);
    const bad = configError({ CONFIG_FILE: named, SECRET1: secret });
    expect(bad.message).toBe(`CONFIG_FILE ${named} line 2: sources[0].name: must be 1 to 64 lower-case letters, digits, _ or -; got "\${SECRET1}"`);
    expect(bad.message).not.toContain('Sup3r');

    const twice = write(`sources:\n${entry('${PROD_NAME}')}\n${entry('prod-${REGION}')}\n`);
    const duplicate = configError({ CONFIG_FILE: twice, PROD_NAME: 'prod-hidden-eu', REGION: 'hidden-eu' });
    expect(duplicate.message).toBe(`CONFIG_FILE ${twice} line 7: sources[1].name: "prod-\${REGION}" is also the name of sources[0]; names must be unique`);
    expect(duplicate.message).not.toContain('hidden');

    const path = write(
      `sources:\n  - name: a\n    statistics_url: https://a.test/\n    auth_url: https://a.test/\n    client_id: a\n    client_secret_file: \${SECRET_PATH}\n`,
    );
    const missing = configError({ CONFIG_FILE: path, SECRET_PATH: join(dir, 'hidden-path-Secret-9') });
    expect(missing.message).toBe(`CONFIG_FILE ${path} line 6: sources[0].client_secret_file must name a readable file (ENOENT); got "\${SECRET_PATH}"`);
    expect(missing.message).not.toContain('hidden-path');

    const window = write(`sources:\n${entry('a', ['sync: {window: "${A_WINDOW}", min_split: 2h}'])}\n`);
    expect(configError({ CONFIG_FILE: window, A_WINDOW: '1h' }).message).toBe(
      `CONFIG_FILE ${window} line 7: sources[0].sync.min_split must not be longer than sources[0].sync.window (\${A_WINDOW}); got "2h"`,
    );
  });

  it('never shows a client secret from the file in an error', () => {
    const file = write(`sources:\n${entry('a', ['sync: {window: 1s}'])}\n`);
    const err = configError({ CONFIG_FILE: file });
    expect(err.message).toBe(`CONFIG_FILE ${file} line 7: sources[0].sync.window must be from 1m to 31d; got "1s"`);
    const both = write(`sources:\n${entry('a', ['client_secret_file: /x'])}\n`);
    const message = configError({ CONFIG_FILE: both }).message;
    expect(message).toBe(
      `CONFIG_FILE ${both} line 7: sources[0].client_secret_file must not be set together with sources[0].client_secret (choose one); got "/x"`,
    );
    const notText = write(
      `sources:\n  - name: a\n    statistics_url: https://a.test/\n    auth_url: https://a.test/\n    client_id: a\n    client_secret: 12345\n    sync: {page_size: 0}\n`,
    );
    expect(configError({ CONFIG_FILE: notText }).message).toBe(
      `CONFIG_FILE ${notText} line 7: sources[0].sync.page_size must be a whole number from 1 to 1000; got "0"`,
    );
    expect(message).not.toContain(SECRET);
  });

  it('names the per-source key of a broken value and of a broken rule between settings', () => {
    const window = write(`sources:\n${entry('a')}\n${entry('b', ['sync:', '  window: soon'])}\n`);
    expect(configError({ CONFIG_FILE: window }).message).toBe(
      `CONFIG_FILE ${window} line 13: sources[1].sync.window must be a positive duration such as 1h; got "soon"`,
    );
    const split = write(`sources:\n${entry('a', ['sync: {window: 1m}'])}\n`);
    expect(configError({ CONFIG_FILE: split, SYNC_MIN_SPLIT: '2m' }).message).toBe(
      `CONFIG_FILE ${split} line 2: SYNC_MIN_SPLIT must not be longer than sources[0].sync.window (1m); got "2m"`,
    );
    const toDate = write(`sources:\n${entry('a', ['sync: {to_date: open}'])}\n`);
    expect(configError({ CONFIG_FILE: toDate }).message).toMatch(
      /^CONFIG_FILE .* line 7: sources\[0\]\.sync\.to_date must be 'auto', 'inclusive' or 'exclusive'/,
    );
    const pair = write(`sources:\n${entry('a', ['tls: {cert_file: c.pem}'])}\n`);
    expect(configError({ CONFIG_FILE: pair }).message).toMatch(
      /line 2: sources\[0\]\.tls\.key_file must be set together with its pair \(sources\[0\]\.tls\.cert_file and sources\[0\]\.tls\.key_file\)/,
    );
  });

  it('refuses label names Prometheus or the source label would not allow', () => {
    for (const [label, rule] of [
      ['source', 'the source label is the source'],
      ['__meta', 'must be a Prometheus label name'],
      ['"1env"', 'must be a Prometheus label name'],
      ['le', 'le names a histogram bucket'],
      ['quantile', 'quantile names a histogram bucket or summary quantile'],
    ] as const) {
      const file = write(`sources:\n${entry('a', [`labels: {${label}: x}`])}\n`);
      expect(configError({ CONFIG_FILE: file }).message, label).toMatch(new RegExp(`line 7: sources\\[0\\]\\.labels\\..*: ${rule}`));
    }
  });

  it('refuses the upstream settings of the environment beside it, naming the variable', () => {
    const file = write(`sources:\n${entry('a')}\n`);
    for (const variable of ['STATISTICS_URL', 'CLIENT_SECRET', 'TLS_CA_FILE']) {
      const err = configError({ CONFIG_FILE: file, [variable]: 'https://x.test/' });
      expect(err.variable).toBe(variable);
      expect(err.message).toMatch(new RegExp(`^${variable} must not be set together with CONFIG_FILE`));
    }
    expect(configError({ CONFIG_FILE: file, CLIENT_SECRET: 'env-secret-value' }).message).not.toContain('env-secret-value');
  });

  it('reports invalid YAML and an unreadable file with CONFIG_FILE', () => {
    const broken = write('sources:\n  - name: a\n    name: b\n');
    expect(configError({ CONFIG_FILE: broken }).message).toMatch(new RegExp(`^CONFIG_FILE ${broken} line 3: not valid YAML: Map keys must be unique`));
    const missing = configError({ CONFIG_FILE: join(dir, 'absent.yaml') });
    expect(missing.variable).toBe('CONFIG_FILE');
    expect(missing.message).toMatch(/^CONFIG_FILE must name a readable file \(ENOENT\)/);
  });

  it('describes an environment-only deployment as before: one source named default holding every upstream and sync variable, the same source a file with those values describes', () => {
    const secretFile = write('env-secret-value\n', 'env.secret');
    const upstream = {
      STATISTICS_URL: 'https://stats.example.test/api',
      AUTH_URL: 'https://auth.example.test',
      CLIENT_ID: 'env-client',
      CLIENT_SECRET_FILE: secretFile,
      TOKEN_AUTH_METHOD: 'client_secret_basic',
      TOKEN_SCOPE: 'api.external api.extra',
      UPSTREAM_RATE_LIMIT: '2',
      UPSTREAM_RATE_BURST: '3',
    };
    const sync = {
      SYNC_START_DATE: '7d',
      SYNC_WINDOW: '6h',
      SYNC_SETTLE: '1m',
      SYNC_LOOKBACK: '2h',
      SYNC_PAGE_SIZE: '250',
      SYNC_CONCURRENCY: '2',
      SYNC_WINDOW_ATTEMPTS: '4',
      SYNC_MIN_SPLIT: '10s',
      SYNC_SCHEDULE: '0 * * * *',
      SYNC_SHRINK: 'replace',
      UPSTREAM_TO_DATE: 'exclusive',
      RECORD_TIME_FIELD: 'meta.time',
    };
    const shared = { DATABASE_SCHEMA: 'env_only', UPSTREAM_TIMEOUT: '5s', UPSTREAM_MAX_ATTEMPTS: '7', RETENTION: '90d', METRICS_LISTEN: '127.0.0.1:9999' };
    const fromEnv = loadConfig({ ...upstream, ...sync, ...shared });
    expect(fromEnv.sources.map((s) => [s.name, s.labels])).toEqual([['default', {}]]);
    const only = fromEnv.sources[0]!;
    expect(JSON.parse(JSON.stringify(only.upstream))).toMatchObject({
      statisticsUrl: 'https://stats.example.test/api',
      tokenUrl: 'https://auth.example.test/connect/token',
      clientId: 'env-client',
      clientSecretFile: { file: secretFile },
      tokenAuthMethod: 'client_secret_basic',
      scope: 'api.external api.extra',
      timeoutMs: 5_000,
      maxAttempts: 7,
      rateLimit: { ratePerSecond: 2, burst: 3 },
    });
    expect(readClientFiles(only.upstream!).clientSecret).toBe('env-secret-value');
    expect(only.sync).toMatchObject({ startDate: { agoMs: 7 * 86_400_000 }, windowMs: 6 * 3_600_000, pageSize: 250, schedule: '0 * * * *' });

    const fromFile = loadConfig({
      ...shared,
      CONFIG_FILE: write(
        [
          'sources:',
          '  - name: default',
          `    statistics_url: ${upstream.STATISTICS_URL}`,
          `    auth_url: ${upstream.AUTH_URL}`,
          `    client_id: ${upstream.CLIENT_ID}`,
          `    client_secret_file: ${secretFile}`,
          `    token_auth_method: ${upstream.TOKEN_AUTH_METHOD}`,
          `    scope: ${upstream.TOKEN_SCOPE}`,
          `    rate_limit: ${upstream.UPSTREAM_RATE_LIMIT}`,
          `    rate_burst: ${upstream.UPSTREAM_RATE_BURST}`,
          '    sync:',
          ...Object.entries(sync).map(([variable, value]) => `      ${variable.replace(/^(SYNC|UPSTREAM)_/, '').toLowerCase()}: '${value}'`),
          '',
        ].join('\n'),
      ),
    });
    // Only where the secret came from is named differently (for warnings and errors about it): the file and the secret it holds are the same.
    const comparable = (config: typeof fromEnv): unknown =>
      JSON.parse(
        JSON.stringify({
          ...config,
          configFile: undefined,
          sources: config.sources.map((s) => ({
            ...s,
            upstream: {
              ...s.upstream,
              clientSecretVariable: undefined,
              clientSecretFile: s.upstream!.clientSecretFile!.file,
              clientSecret: readClientFiles(s.upstream!).clientSecret,
            },
          })),
        }),
      );
    expect(comparable(fromFile)).toEqual(comparable(fromEnv));
  });

  it('leaves the environment alone as one source named default when unset', () => {
    const config = loadConfig({ STATISTICS_URL: 'https://s.test/', AUTH_URL: 'https://a.test/', CLIENT_ID: 'c', CLIENT_SECRET: 'secret' });
    expect(config.sources.map((s) => [s.name, s.labels])).toEqual([['default', {}]]);
    expect(config.sources[0]!.upstream!.clientSecretVariable).toBe('CLIENT_SECRET');
  });
});
