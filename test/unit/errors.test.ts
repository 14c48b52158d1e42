/**
 * The failure table (src/failures.ts): every error class of src/errors.ts has a row, and every
 * row says the reason metrics count it under, the exit status a command ends with and the level it
 * is logged at. pg's and Node's own errors for a lost database connection are `database` wherever
 * they surface: as a run's error, before a run could be recorded, or when serve's health asks.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import * as errors from '../../src/errors.js';
import {
  AbortedError,
  ConfigError,
  DataDirLockedError,
  DatabaseError,
  DatabaseOpenError,
  ExporterError,
  InconsistentWindowError,
  InvalidArgumentError,
  TokenError,
  UpstreamError,
  UpstreamLimitError,
  WebConfigError,
} from '../../src/errors.js';
import { FAILURES, classifyFailure, failureReason, isDatabaseUnavailable, type FailureKind } from '../../src/failures.js';
import { databaseError } from '../../src/db/pool.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import type { SyncResult } from '../../src/sync/run/run.js';

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

type Row = { reason: string; exitStatus: number; level: 'error' | 'warn' };
const USAGE = { exitStatus: 2, level: 'error' } as const;
const FAILED = { exitStatus: 1, level: 'error' } as const;

/**
 * For every kind: errors of it, each with the reason, exit status and level expected, written out
 * rather than read from FAILURES, so a changed row fails here.
 */
