/**
 * Upstream faults end to end: each fault of the table below is injected by the
 * simulator (over HTTP) in the middle of a sync into a real PostgreSQL, and each must give
 * - a typed error (class, code) whose message names the endpoint and what was wrong, never a secret;
 * - bounded retries: the faulted request is tried at most UPSTREAM_MAX_ATTEMPTS times;
 * - a clear log line (the run's failure line carries the error; one warning per retry);
 * - metrics: sync_errors_total{reason} and upstream_attempt_failures_total{endpoint,reason};
 * - no partial window: every window in the ledger holds exactly the simulator's records of it, and
 *   nothing outside the ledger is stored;
 * - and the next run, with the fault gone, leaves the exact dataset.
 * A transient form of each retryable fault (one use fewer than the attempts) is ridden out by the
 * retries, and the run leaves the exact dataset at once.
 */
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { migrate } from '../../src/db/migrate.js';
import { TokenError, UpstreamError, type FailureReason } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { silentLogger } from '../helpers/silent-logger.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { startSimulator, type FaultRequest, type Simulator, type SimulatorRequestEvent } from '@analytics-exporter/simulator';
import { runSync, type SyncResult } from '../../src/sync/run/run.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { abortableSleep } from '../../src/upstream/retry.js';
import { useAppPool, useTestDatabase } from '../helpers/db.js';
import { canonicalJson, expectExactDataset, expectedMultiset, syncSettings, watermarkOf } from '../helpers/sync.js';
import { pgDeps } from '../helpers/pg-deps.js';

const db = useTestDatabase();
const bed = useAppPool(db);
const closers = bed.closers;
let schemaCounter = 0;

/**
 * Recognisable, so a leak into a log line, a message or a metric is found by a plain search, and
 * random-looking, as real ones are: every 8 characters of a secret or token are masked wherever
 * they appear (src/redact.ts), so a word such as `upstream` in one would mask log messages.
 */
const CLIENT_SECRET = 'uf-7Qx9-k2Zr-secret';
const TOKEN_PREFIX = 'tok-uf-4Wq8-';
const MAX_ATTEMPTS = 3;

// Two days, 2400 records, 12h windows of ~600 records read in slices of at most 200: four windows.
const START = new Date('2026-10-30T00:00:00Z');
const END = new Date('2026-11-01T00:00:00Z');
const WINDOW_MS = 12 * 3_600_000;
const SYNC_ENV = {
  SYNC_START_DATE: START.toISOString(),
  SYNC_WINDOW: '12h',
  SYNC_PAGE_SIZE: '200',
  SYNC_CONCURRENCY: '2',
};
/**
 * A later slice of the second window (its startDate inside the window, after its first slice): a
 * fault here hits a window whose first slice may already be inserted in the open transaction. The
 * first such request is pinned, so every use of the fault hits that one request and its retries.
 */
function laterSliceOfSecondWindow(): (r: FaultRequest) => boolean {
  let pinned: string | undefined;
  return (r) => {
    const start = r.url.searchParams.get('startDate') ?? '';
    if (!(start > '2026-10-30T12:00:00Z' && start < '2026-10-31T00:00:00Z')) return false;
    pinned ??= r.url.search;
    return pinned === r.url.search;
  };
}

/** One sync setup: a simulator with its identity host on a port of its own, a fresh schema, metrics, captured logs. */
interface Harness {
  sim: Simulator;
  schema: string;
  metrics: ExporterMetrics;
  /** Every log line written, parsed. */
  logs: Record<string, unknown>[];
  /** Every request the simulator saw (reported when its response ended). */
  requests: SimulatorRequestEvent[];
  /** Called once after the first window of a run is committed. */
  onFirstCommit: (() => void) | undefined;
  /** Called before each retry wait of any request (E0, E6), after the failed attempt. */
  beforeRetry: (() => Promise<void>) | undefined;
  /** Failed E0 attempts so far (connection refused leaves no trace at the simulator). */
  tokenFailures: number;
}

