/**
 * A host clock off the API's (issue 39): `sync` runs as a child process under libfaketime, 2 h ahead
 * of or behind an E6 that runs in this process on the true clock (a test-only server, not the
 * simulator: its only clock is its `Date` header, which node's http server writes). Records that
 * arrive just before the API's now are loaded by the next run, the last 2 h are loaded at once, and
 * the skew is logged (API clock minus local clock: about −7200 s for a host 2 h ahead).
 *
 * libfaketime and node: `faketime -f +2h` preloads libfaketime with FAKETIME=+2h, a relative offset
 * every CLOCK_REALTIME read (Date.now, new Date) gets. DONT_FAKE_MONOTONIC=1 leaves CLOCK_MONOTONIC
 * alone (libuv's timers, performance.now, undici's and pg's timeouts): faked, it reads as a date.
 * FAKETIME_NO_CACHE is not needed: the offset is fixed for the child's life.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { ExporterMetrics } from '../../src/metrics/registry.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { CLI_PATH, runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { captureLog } from '../helpers/log-capture.js';

const db = useTestDatabase();
const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

interface E6Record {
  id: number;
  timestamp: string;
}

/**
 * E0, E6 and E7 on the true clock: records by `startDate` ≤ timestamp ≤ `toDate`, in time then id
 * order, offset paging. `date`: the `Date` header node writes (`true`), none, or one `offsetMs` off.
 */
async function startUpstream(date: true | 'none' | { offsetMs: number } = true): Promise<{ url: string; records: E6Record[]; close: () => Promise<void> }> {
  const records: E6Record[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (date === 'none') res.sendDate = false;
    else if (date !== true) res.setHeader('date', new Date(Date.now() + date.offsetMs).toUTCString());
    res.setHeader('content-type', 'application/json');
    if (url.pathname === '/analytics/prometheus') {
      res.setHeader('content-type', 'text/plain; version=0.0.4');
      res.end('userlogin_event_count 1\n');
      return;
    }
    if (url.pathname === '/connect/token') {
      res.end(JSON.stringify({ access_token: 'clock-test-token', token_type: 'Bearer', expires_in: 3600 }));
      return;
    }
    const from = Date.parse(url.searchParams.get('startDate')!);
    const to = url.searchParams.has('toDate') ? Date.parse(url.searchParams.get('toDate')!) : Infinity;
    const pageNumber = Number(url.searchParams.get('pageNumber') ?? '1');
    const pageSize = Number(url.searchParams.get('pageSize') ?? '500');
    const matching = records
      .filter((r) => Date.parse(r.timestamp) >= from && Date.parse(r.timestamp) <= to)
      .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp) || a.id - b.id);
    const data = matching.slice((pageNumber - 1) * pageSize, pageNumber * pageSize);
    const totalPages = Math.ceil(matching.length / pageSize);
    res.end(JSON.stringify({ pageNumber, pageSize, totalRecords: matching.length, totalPages, data }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, records, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** `sync` under `faketime -f <offset>` with exactly `env`; its exit status and stderr (JSON log lines). */
function syncWithClock(offset: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn('faketime', ['-f', offset, process.execPath, CLI_PATH, 'sync'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DONT_FAKE_MONOTONIC: '1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stderr })));
}

/** The clock warn lines of a run's stderr. */
function skewWarnings(stderr: string): Array<{ skewSeconds: number }> {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string; skewSeconds: number })
    .filter((l) => l.level === 'warn' && l.msg.includes("API's clock differs from the local clock"));
}

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});
afterAll(async () => {
  while (closers.length) await closers.pop()!();
});

async function setUp(schema: string, startMs: number, date: Parameters<typeof startUpstream>[0] = true) {
  const upstream = await startUpstream(date);
  closers.push(upstream.close);
  const env = {
    STATISTICS_URL: upstream.url,
    AUTH_URL: upstream.url,
    CLIENT_ID: 'clock-test',
    CLIENT_SECRET: 'clock-test-secret-0123456789abcdef',
    DATABASE_URL: db.url,
    DATABASE_SCHEMA: schema,
    LOG_LEVEL: 'info',
    // Absolute: the same instant whatever the child's clock reads.
    SYNC_START_DATE: new Date(startMs).toISOString(),
    SYNC_SETTLE: '1m',
    SYNC_LOOKBACK: '10m',
  };
  const pool = db.pool();
  const stored = async () => (await pool.query<{ id: number }>(`select (payload->>'id')::int as id from "${schema}".records order by 1`)).rows.map((r) => r.id);
  return { upstream, env, pool, stored };
}

