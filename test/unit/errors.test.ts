/**
 * Every failure the exporter throws, built the way its thrower builds it (through the token and
 * HTTP clients on a mock dispatcher where there is one), with its code, metric reason, exit status,
 * log level and retryability written out: a changed class, code or table row fails here. pg's and
 * Node's own errors for a lost database connection are `database` wherever they surface.
 */
import zlib from 'node:zlib';
import pg from 'pg';
import { errors as undiciErrors, MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import * as errors from '../../src/errors.js';
import {
  AbortedError,
  ConfigError,
  DataDirLockedError,
  DatabaseError,
  DatabaseOpenError,
  SharedServersError,
  InconsistentWindowError,
  PagingLimitError,
  WindowBudgetError,
  PendingMigrationsError,
  ReadOnlyDatabaseError,
  InvalidArgumentError,
  UpstreamLimitError,
  UpstreamTimeoutError,
  WebConfigError,
} from '../../src/errors.js';
import { classifyFailure, failureReason, isDatabaseUnavailable } from '../../src/failures.js';
import { databaseError } from '../../src/db/pool.js';
import { sessionEnded } from '../../src/db/session-end.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { readAtSmallerPages } from '../../src/sync/read/oversize.js';
import { withoutCopies } from '../../src/sync/read/page-copies.js';
import type { SyncResult } from '../../src/sync/run/run.js';
import { decodePage, parsePage } from '../../src/upstream/analytics.js';
import { send, statusError, type RawResponse } from '../../src/upstream/http.js';
import { TokenClient, type TokenClientOptions } from '../../src/upstream/token.js';

/** pg's error for a message from the server, as its protocol parser builds it: SQLSTATE in `code`. */
function pgError(message: string, code: string): pg.DatabaseError {
  const err = new pg.DatabaseError(message, message.length, 'error');
  err.code = code;
  err.severity = 'FATAL';
  return err;
}

/** Node's error for a connect the server refused, as `net` builds it. */
const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
  code: 'ECONNREFUSED',
  errno: -111,
  syscall: 'connect',
  address: '127.0.0.1',
  port: 5432,
});
const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
/** pg's own errors for a connection that broke under a query, or never opened in time (no code). */
const terminated = new Error('Connection terminated unexpectedly');
const connectTimeout = new Error('Connection terminated due to connection timeout', { cause: new Error('Connection terminated unexpectedly') });
const adminShutdown = pgError('terminating connection due to administrator command', '57P01');

const ORIGIN = 'https://platform.test';
const E6_URL = new URL(`${ORIGIN}/analytics?pageNumber=1`);
const TOKEN_URL = new URL(`${ORIGIN}/connect/token`);
const JSON_HEADERS = { 'content-type': 'application/json' };
const BEARER = { access_token: 'tok', token_type: 'Bearer', expires_in: 3600 };

const agents: MockAgent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

type Interceptor = ReturnType<ReturnType<MockAgent['get']>['intercept']>;
/** Sets up the answer to every request of a test: a reply or an error, persisted. */
type Answer = (interceptor: Interceptor) => { persist(): unknown };

/** A dispatcher whose every request to {@link ORIGIN} `path` gets what `answer` sets up. */
function mockAgent(path: string, method: 'GET' | 'POST', answer: Answer): MockAgent {
  const agent = new MockAgent();
  agent.disableNetConnect();
  agents.push(agent);
  answer(agent.get(ORIGIN).intercept({ path: (p) => p.startsWith(path), method })).persist();
  return agent;
}

/** What one request (no retries) fails with. */
async function sendFails(endpoint: 'analytics' | 'token', answer: Answer, options: { maxBodyBytes?: number; signal?: AbortSignal } = {}): Promise<unknown> {
  const url = endpoint === 'token' ? TOKEN_URL : E6_URL;
  const method = endpoint === 'token' ? 'POST' : 'GET';
  const dispatcher = mockAgent(url.pathname, method, answer);
  return send({ dispatcher, endpoint, method, url, maxBodyBytes: 1 << 20, ...options }).then(
    () => {
      throw new Error('the request did not fail');
    },
    (err: unknown) => err,
  );
}