async function harness(): Promise<Harness> {
  const requests: SimulatorRequestEvent[] = [];
  const sim = await startSimulator({
    port: 0,
    records: 2400,
    start: START,
    end: END,
    clientId: 'faults-client',
    clientSecret: CLIENT_SECRET,
    tokenPrefix: TOKEN_PREFIX,
    separateAuth: true,
    onRequest: (event) => requests.push(event),
  });
  closers.push(() => sim.close());
  const schema = `faults_${++schemaCounter}`;
  await migrate(bed.pool, schema, silentLogger);
  return {
    sim,
    schema,
    metrics: new ExporterMetrics({ processMetrics: false }),
    logs: [],
    requests,
    onFirstCommit: undefined,
    beforeRetry: undefined,
    tokenFailures: 0,
  };
}

/** One run against the harness, with a client built as `serve` builds it (metrics observer, a pino logger). */
async function run(h: Harness, env: Record<string, string> = {}): Promise<Extract<SyncResult, { runId: number }>> {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') h.logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const log = createLogger('info', { destination: sink });
  const config = loadConfig({
    STATISTICS_URL: h.sim.url,
    AUTH_URL: h.sim.authUrl,
    CLIENT_ID: 'faults-client',
    CLIENT_SECRET,
    UPSTREAM_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    ...SYNC_ENV,
    ...env,
  });
  const observer = h.metrics.clientObserver('default');
  const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, {
    log,
    observer: {
      ...observer,
      onAttemptFailed: (event) => {
        if (event.endpoint === 'token') h.tokenFailures++;
        observer.onAttemptFailed?.(event);
      },
    },
    // No backoff (full jitter at 0), but a hook between attempts.
    random: () => 0,
    sleep: async (ms, signal) => {
      await h.beforeRetry?.();
      await abortableSleep(ms, signal);
    },
  });
  closers.push(() => client.close());
  const metricsObserver = h.metrics.syncObserver();
  let commits = 0;
  const result = await runSync(
    pgDeps({
      pool: bed.pool,
      client,
      config: config.sources[0]!.sync,
      tables: config.tables,
      schema: h.schema,
      log,
      observer: {
        ...metricsObserver,
        windowCommitted: (w) => {
          metricsObserver.windowCommitted?.(w);
          if (++commits === 1) h.onFirstCommit?.();
        },
      },
    }),
    // A fixed "now" an hour after the data, so the run's range is [START or watermark − lookback, END).
    { to: END, now: () => END.getTime() + 3_600_000 },
  );
  if (result.status === 'locked') throw new Error('unexpectedly locked');
  return result;
}

/** Sum of a counter's samples whose labels include `labels`. */
async function counter(h: Harness, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = h.metrics.registry.getSingleMetric(`analytics_exporter_${name}`);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value)).reduce((sum, v) => sum + v.value, 0);
}

/**
 * Asserts that every window in the ledger holds exactly the simulator's records of it, that no
 * record lies outside a committed window, and that the watermark is the end of the committed run
 * of windows from START. @returns the committed windows.
 */
async function expectOnlyExactWindows(h: Harness): Promise<{ start: Date; end: Date }[]> {
  const { rows: ledger } = await bed.pool.query<{ start: Date; end: Date; recordCount: number }>(
    `select window_start as "start", window_end as "end", record_count::int as "recordCount" from "${h.schema}".sync_windows order by window_start`,
  );
  for (const w of ledger) {
    const { rows } = await bed.pool.query<{ payload: unknown }>(`select payload from "${h.schema}".records where window_start = $1`, [w.start]);
    const stored = rows.map((r) => canonicalJson(r.payload)).sort();
    const expected = expectedMultiset(h.sim, w.start, w.end);
    expect(stored.length, `records of window ${w.start.toISOString()}`).toBe(expected.length);
    expect(stored.join('\n') === expected.join('\n'), `window ${w.start.toISOString()} holds exactly its records`).toBe(true);
    expect(w.recordCount).toBe(expected.length);
  }
  const { rows: outside } = await bed.pool.query<{ n: number }>(
    `select count(*)::int as n from "${h.schema}".records r
      where not exists (select 1 from "${h.schema}".sync_windows w where w.source = r.source and w.window_start = r.window_start)`,
  );
  expect(outside[0]!.n, 'records outside committed windows').toBe(0);
  const watermark = await watermarkOf(bed.pool, h.schema);
  expect(watermark?.toISOString() ?? null).toBe(ledger.length === 0 ? null : ledger[ledger.length - 1]!.end.toISOString());
  return ledger.map((w) => ({ start: w.start, end: w.end }));
}