const EXAMPLES: Record<FailureKind, Array<[name: string, err: unknown, expected: Row]>> = {
  config: [['ConfigError', new ConfigError('SYNC_SCHEDULE', 'SYNC_SCHEDULE must be a cron expression'), { reason: 'other', ...USAGE }]],
  invalid_argument: [['InvalidArgumentError', new InvalidArgumentError('--source x is not a configured source'), { reason: 'other', ...USAGE }]],
  web_config: [
    ['WebConfigError', new WebConfigError('tls_server_config.cert_file', 'web.yml: cannot read'), { reason: 'other', exitStatus: 2, level: 'warn' }],
  ],
  token: [
    ['TokenError', new TokenError('ERR_TOKEN_REQUEST', 'token request refused', { status: 503 }), { reason: 'token', ...FAILED }],
    ['TokenError with a refused socket', new TokenError('ERR_TOKEN_REQUEST', 'E0: ECONNREFUSED', { cause: refused }), { reason: 'token', ...FAILED }],
    ['TokenError response', new TokenError('ERR_TOKEN_RESPONSE', 'not a Bearer token'), { reason: 'token', ...FAILED }],
    // One attempt's fault, as the token client counts it.
    ['TokenError network', new TokenError('ERR_UPSTREAM_NETWORK', 'E0: ECONNREFUSED', { cause: refused }), { reason: 'network', ...FAILED }],
    ['TokenError timeout', new TokenError('ERR_UPSTREAM_TIMEOUT', 'E0: timed out'), { reason: 'timeout', ...FAILED }],
    ['TokenError of an unreadable secret file', new TokenError('ERR_TOKEN_REQUEST', 'x', { reason: 'secret_file' }), { reason: 'secret_file', ...FAILED }],
  ],
  upstream: [
    ['UpstreamError network', new UpstreamError('ERR_UPSTREAM_NETWORK', 'analytics', 'x'), { reason: 'network', ...FAILED }],
    // A platform host refusing connections is not the database, though its socket says ECONNREFUSED too.
    [
      'UpstreamError network, refused',
      new UpstreamError('ERR_UPSTREAM_NETWORK', 'analytics', 'E6: ECONNREFUSED', { cause: refused }),
      { reason: 'network', ...FAILED },
    ],
    ['UpstreamError timeout', new UpstreamError('ERR_UPSTREAM_TIMEOUT', 'prometheus', 'x'), { reason: 'timeout', ...FAILED }],
    ['UpstreamError 503', new UpstreamError('ERR_UPSTREAM_HTTP', 'analytics', 'x', { status: 503 }), { reason: 'http_503', ...FAILED }],
    ['UpstreamError body', new UpstreamError('ERR_UPSTREAM_BODY', 'analytics', 'x'), { reason: 'invalid_body', ...FAILED }],
    ['UpstreamError content type', new UpstreamError('ERR_UPSTREAM_BODY', 'analytics', 'x', { reason: 'content_type' }), { reason: 'content_type', ...FAILED }],
  ],
  upstream_limit: [
    // Survived by serve (the source reads 0), so a warning; an E7 error all the same for `check`.
    ['UpstreamLimitError', new UpstreamLimitError('sample_limit', 200_000, 'E7: over sample_limit'), { reason: 'limit', exitStatus: 1, level: 'warn' }],
    ['UpstreamLimitError label value', new UpstreamLimitError('label_value_length_limit', 2048, 'x'), { reason: 'limit', exitStatus: 1, level: 'warn' }],
  ],
  inconsistent_window: [['InconsistentWindowError', new InconsistentWindowError('reads disagreed'), { reason: 'inconsistent_window', ...FAILED }]],
  aborted: [
    ['AbortedError', new AbortedError('stopped'), { reason: 'aborted', exitStatus: 1, level: 'warn' }],
    // What was in flight when it was cancelled does not make it another failure.
    ['AbortedError over a lost connection', new AbortedError('stopped', { cause: terminated }), { reason: 'aborted', exitStatus: 1, level: 'warn' }],
  ],
  data_dir_locked: [
    ['DataDirLockedError', new DataDirLockedError('/data', { pid: 7, command: 'serve', since: '2026-01-01T00:00:00Z' }), { reason: 'database', ...FAILED }],
  ],
  database_unavailable: [
    ['ECONNREFUSED', refused, { reason: 'database', ...FAILED }],
    ['ECONNRESET', reset, { reason: 'database', ...FAILED }],
    ['Connection terminated unexpectedly', terminated, { reason: 'database', ...FAILED }],
    ['a connect timeout', connectTimeout, { reason: 'database', ...FAILED }],
    ['57P01 admin shutdown', adminShutdown, { reason: 'database', ...FAILED }],
    ['57P03 starting up', pgError('the database system is starting up', '57P03'), { reason: 'database', ...FAILED }],
    ['08006 connection failure', pgError('connection failure', '08006'), { reason: 'database', ...FAILED }],
    ['DatabaseError over ECONNREFUSED', databaseError('migrating schema analytics', refused), { reason: 'database', ...FAILED }],
    ['an Error over a lost connection', new Error('sync run failed', { cause: terminated }), { reason: 'database', ...FAILED }],
  ],
  database_open: [['DatabaseOpenError', new DatabaseOpenError('cannot create /data (EROFS)'), { reason: 'database', ...FAILED }]],
  database: [
    ['DatabaseError', new DatabaseError('COPY stored 3 rows of 4'), { reason: 'database', ...FAILED }],
    ['DatabaseError over a syntax error', databaseError('reading the watermark', pgError('syntax error', '42601')), { reason: 'database', ...FAILED }],
    ['42601 syntax error', pgError('syntax error at or near "selec"', '42601'), { reason: 'database', ...FAILED }],
    ['55P03 lock timeout', pgError('canceling statement due to lock timeout', '55P03'), { reason: 'database', ...FAILED }],
    ['22P05 untranslatable character', Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' }), { reason: 'database', ...FAILED }],
  ],
  exporter: [
    ['ExporterError', new ExporterError('ERR_UPSTREAM_TIMEOUT', 'x'), { reason: 'timeout', ...FAILED }],
    ['ExporterError of no reason', new ExporterError('ERR_WEB_CONFIG', 'x'), { reason: 'other', ...FAILED }],
  ],
  other: [
    ['Error', new Error('boom'), { reason: 'other', ...FAILED }],
    ['TypeError', new TypeError('x is not a function'), { reason: 'other', ...FAILED }],
    // A class is never matched by its name.
    ['an Error named as ours', Object.assign(new Error('window changed'), { name: 'InconsistentWindowError' }), { reason: 'other', ...FAILED }],
    [
      'an Error over an upstream failure',
      new Error('x', { cause: new UpstreamError('ERR_UPSTREAM_NETWORK', 'analytics', 'x', { cause: refused }) }),
      { reason: 'other', ...FAILED },
    ],
    ['a string', 'a string', { reason: 'other', ...FAILED }],
    ['undefined', undefined, { reason: 'other', ...FAILED }],
    ['null', null, { reason: 'other', ...FAILED }],
  ],
};

/** Every class src/errors.ts exports. */
const exportedClasses = Object.entries(errors as Record<string, unknown>).filter(
  (entry): entry is [string, abstract new (...args: never[]) => Error] =>
    typeof entry[1] === 'function' && (entry[1] as { prototype?: unknown }).prototype instanceof Error,
);

describe('the failure table', () => {
  it('has a row for every error class errors.ts exports, and every class in one row', () => {
    expect(exportedClasses.length).toBeGreaterThanOrEqual(11);
    const rowClasses = Object.values(FAILURES).flatMap((row) => (row.class === undefined ? [] : [row.class]));
    for (const [name, cls] of exportedClasses) expect(rowClasses, `${name} has no row in FAILURES`).toContain(cls);
    expect(new Set(rowClasses).size).toBe(rowClasses.length);
  });

  it('has examples for every row, and an instance of each row class among them', () => {
    expect(Object.keys(EXAMPLES).sort()).toEqual(Object.keys(FAILURES).sort());
    for (const [kind, row] of Object.entries(FAILURES)) {
      if (row.class === undefined) continue;
      const cls = row.class;
      expect(
        EXAMPLES[kind as FailureKind].some(([, err]) => err instanceof cls),
        `${kind}: no example of its class`,
      ).toBe(true);
    }
  });

  describe.each(Object.keys(FAILURES) as FailureKind[])('%s', (kind) => {
    it.each(EXAMPLES[kind])('%s', (_name, err, expected) => {
      expect(classifyFailure(err)).toEqual({ kind, ...expected });
      expect(failureReason(err)).toBe(expected.reason);
      expect(isDatabaseUnavailable(err)).toBe(kind === 'database_unavailable');
      // The row gives what the error does not override: the exit status and level always.
      expect({ exitStatus: FAILURES[kind].exitStatus, level: FAILURES[kind].level }).toEqual({ exitStatus: expected.exitStatus, level: expected.level });
    });
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