/** What a token request fails with once its two attempts are spent. */
async function tokenFails(answer: Answer, options: Partial<TokenClientOptions> = {}): Promise<unknown> {
  const dispatcher = mockAgent(TOKEN_URL.pathname, 'POST', answer);
  const tokens = new TokenClient({
    tokenUrl: TOKEN_URL,
    clientId: 'id',
    clientSecret: 'a-long-enough-secret',
    authMethod: 'client_secret_post',
    scope: 'api.external',
    dispatcher,
    retry: { maxAttempts: 2, maxDelayMs: 0, sleep: async () => undefined },
    log: silentLogger,
    maxBodyBytes: 1 << 20,
    ...options,
  });
  return tokens.getToken().then(
    () => {
      throw new Error('the token request did not fail');
    },
    (err: unknown) => err,
  );
}

/** What `build` throws. */
async function thrown(build: () => unknown): Promise<unknown> {
  try {
    await build();
  } catch (err) {
    return err;
  }
  throw new Error('nothing was thrown');
}

const response = (status: number, headers: RawResponse['headers'] = {}): RawResponse => ({
  status,
  headers,
  body: '',
  durationSeconds: 0,
  sentAtMs: 0,
  headersAtMs: 0,
});
const nodeError = (message: string, code: string) => Object.assign(new Error(message), { code });
const gzipOf = (bytes: number) => zlib.gzipSync(Buffer.alloc(bytes, 0x20));

type Level = 'error' | 'warn';
interface Expected {
  /** The error's `code`: ours, or pg's and Node's for errors we did not make. */
  code: string | undefined;
  reason: string;
  exitStatus: 0 | 1 | 2;
  level: Level;
  /** `retryable` of an error of ours; absent for the others. */
  retryable?: boolean;
  /** What isDatabaseUnavailable says; false unless given. */
  unavailable?: true;
}

const fails = (code: string | undefined, reason: string, retryable?: boolean, level: Level = 'error'): Expected => ({
  code,
  reason,
  exitStatus: 1,
  level,
  ...(retryable === undefined ? {} : { retryable }),
});
const usage = (code: string, level: Level = 'error'): Expected => ({ code, reason: 'other', exitStatus: 2, level, retryable: false });
const unavailable = (code: string | undefined, retryable?: boolean): Expected => ({ ...fails(code, 'database', retryable), unavailable: true });