/** Asserts that no captured log line, no metric and no error text carries the client secret or a token. */
async function expectNoSecrets(h: Harness, ...texts: string[]): Promise<void> {
  const all = [JSON.stringify(h.logs), await h.metrics.registry.metrics(), ...texts].join('\n');
  expect(all).not.toContain(CLIENT_SECRET);
  expect(all).not.toContain(TOKEN_PREFIX);
}

/** E6 requests per page (path and query), to bound the attempts of each. */
function attemptsPerPage(h: Harness): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of h.requests) if (r.endpoint === 'analytics') counts.set(r.path, (counts.get(r.path) ?? 0) + 1);
  return counts;
}

interface FaultCase {
  name: string;
  env?: Record<string, string>;
  /** Arms the fault for `uses` attempts, before the run or once its first window is committed. */
  arm(h: Harness, uses: number): void | Promise<void>;
  /** Removes what is left of the fault before the next run (queued faults are used up by then). */
  heal?(h: Harness): Promise<void>;
  errorClass: abstract new (...args: never[]) => Error;
  code: string;
  status?: number;
  message: RegExp;
  /** `sync_errors_total{reason}` of the failed run. */
  syncReason: FailureReason;
  /** `upstream_attempt_failures_total{endpoint, reason}` of the faulted attempts. */
  attempt: { endpoint: 'analytics' | 'token'; reason: string };
  /** Whether the client retries it (then a transient form is tested too). */
  retryable: boolean;
  /** How many requests got the fault, as far as can be seen. */
  faulted(h: Harness): number;
}

const e6Fault = (fault: Parameters<Simulator['queueFault']>[0]) => ({
  arm: (h: Harness, uses: number) => h.sim.queueFault(fault, uses, 'analytics', laterSliceOfSecondWindow()),
  faulted: (h: Harness) => h.requests.filter((r) => r.fault === fault).length,
});
const E6 = String.raw`^E6 http://127\.0\.0\.1:\d+/analytics: `;
const E0 = String.raw`E0 http://127\.0\.0\.1:\d+/connect/token: `;