describe('a host clock off the API’s (libfaketime, real PostgreSQL)', () => {
  it('2 h ahead: records arriving 3 minutes before the API’s now are loaded by the next run, and the skew is logged', async () => {
    const apiNow = Date.now();
    const { upstream, env, pool, stored } = await setUp('clock_ahead', apiNow - HOUR_MS);
    for (let i = 0; i < 30; i++) upstream.records.push({ id: i, timestamp: new Date(apiNow - 50 * MINUTE_MS + i * 80_000).toISOString() });

    const first = await syncWithClock('+2h', env);
    expect(first.code, first.stderr).toBe(0);
    expect(await stored()).toHaveLength(30);

    const arrival = Date.now() - 3 * MINUTE_MS;
    for (let i = 0; i < 20; i++) upstream.records.push({ id: 100 + i, timestamp: new Date(arrival + i * 10).toISOString() });
    const second = await syncWithClock('+2h', env);
    expect(second.code, second.stderr).toBe(0);
    expect(await stored()).toEqual([...Array.from({ length: 30 }, (_, i) => i), ...Array.from({ length: 20 }, (_, i) => 100 + i)]);
    const { rows } = await pool.query<{ watermark: Date }>(`select watermark from clock_ahead.sync_state`);
    // The API's now minus SYNC_SETTLE, not 2 h into the API's future.
    expect(rows[0]!.watermark.getTime()).toBeLessThanOrEqual(Date.now() - MINUTE_MS + 2_000);
    // Each run (a process of its own) says it once: about −7200 s, the API's clock minus the host's.
    for (const run of [first, second]) {
      const warned = skewWarnings(run.stderr);
      expect(warned).toHaveLength(1);
      expect(Math.abs(warned[0]!.skewSeconds + 7200)).toBeLessThan(5);
    }
  }, 120_000);

  it('2 h behind: the last 2 h of data are loaded by the run, not left waiting', async () => {
    const apiNow = Date.now();
    const { upstream, env, stored } = await setUp('clock_behind', apiNow - 3 * HOUR_MS - 10 * MINUTE_MS);
    // Every 3 minutes over the last 3 h, the latest 2 minutes before the API's now.
    for (let i = 0; i < 60; i++) upstream.records.push({ id: i, timestamp: new Date(apiNow - 2 * MINUTE_MS - i * 3 * MINUTE_MS).toISOString() });

    const run = await syncWithClock('-2h', env);
    expect(run.code, run.stderr).toBe(0);
    expect(await stored()).toEqual(Array.from({ length: 60 }, (_, i) => i));
    const warned = skewWarnings(run.stderr);
    expect(warned).toHaveLength(1);
    expect(Math.abs(warned[0]!.skewSeconds - 7200)).toBeLessThan(5);
  }, 120_000);
});

describe("the API's clock as the client reads it (in process)", () => {
  it('sets analytics_exporter_upstream_clock_skew_seconds from E6 and E7 answers, and apiNow is the API’s time', async () => {
    const upstream = await startUpstream({ offsetMs: 2 * HOUR_MS });
    closers.push(upstream.close);
    const config = loadConfig({ STATISTICS_URL: upstream.url, AUTH_URL: upstream.url, CLIENT_ID: 'c', CLIENT_SECRET: 'clock-test-secret-0123456789abcdef' });
    const metrics = new ExporterMetrics({ processMetrics: false });
    const out = captureLog();
    const client = AnalyticsClient.fromConfig(config.sources[0]!.upstream!, {
      log: createLogger('info', { destination: out }),
      observer: metrics.clientObserver('eu'),
      clockSkewBoundMs: 30_000,
    });
    closers.push(() => client.close());
    const gauge = async () => (await metrics.registry.getSingleMetric('analytics_exporter_upstream_clock_skew_seconds')!.get()).values;

    await client.fetchPrometheusText();
    const [e7] = await gauge();
    expect(e7!.labels).toEqual({ source: 'eu' });
    expect(Math.abs(e7!.value - 7200)).toBeLessThan(2);
    const apiNow = await client.apiNow();
    expect(Math.abs(apiNow! - (Date.now() + 2 * HOUR_MS))).toBeLessThan(2_000);
    await client.fetchPage({ startDate: new Date(Date.now() - HOUR_MS), toDate: new Date() });
    expect(Math.abs((await gauge())[0]!.value - 7200)).toBeLessThan(2);
    // Three answers beyond the bound, one line.
    const warns = out.lines().filter((l) => l.level === 'warn' && String(l.msg).includes("API's clock"));
    expect(warns).toHaveLength(1);
    expect(warns[0]).toMatchObject({ endpoint: 'prometheus', boundSeconds: 30 });
  });

  it('without a Date header, a run falls back to the local clock and says so at info', async () => {
    const { upstream, env, stored } = await setUp('clock_none', Date.now() - HOUR_MS, 'none');
    for (let i = 0; i < 5; i++) upstream.records.push({ id: i, timestamp: new Date(Date.now() - 30 * MINUTE_MS + i * 1000).toISOString() });
    const run = await runCli(['sync'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(await stored()).toEqual([0, 1, 2, 3, 4]);
    expect(run.stderr).toContain("E6 answered with no Date header (or not at all): the run's now is the local clock");
    expect(skewWarnings(run.stderr)).toHaveLength(0);
  }, 60_000);
});