/** Every failure: a name, how its thrower builds it, and what it means. */
const FAILURES: Array<[name: string, build: () => unknown, expected: Expected]> = [
  // Settings and arguments.
  ['a setting breaking its rule', () => new ConfigError('SYNC_SCHEDULE', 'SYNC_SCHEDULE must be a cron expression'), usage('ERR_CONFIG')],
  ['an argument breaking its rule', () => new InvalidArgumentError('--source x is not a configured source'), usage('ERR_INVALID_ARGUMENT')],
  // At start it becomes a ConfigError; on a reload serve keeps the previous configuration, so a warning.
  ['an unusable WEB_CONFIG_FILE', () => new WebConfigError('tls_server_config.cert_file', 'web.yml: cannot read'), usage('ERR_WEB_CONFIG', 'warn')],

  // E0, once the token client's retries are spent: `token` for whatever needed the token.
  ['E0 refusing (503)', () => tokenFails((i) => i.reply(503, 'busy')), fails('ERR_TOKEN_REQUEST', 'token', false)],
  [
    'E0 refusing the client (401)',
    () => tokenFails((i) => i.reply(401, { error: 'invalid_client' }, { headers: JSON_HEADERS })),
    fails('ERR_TOKEN_REQUEST', 'token', false),
  ],
  ['E0 unreachable', () => tokenFails((i) => i.replyWithError(nodeError('connect ECONNREFUSED', 'ECONNREFUSED'))), fails('ERR_TOKEN_REQUEST', 'token', false)],
  ['E0 timing out', () => tokenFails((i) => i.replyWithError(new undiciErrors.HeadersTimeoutError())), fails('ERR_TOKEN_REQUEST', 'token', false)],
  [
    'E0 answering no Bearer token',
    () => tokenFails((i) => i.reply(200, { token_type: 'mac' }, { headers: JSON_HEADERS })),
    fails('ERR_TOKEN_RESPONSE', 'token', false),
  ],
  // Today's label for a token answer that cannot be read: the fault's own reason is not kept.
  [
    'E0 answering over the cap',
    () => tokenFails((i) => i.replyWithError(new undiciErrors.ResponseExceededMaxSizeError())),
    fails('ERR_UPSTREAM_BODY', 'invalid_body', false),
  ],
  [
    'E0 answering in a coding the client does not decode',
    () => tokenFails((i) => i.reply(200, JSON.stringify(BEARER), { headers: { ...JSON_HEADERS, 'content-encoding': 'zstd' } })),
    fails('ERR_UPSTREAM_BODY', 'invalid_body', false),
  ],
  [
    'CLIENT_SECRET_FILE unreadable (nothing sent)',
    () => tokenFails((i) => i.reply(200, BEARER, { headers: JSON_HEADERS }), { clientSecretFile: '/nonexistent/client-secret' }),
    fails('ERR_TOKEN_REQUEST', 'token', false),
  ],

  // One request (E0, E6, E7 alike): what send() throws.
  [
    'E6 unreachable',
    () => sendFails('analytics', (i) => i.replyWithError(nodeError('connect ECONNREFUSED', 'ECONNREFUSED'))),
    fails('ERR_UPSTREAM_NETWORK', 'network', true),
  ],
  [
    'E6 failing the TLS handshake',
    () => sendFails('analytics', (i) => i.replyWithError(nodeError('altnames', 'ERR_TLS_CERT_ALTNAME_INVALID'))),
    fails('ERR_UPSTREAM_NETWORK', 'network', false),
  ],
  [
    'E6 timing out',
    () => sendFails('analytics', (i) => i.replyWithError(new undiciErrors.HeadersTimeoutError())),
    fails('ERR_UPSTREAM_TIMEOUT', 'timeout', true),
  ],
  [
    'E6 answering over UPSTREAM_MAX_BODY',
    () => sendFails('analytics', (i) => i.replyWithError(new undiciErrors.ResponseExceededMaxSizeError())),
    fails('ERR_UPSTREAM_BODY', 'response_too_large', false),
  ],
  [
    'E6 answering over UPSTREAM_MAX_BODY once decoded',
    () => sendFails('analytics', (i) => i.reply(200, gzipOf(4096), { headers: { 'content-encoding': 'gzip' } }), { maxBodyBytes: 1024 }),
    fails('ERR_UPSTREAM_BODY', 'response_too_large', false),
  ],
  [
    'E6 answering in a coding the client does not decode',
    () => sendFails('analytics', (i) => i.reply(200, '{}', { headers: { 'content-encoding': 'zstd' } })),
    fails('ERR_UPSTREAM_BODY', 'content_encoding', false),
  ],
  [
    'E6 answering bytes not valid in their coding',
    () => sendFails('analytics', (i) => i.reply(200, Buffer.from('not gzip at all'), { headers: { 'content-encoding': 'gzip' } })),
    fails('ERR_UPSTREAM_BODY', 'content_encoding', true),
  ],
  [
    'E0 unreachable, one attempt',
    () => sendFails('token', (i) => i.replyWithError(nodeError('connect ECONNREFUSED', 'ECONNREFUSED'))),
    fails('ERR_UPSTREAM_NETWORK', 'network', true),
  ],
  [
    'E0 timing out, one attempt',
    () => sendFails('token', (i) => i.replyWithError(new undiciErrors.HeadersTimeoutError())),
    fails('ERR_UPSTREAM_TIMEOUT', 'timeout', true),
  ],
  [
    'E0 answering over the cap, one attempt',
    () => sendFails('token', (i) => i.replyWithError(new undiciErrors.ResponseExceededMaxSizeError())),
    fails('ERR_UPSTREAM_BODY', 'response_too_large', false),
  ],
  [
    'a request aborted',
    () => sendFails('analytics', (i) => i.reply(200, '{}'), { signal: AbortSignal.abort() }),
    fails('ERR_ABORTED', 'aborted', false, 'warn'),
  ],

  // Statuses and bodies, as the clients judge them.
  ['E6 answering 503', () => statusError('analytics', E6_URL, response(503), 0), fails('ERR_UPSTREAM_HTTP', 'http_503', true)],
  ['E7 answering 404', () => statusError('prometheus', E6_URL, response(404), 0), fails('ERR_UPSTREAM_HTTP', 'http_404', false)],
  [
    'E6 answering HTML',
    () => thrown(() => decodePage({ headers: { 'content-type': 'text/html' }, body: '<html>' }, 1, E6_URL)),
    fails('ERR_UPSTREAM_BODY', 'content_type', true),
  ],
  [
    'E6 answering cut-off JSON',
    () => thrown(() => decodePage({ headers: JSON_HEADERS, body: '{"pageNumber":1,' }, 1, E6_URL)),
    fails('ERR_UPSTREAM_BODY', 'invalid_json', true),
  ],
  ['E6 answering another shape', () => thrown(() => parsePage({ rows: [] }, 1, E6_URL)), fails('ERR_UPSTREAM_BODY', 'invalid_envelope', true)],
  [
    'E6 answering a page contradicting itself',
    () => thrown(() => parsePage({ pageNumber: 2, pageSize: 10, totalRecords: 1, totalPages: 1, data: [] }, 1, E6_URL)),
    fails('ERR_UPSTREAM_BODY', 'inconsistent_page', true),
  ],
  [
    'an instant over UPSTREAM_MAX_BODY at one record a page',
    () =>
      thrown(() => readAtSmallerPages(1, async () => undefined, { instant: { start: 0, end: 1000 }, window: { start: 0, end: 3_600_000 }, cause: undefined })),
    fails('ERR_UPSTREAM_BODY', 'response_too_large', false),
  ],
  [
    "E7 over the scrape's budget",
    () => new UpstreamTimeoutError('prometheus', "E7 did not answer within the scrape's budget of 10 ms", { cause: new AbortedError() }),
    fails('ERR_UPSTREAM_TIMEOUT', 'timeout', false),
  ],
  // Survived by serve (the source reads 0), so a warning; an E7 error all the same for `check`.
  ['E7 over sample_limit', () => new UpstreamLimitError('sample_limit', 200_000, 'E7: over sample_limit'), fails('ERR_UPSTREAM_LIMIT', 'limit', false, 'warn')],
  [
    'E7 over label_value_length_limit',
    () => new UpstreamLimitError('label_value_length_limit', 2048, 'x'),
    fails('ERR_UPSTREAM_LIMIT', 'limit', false, 'warn'),
  ],

  // The sync's own.
  ['the reads of an instant disagreeing', () => new InconsistentWindowError('reads disagreed'), fails('ERR_INCONSISTENT_WINDOW', 'inconsistent_window', false)],
  [
    "an instant's pages copying page 1 at two page sizes",
    () => {
      const page = (data: { id: number }[]) => ({ pageNumber: 1, pageSize: data.length, totalRecords: 4, totalPages: 2, data });
      const read = (pages: { id: number }[][]) => ({ total: 4, pages: pages.map(page), keys: new Map(pages.flat().map((r) => [JSON.stringify(r), 1])) });
      const again = async () => read([[{ id: 1 }], [{ id: 1 }], [{ id: 1 }], [{ id: 1 }]]);
      return thrown(() =>
        withoutCopies(
          read([
            [{ id: 1 }, { id: 2 }],
            [{ id: 1 }, { id: 2 }],
          ]),
          again,
          { range: { start: 0, end: 0 }, window: { start: 0, end: 3_600_000 } },
        ),
      );
    },
    fails('ERR_PAGES_REPEAT', 'pages_repeat', false),
  ],
  ['a paging limit at an instant', () => new PagingLimitError('refused from offset 2000'), fails('ERR_PAGING_LIMIT', 'paging_limit', false)],
  ['a window over its request bound', () => new WindowBudgetError('spent 112 requests'), fails('ERR_WINDOW_BUDGET', 'window_budget', false)],
  ['a cancelled operation', () => new AbortedError('stopped'), fails('ERR_ABORTED', 'aborted', false, 'warn')],
  // What was in flight when it was cancelled does not make it another failure.
  ['a cancelled operation over a lost connection', () => new AbortedError('stopped', { cause: terminated }), fails('ERR_ABORTED', 'aborted', false, 'warn')],

  // The database.
  [
    'DATA_DIR held by another process',
    () => new DataDirLockedError('/data', { pid: 7, command: 'serve', since: '2026-01-01T00:00:00Z' }),
    fails('ERR_DATA_DIR_LOCKED', 'database', false),
  ],
  ['DATA_DIR not openable', () => new DatabaseOpenError('cannot create /data (EROFS)'), fails('ERR_DATABASE', 'database', false)],
  ['a database operation failing', () => new DatabaseError('COPY stored 3 rows of 4'), fails('ERR_DATABASE', 'database', false)],
  [
    'a migration pending (MIGRATE=off, or a command that reads)',
    () => new PendingMigrationsError('analytics', ['20261129000000000_footprint']),
    fails('ERR_DATABASE', 'database', false),
  ],
  [
    'a read-only database',
    () => new ReadOnlyDatabaseError('the database is read-only (default_transaction_read_only / hot standby): … [25006]'),
    fails('ERR_DATABASE', 'database', false),
  ],
  [
    'a 25006 met by a statement (ours)',
    () => databaseError('recording the run', pgError('cannot execute INSERT in a read-only transaction', '25006')),
    fails('ERR_DATABASE', 'database', false),
  ],
  // A refusal at start, not an outage: serve does not wait for it to pass.
  [
    'DATABASE_URL behind transaction pooling',
    () => new SharedServersError('127.0.0.1:6432/analytics is reached through a pooler in transaction pooling mode'),
    fails('ERR_DATABASE', 'database', false),
  ],
  ['a query failing (ours)', () => databaseError('reading the watermark', pgError('syntax error', '42601')), fails('ERR_DATABASE', 'database', false)],
  ['the database unreachable (ours)', () => databaseError('migrating schema analytics', refused), unavailable('ERR_DATABASE', false)],
  ['ECONNREFUSED', () => refused, unavailable('ECONNREFUSED')],
  ['ECONNRESET', () => reset, unavailable('ECONNRESET')],
  ['Connection terminated unexpectedly', () => terminated, unavailable(undefined)],
  ['a connect timeout', () => connectTimeout, unavailable(undefined)],
  ['57P01 admin shutdown', () => adminShutdown, unavailable('57P01')],
  // The FATAL behind pg's "not queryable", named (src/db/session-end.ts): a setting, not an outage…
  [
    '25P03 idle_in_transaction_session_timeout',
    () =>
      sessionEnded(
        new Error('Client has encountered a connection error and is not queryable'),
        pgError('terminating connection due to idle-in-transaction timeout', '25P03'),
      ),
    fails('ERR_DATABASE', 'database', false),
  ],
  // …but a shutdown still is one.
  ['57P01 named', () => sessionEnded(new Error('Connection terminated unexpectedly'), adminShutdown), unavailable('ERR_DATABASE', false)],
  ['57P03 starting up', () => pgError('the database system is starting up', '57P03'), unavailable('57P03')],
  ['08006 connection failure', () => pgError('connection failure', '08006'), unavailable('08006')],
  ['an Error over a lost connection', () => new Error('sync run failed', { cause: terminated }), unavailable(undefined)],
  ['42601 syntax error', () => pgError('syntax error at or near "selec"', '42601'), fails('42601', 'database')],
  ['55P03 lock timeout', () => pgError('canceling statement due to lock timeout', '55P03'), fails('55P03', 'database')],
  ['22P05 untranslatable character', () => Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' }), fails('22P05', 'database')],

  // Anything else.
  ['Error', () => new Error('boom'), fails(undefined, 'other')],
  ['TypeError', () => new TypeError('x is not a function'), fails(undefined, 'other')],
  // A class is never matched by its name.
  ['an Error named as ours', () => Object.assign(new Error('window changed'), { name: 'InconsistentWindowError' }), fails(undefined, 'other')],
  // A platform host refusing connections is not the database, though its socket says ECONNREFUSED too.
  [
    'an Error over an upstream failure',
    async () => new Error('x', { cause: await sendFails('analytics', (i) => i.replyWithError(refused)) }),
    fails(undefined, 'other'),
  ],
  ['a string', () => 'a string', fails(undefined, 'other')],
  ['undefined', () => undefined, fails(undefined, 'other')],
  ['null', () => null, fails(undefined, 'other')],
];

/** The classes src/errors.ts exports that nothing throws as they are: bases of the others. */
const BASES = ['ExporterError', 'UpstreamError', 'TokenError'];

describe('every failure', () => {
  it.each(FAILURES)('%s', async (_name, build, expected) => {
    const err = await build();
    const failure = classifyFailure(err);
    const own = err instanceof errors.ExporterError ? { retryable: err.retryable } : {};
    expect({
      code: (err as { code?: unknown } | null | undefined)?.code,
      reason: failure.reason,
      exitStatus: failure.exitStatus,
      level: failure.level,
      ...own,
      ...(isDatabaseUnavailable(err) ? { unavailable: true } : {}),
    }).toEqual(expected);
    expect(failureReason(err)).toBe(expected.reason);
  });

  it('includes one of every class errors.ts exports but the bases', async () => {
    const thrownClasses = new Set<unknown>();
    for (const [, build] of FAILURES) {
      const err = await build();
      if (err instanceof Error) thrownClasses.add(err.constructor);
    }
    const classes = Object.entries(errors as Record<string, unknown>).filter(
      ([, value]) => typeof value === 'function' && (value as { prototype?: unknown }).prototype instanceof Error,
    );
    expect(classes.length).toBeGreaterThanOrEqual(12);
    for (const [name, cls] of classes) {
      if (BASES.includes(name)) continue;
      expect(thrownClasses.has(cls), `no failure of class ${name}`).toBe(true);
    }
  });
});

describe('databaseError', () => {
  it('names a read-only database for SQLSTATE 25006, and only for it', () => {
    const readOnly = databaseError('migrating schema analytics', pgError('cannot execute CREATE SCHEMA in a read-only transaction', '25006'));
    expect(readOnly).toBeInstanceOf(ReadOnlyDatabaseError);
    expect(readOnly.message).toBe(
      'the database is read-only (default_transaction_read_only / hot standby): migrating schema analytics: cannot execute CREATE SCHEMA in a read-only transaction [25006]',
    );
    const other = databaseError('migrating schema analytics', pgError('permission denied for database postgres', '42501'));
    expect(other).not.toBeInstanceOf(ReadOnlyDatabaseError);
    expect(other.message).toBe('migrating schema analytics: permission denied for database postgres [42501]');
  });
});

describe('one label per outage in sync_errors_total', () => {
  const failedRun = (error: Error): SyncResult => ({
    status: 'failed',
    runId: 1,
    range: { start: 0, end: 3_600_000 },
    windowsPlanned: 1,
    windows: 0,
    pages: 0,
    records: 0,
    quarantined: 0,
    watermark: undefined,
    durationSeconds: 1,
    error,
  });

  it.each([
    ['ECONNREFUSED', refused],
    ['Connection terminated unexpectedly', terminated],
    ['57P01 admin shutdown', adminShutdown],
  ])('counts a %s as database whether the run was recorded or not', async (_name, err) => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    const observer = metrics.syncObserver('a');
    observer.runFinished?.(failedRun(err));
    metrics.recordUnrecordedFailure('a', 1, err);
    const text = await metrics.registry.metrics();
    expect(text).toContain('analytics_exporter_sync_errors_total{source="a",reason="database"} 2');
    expect(text).not.toContain('reason="other"');
  });

  it('counts what stopped an unrecorded run under its own reason', async () => {
    const metrics = new ExporterMetrics({ processMetrics: false });
    metrics.syncObserver('a');
    metrics.recordUnrecordedFailure('a', 1, new TypeError('x is not a function'));
    expect(await metrics.registry.metrics()).toContain('analytics_exporter_sync_errors_total{source="a",reason="other"} 1');
  });
});