const CASES: FaultCase[] = [
  {
    name: 'connection reset in the middle of a body',
    ...e6Fault('reset-mid-body'),
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_NETWORK',
    message: new RegExp(`${E6}connection closed in the middle of the body \\(`),
    syncReason: 'network',
    attempt: { endpoint: 'analytics', reason: 'network' },
    retryable: true,
  },
  {
    name: 'truncated JSON',
    ...e6Fault('malformed-json'),
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_BODY',
    message: new RegExp(`${E6}body is not valid JSON \\(`),
    syncReason: 'invalid_json',
    attempt: { endpoint: 'analytics', reason: 'invalid_json' },
    retryable: true,
  },
  {
    name: 'wrong content type',
    ...e6Fault('wrong-content-type'),
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_BODY',
    message: new RegExp(`${E6}content type text/html, expected application/json: <!DOCTYPE html>`),
    syncReason: 'content_type',
    attempt: { endpoint: 'analytics', reason: 'content_type' },
    retryable: true,
  },
  {
    name: 'totalPages inconsistent with totalRecords',
    ...e6Fault('inconsistent-total-pages'),
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_BODY',
    message: new RegExp(`${E6}page 1 is inconsistent: totalPages \\d+ does not match totalRecords \\d+ at pageSize 200`),
    syncReason: 'inconsistent_page',
    attempt: { endpoint: 'analytics', reason: 'inconsistent_page' },
    retryable: true,
  },
  {
    name: 'a page longer than pageSize',
    ...e6Fault('oversized-page'),
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_BODY',
    message: new RegExp(`${E6}page 1 is inconsistent: 2\\d\\d records, more than pageSize 200`),
    syncReason: 'inconsistent_page',
    attempt: { endpoint: 'analytics', reason: 'inconsistent_page' },
    retryable: true,
  },
  {
    name: 'a slow body that passes the headers timeout and stalls beyond the body timeout',
    env: { UPSTREAM_TIMEOUT: '1s' },
    arm: (h, uses) => {
      h.sim.faults.stallMs = 60_000; // far beyond the timeout; the stall ends when the client gives up on the socket
      h.sim.queueFault('slow-body', uses, 'analytics', laterSliceOfSecondWindow());
    },
    faulted: (h) => h.requests.filter((r) => r.fault === 'slow-body').length,
    errorClass: UpstreamError,
    code: 'ERR_UPSTREAM_TIMEOUT',
    message: new RegExp(`${E6}timed out, the body stalled: no data within 1000 ms \\(UPSTREAM_TIMEOUT\\) \\(UND_ERR_BODY_TIMEOUT\\)`),
    syncReason: 'timeout',
    attempt: { endpoint: 'analytics', reason: 'timeout' },
    retryable: true,
  },
  {
    name: 'the token endpoint down (connection refused)',
    // Once window 1 is in, the token is revoked and the identity host stops listening: the 401
    // makes the client renew, and the renewal meets a closed port.
    arm: (h, uses) => {
      h.onFirstCommit = () => {
        h.sim.revokeAllTokens();
        void h.sim.setAuthDown(true);
      };
      if (uses < MAX_ATTEMPTS) {
        h.beforeRetry = async () => {
          if (h.tokenFailures >= uses) await h.sim.setAuthDown(false);
        };
      }
    },
    heal: (h) => h.sim.setAuthDown(false),
    faulted: (h) => h.tokenFailures,
    errorClass: TokenError,
    code: 'ERR_TOKEN_REQUEST',
    message: new RegExp(`^token request failed: ${E0}ECONNREFUSED`),
    syncReason: 'token',
    attempt: { endpoint: 'token', reason: 'network' },
    retryable: true,
  },
  {
    name: 'the token endpoint answering 503',
    arm: (h, uses) => {
      h.onFirstCommit = () => {
        h.sim.revokeAllTokens();
        h.sim.queueFault({ status: 503 }, uses, 'token');
      };
    },
    faulted: (h) => h.requests.filter((r) => r.endpoint === 'token' && r.fault === 'status 503').length,
    errorClass: TokenError,
    code: 'ERR_TOKEN_REQUEST',
    status: 503,
    message: new RegExp(`^token request refused: ${E0}HTTP 503: temporarily_unavailable \\(simulated fault\\)`),
    syncReason: 'token',
    attempt: { endpoint: 'token', reason: 'http_503' },
    retryable: true,
  },
];

describe('upstream faults in the middle of a sync (simulator over HTTP, real PostgreSQL)', () => {
  it.each(CASES)('$name: typed error, bounded retries, a log line, a metric, no partial window; the next run is exact', async (c) => {
    const h = await harness();
    const uses = c.retryable ? MAX_ATTEMPTS : 1;
    await c.arm(h, uses);

    const failed = await run(h, c.env);

    // The typed error, naming the endpoint and the fault.
    expect(failed.status).toBe('failed');
    const error = failed.error!;
    expect(error).toBeInstanceOf(c.errorClass);
    expect(error).toMatchObject({ code: c.code, ...(c.status !== undefined ? { status: c.status } : {}) });
    expect(error.message).toMatch(c.message);

    // Bounded retries: the faulted request was tried exactly as often as allowed (once if not retryable), no page more often.
    await vi.waitFor(() => expect(c.faulted(h)).toBe(uses));
    for (const [path, n] of attemptsPerPage(h)) expect(n, path).toBeLessThanOrEqual(MAX_ATTEMPTS);
    // Token requests sent (refused ones included): the first, plus one bounded sequence when renewal fails.
    expect(await counter(h, 'token_requests_total')).toBe(c.attempt.endpoint === 'token' ? 1 + uses : 1);

    // A clear log line: the run's failure, carrying the error; one warning per retry.
    const failure = h.logs.find((l) => l.msg === 'sync run failed; committed windows are kept, the next run completes the data');
    expect(failure, 'the failure line').toBeDefined();
    expect(failure).toMatchObject({ level: 'error', status: 'failed', runId: failed.runId });
    expect(failure!.err).toMatchObject({ type: error.constructor.name, code: c.code, message: expect.stringMatching(c.message) });
    expect(failure!.err).not.toHaveProperty('stack');
    // One warning per retry, of the same shape for the token endpoint (E0) and E6.
    const retryLines = h.logs.filter((l) => l.msg === 'upstream request failed; retrying' && l.endpoint === c.attempt.endpoint);
    expect(retryLines).toHaveLength(uses - 1);
    for (const l of retryLines) {
      expect(l).toMatchObject({
        level: 'warn',
        reason: c.attempt.reason,
        maxAttempts: MAX_ATTEMPTS,
        delayMs: expect.any(Number),
        err: { type: expect.any(String) },
      });
      expect(l).toHaveProperty('status');
    }
    expect(retryLines.map((l) => l.attempt)).toEqual(Array.from({ length: uses - 1 }, (_, i) => i + 1));

    // Metrics: the run's failure by reason, every faulted attempt by endpoint and reason.
    expect(await counter(h, 'sync_failures_total')).toBe(1);
    expect(await counter(h, 'sync_errors_total', { reason: c.syncReason })).toBe(1);
    expect(await counter(h, 'upstream_attempt_failures_total', c.attempt)).toBe(uses);
    if (c.attempt.endpoint === 'token') {
      expect(await counter(h, 'upstream_attempt_failures_total', { endpoint: 'analytics', reason: 'token' })).toBeGreaterThanOrEqual(1);
    }

    // No partial window: the windows before the fault are committed and exact, the faulted one is not there.
    const committed = await expectOnlyExactWindows(h);
    expect(committed.length).toBe(failed.windows);
    expect(committed.length).toBeGreaterThanOrEqual(1);
    expect(committed.length).toBeLessThan(failed.windowsPlanned);
    // E6 faults aim at the second window: exactly the first is committed.
    if (c.attempt.endpoint === 'analytics') expect(committed.map((w) => w.start.toISOString())).toEqual([START.toISOString()]);
    const recorded = await bed.pool.query<{ status: string; error: string }>(`select status, error from "${h.schema}".sync_runs where id = $1`, [failed.runId]);
    expect(recorded.rows[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(new RegExp(c.message.source.replace(/^\^/, ''))) });
    await expectNoSecrets(h, error.message, String(recorded.rows[0]!.error));

    // The fault gone, the next run completes the data exactly.
    await c.heal?.(h);
    expect(h.sim.pendingFaults()).toBe(0);
    h.onFirstCommit = undefined;
    h.beforeRetry = undefined;
    const next = await run(h, c.env);
    expect(next.status, next.error?.message).toBe('succeeded');
    expect(await expectExactDataset(bed.pool, h.schema, h.sim, START, END)).toBe(2400);
    expect((await watermarkOf(bed.pool, h.schema))?.toISOString()).toBe(END.toISOString());
    await expectOnlyExactWindows(h);
    expect(await counter(h, 'sync_failures_total')).toBe(1);
  });

  it.each(CASES.filter((c) => c.retryable))('$name, once fewer than UPSTREAM_MAX_ATTEMPTS: ridden out by the retries, the run exact', async (c) => {
    const h = await harness();
    const uses = MAX_ATTEMPTS - 1;
    await c.arm(h, uses);

    const result = await run(h, c.env);

    expect(result.status, result.error?.message).toBe('succeeded');
    await vi.waitFor(() => expect(c.faulted(h)).toBe(uses));
    expect(h.sim.pendingFaults()).toBe(0);
    expect(await expectExactDataset(bed.pool, h.schema, h.sim, START, END)).toBe(2400);
    expect((await watermarkOf(bed.pool, h.schema))?.toISOString()).toBe(END.toISOString());
    expect((await expectOnlyExactWindows(h)).length).toBe(Math.round((END.getTime() - START.getTime()) / WINDOW_MS));
    // Seen in the metrics and the log although the run succeeded.
    expect(await counter(h, 'upstream_attempt_failures_total', c.attempt)).toBe(uses);
    expect(await counter(h, 'sync_failures_total')).toBe(0);
    const retryLines = h.logs.filter((l) => l.msg === 'upstream request failed; retrying' && l.endpoint === c.attempt.endpoint);
    expect(retryLines).toHaveLength(uses);
    await expectNoSecrets(h);
  });

  it('an empty page where records were promised, fewer times than SYNC_WINDOW_ATTEMPTS: the reader asks again (the client passes it: issue 39), the run exact', async () => {
    const h = await harness();
    const fault = e6Fault('empty-page');
    fault.arm(h, 2);
    const result = await run(h);
    expect(result.status, result.error?.message).toBe('succeeded');
    expect(result).not.toHaveProperty('short');
    expect(fault.faulted(h)).toBe(2);
    expect(h.sim.pendingFaults()).toBe(0);
    expect(await expectExactDataset(bed.pool, h.schema, h.sim, START, END)).toBe(2400);
  });

  it('a record holding \\u0000, which jsonb cannot store, goes whole into records_quarantine; the rest of its window commits; a re-load replaces it', async () => {
    const h = await harness();
    h.sim.queueFault('nul-in-record', 1, 'analytics', laterSliceOfSecondWindow());
    const result = await run(h);
    expect(result.status, result.error?.message).toBe('succeeded');
    expect(h.requests.filter((r) => r.fault === 'nul-in-record')).toHaveLength(1);

    // The record as E6 sent it, exactly, with where and why; every other record of its window is stored.
    const { rows: quarantined } = await bed.pool.query<{ payloadText: string; jsonPath: string; reason: string; windowStart: Date }>(
      `select payload_text as "payloadText", json_path as "jsonPath", reason, window_start as "windowStart" from "${h.schema}".records_quarantine`,
    );
    expect(quarantined).toHaveLength(1);
    const q = quarantined[0]!;
    expect(q).toMatchObject({ jsonPath: '$.customerName', reason: expect.stringContaining('U+0000') });
    expect(q.windowStart.toISOString()).toBe('2026-10-30T12:00:00.000Z');
    expect(q.payloadText).toContain('\\u0000');
    const original = JSON.parse(q.payloadText) as Record<string, unknown>;
    const asSent = canonicalJson({ ...original, customerName: String(original.customerName).replace(/\u0000$/, '') });
    const expectedWindow = expectedMultiset(h.sim, new Date('2026-10-30T12:00:00Z'), new Date('2026-10-31T00:00:00Z'));
    expect(expectedWindow).toContain(asSent);
    const { rows: stored } = await bed.pool.query<{ payload: unknown }>(
      `select payload from "${h.schema}".records where window_start = '2026-10-30T12:00:00Z'`,
    );
    const rest = [...expectedWindow];
    rest.splice(rest.indexOf(asSent), 1);
    expect(stored.map((r) => canonicalJson(r.payload)).sort()).toEqual(rest);
    expect(await counter(h, 'sync_records_quarantined_total')).toBe(1);
    expect(await counter(h, 'sync_records_total')).toBe(2399);
    const warning = h.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('E6 returned records PostgreSQL cannot store'));
    expect(warning).toMatchObject({ level: 'warn', quarantined: 1 });
    expect((await watermarkOf(bed.pool, h.schema))?.toISOString()).toBe(END.toISOString());

    // E6 now sends the record intact: re-loading the window under SYNC_SHRINK=replace replaces its
    // quarantined row like its records (keep, the default, would keep the text it no longer sends).
    const client = AnalyticsClient.fromConfig(
      loadConfig({ STATISTICS_URL: h.sim.url, AUTH_URL: h.sim.authUrl, CLIENT_ID: 'faults-client', CLIENT_SECRET, ...SYNC_ENV }).sources[0]!.upstream!,
      { log: silentLogger },
    );
    closers.push(() => client.close());
    const reload = await runSync(
      pgDeps({ pool: bed.pool, client, ...syncSettings({ ...SYNC_ENV, SYNC_SHRINK: 'replace' }), schema: h.schema, log: silentLogger }),
      { from: new Date('2026-10-30T12:00:00Z'), to: new Date('2026-10-31T00:00:00Z'), now: () => END.getTime() + 3_600_000 },
    );
    expect(reload.status).toBe('succeeded');
    expect((await bed.pool.query(`select 1 from "${h.schema}".records_quarantine`)).rowCount).toBe(0);
    expect(await expectExactDataset(bed.pool, h.schema, h.sim, START, END)).toBe(2400);
  });
});
