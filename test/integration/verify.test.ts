/**
 * The audit against real PostgreSQL and the simulator (issue 24, item 6 and the "late arrival"
 * why): a record arriving 3 days back, older than SYNC_LOOKBACK, is never fetched by `sync`; the
 * `verify` command finds its window (exit 1), `verify --repair` loads it again (exit 0) and the
 * database then holds exactly what E6 serves (the simulator's servedJson); a parked window is
 * loaded again whatever its counts; `serve`'s audit
 * (AUDIT_SCHEDULE) does the same on its own, its metrics saying what it found. The requests are
 * counted by the simulator.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startServe } from '../../src/serve/lifecycle.js';
import { segmentsFor } from '../../src/sync/audit/compare.js';
import { startSimulator, type Simulator } from '@analytics-exporter/simulator';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/db.js';
import { canonicalJson, simulatorEnv, storedMultiset } from '../helpers/sync.js';
import { until } from '../helpers/wait.js';

const db = useTestDatabase();
const START = '2026-10-28T00:00:00Z';
const END = '2026-11-01T00:00:00Z';
/** 96 hourly windows. */
const WINDOWS = 96;
/** Each test runs the CLI several times (a second or more each, more on a loaded machine). */
const TEST_TIMEOUT_MS = 120_000;
let sim: Simulator;
let schemas = 0;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, records: 2_000, start: new Date(START), end: new Date(END), admin: true });
});
afterAll(async () => {
  await sim?.close();
});

/** What E6 serves now for the whole range, canonical and sorted (a multiset). */
function served(): string[] {
  return sim
    .servedJson(new Date(START), new Date(END))
    .map((text) => canonicalJson(JSON.parse(text)))
    .sort();
}

/** An admin request of the simulator (`--admin`). */
async function admin(path: string, body: unknown): Promise<void> {
  const res = await request(`${sim.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

/** Requests the simulator's E6 answered while `fn` ran. */
async function e6Requests<T>(fn: () => Promise<T>): Promise<{ value: T; requests: number }> {
  const before = sim.stats.analyticsRequests;
  const value = await fn();
  return { value, requests: sim.stats.analyticsRequests - before };
}

/** A fresh schema loaded with the four days by `sync`, and the environment of the commands on it. */
async function loaded(extra: Record<string, string> = {}): Promise<{ schema: string; env: Record<string, string> }> {
  const schema = `verify_${++schemas}`;
  const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, DATABASE_SCHEMA: schema, SYNC_WINDOW: '1h', LOG_FORMAT: 'json', ...extra };
  const sync = await runCli(['sync', '--from', START, '--to', END], env);
  expect(sync.code, sync.stderr).toBe(0);
  expect(await storedMultiset(db.pool(), schema)).toEqual(served());
  return { schema, env };
}

describe('verify: the database compared with E6, by command', () => {
  it(
    'a late arrival 3 days back is missed by sync, found by verify (exit 1), repaired by verify --repair (exit 0): stored == served',
    async () => {
      const { schema, env } = await loaded();
      await admin('/admin/records', { at: '2026-10-29T00:34:56Z', count: 3 });
      // The next sync re-reads SYNC_LOOKBACK (1h) before the watermark: the late records are not in it.
      expect((await runCli(['sync', '--to', END], env)).code).toBe(0);
      expect((await storedMultiset(db.pool(), schema)).length).toBe(served().length - 3);

      const found = await e6Requests(() => runCli(['verify'], env));
      expect(found.value.code, found.value.stderr).toBe(1);
      expect(found.value.stderr).toContain('"window":["2026-10-29T00:00:00.000Z","2026-10-29T01:00:00.000Z"],"stored":');
      expect(found.value.stderr).toContain('audit: the stored window differs from what E6 holds now');
      expect(found.value.stdout).toBe(`source default: ${WINDOWS} windows compared with E6, 1 differ (0 repaired, 1 left)\n`);
      // One window differs of 96: at most 1 + 2·⌈log2 96⌉ = 15 requests (segments, then halvings).
      expect(found.requests, found.value.stderr).toBeLessThanOrEqual(1 + 2 * Math.ceil(Math.log2(WINDOWS)));
      expect(found.requests).toBeGreaterThanOrEqual(segmentsFor(WINDOWS));

      const repaired = await runCli(['verify', '--repair'], env);
      expect(repaired.code, repaired.stderr).toBe(0);
      expect(repaired.stderr).toContain('audit: the windows that differed from E6 were loaded again');
      expect(repaired.stdout).toBe(`source default: ${WINDOWS} windows compared with E6, 1 differ (1 repaired, 0 left)\n`);
      expect(await storedMultiset(db.pool(), schema)).toEqual(served());

      // Nothing differs any more: the segments' counts only (no window before the first: no count of its instant).
      const again = await e6Requests(() => runCli(['verify'], env));
      expect(again.value.code, again.value.stderr).toBe(0);
      expect(again.requests).toBe(segmentsFor(WINDOWS));
      expect(again.value.stdout).toBe(`source default: ${WINDOWS} windows compared with E6, none differ\n`);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'records deleted upstream under SYNC_SHRINK=replace: found, and mirrored by --repair; --from/--to bound the audit',
    async () => {
      const { schema, env } = await loaded({ SYNC_SHRINK: 'replace' });
      await admin('/admin/delete', { from: '2026-10-30T10:00:00Z', to: '2026-10-30T10:59:59Z', count: 2 });
      // A range that does not hold the window: nothing found.
      expect((await runCli(['verify', '--from', '2026-10-31T00:00:00Z'], env)).code).toBe(0);
      const found = await runCli(['verify', '--from', '2026-10-30T00:00:00Z', '--to', '2026-10-31T00:00:00Z'], env);
      expect(found.code, found.stderr).toBe(1);
      expect(found.stderr).toContain('"window":["2026-10-30T10:00:00.000Z","2026-10-30T11:00:00.000Z"]');
      expect((await runCli(['verify', '--repair'], env)).code).toBe(0);
      expect(await storedMultiset(db.pool(), schema)).toEqual(served());
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a parked window is listed whatever its counts, and loaded again by --repair (committed after)',
    async () => {
      const { schema, env } = await loaded();
      // Parked as a run parks a window it cannot load (its records from an earlier load stay).
      await db
        .pool()
        .query(`update "${schema}".sync_windows set status = 'parked', reason = 'test: parked', parked_at = now() where window_start = $1`, [
          new Date('2026-10-30T05:00:00Z'),
        ]);
      const found = await runCli(['verify'], env);
      expect(found.code, found.stderr).toBe(1);
      expect(found.stderr).toContain('"window":["2026-10-30T05:00:00.000Z","2026-10-30T06:00:00.000Z"]');
      expect(found.stderr).toContain('audit: the window is parked; loading it again');
      const repaired = await runCli(['verify', '--repair'], env);
      expect(repaired.code, repaired.stderr).toBe(0);
      const { rows } = await db
        .pool()
        .query<{ status: string }>(`select status from "${schema}".sync_windows where window_start = $1`, [new Date('2026-10-30T05:00:00Z')]);
      expect(rows).toEqual([{ status: 'committed' }]);
      expect(await storedMultiset(db.pool(), schema)).toEqual(served());
      expect((await runCli(['verify'], env)).code).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'bad usage exits 2 naming what was wrong',
    async () => {
      const env = { ...simulatorEnv(sim), DATABASE_URL: db.url, DATABASE_SCHEMA: 'verify_usage' };
      const reversed = await runCli(['verify', '--from', '2026-10-31T00:00:00Z', '--to', '2026-10-30T00:00:00Z'], env);
      expect(reversed.code).toBe(2);
      expect(reversed.stderr).toContain('--from 2026-10-31T00:00:00.000Z must be before --to 2026-10-30T00:00:00.000Z');
      const unknown = await runCli(['verify', '--source', 'nope'], env);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('--source nope is not a configured source');
      const date = await runCli(['verify', '--from', 'yesterday'], env);
      expect(date.code).toBe(2);
      expect(date.stderr).toContain('must be an ISO 8601 date-time');
      const help = await runCli(['verify', '--help'], {});
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('--repair');
      expect(help.stdout).toContain('Exit status: 0 no difference left');
    },
    TEST_TIMEOUT_MS,
  );
});

describe("serve's audit (AUDIT_SCHEDULE)", () => {
  it(
    'finds the late arrival and loads its window again on its own; the audit metrics say so',
    async () => {
      const { schema } = await loaded();
      await admin('/admin/records', { at: '2026-10-29T05:43:21Z', count: 2 });
      const config = loadConfig({
        ...simulatorEnv(sim),
        DATABASE_URL: db.url,
        DATABASE_SCHEMA: schema,
        SYNC_WINDOW: '1h',
        METRICS_LISTEN: '127.0.0.1:0',
        SYNC_SCHEDULE: 'off',
        AUDIT_SCHEDULE: '*/2 * * * * *',
      });
      const server = await startServe(config, createLogger('silent'));
      try {
        const metrics = async (): Promise<string> => {
          const res = await request(`${server.url}/metrics`, { reset: true });
          return res.body.text();
        };
        const value = (text: string, series: string): number | undefined => {
          const line = text.split('\n').find((l) => l.startsWith(`${series} `));
          return line === undefined ? undefined : Number(line.split(' ').pop());
        };
        // Exported at 0 from the start; then the first audit finds the window and repairs it.
        const text = await until(
          'an audit that found drift',
          async () => {
            const t = await metrics();
            return (value(t, 'analytics_exporter_audit_windows_repaired_total{source="default"}') ?? 0) >= 1 ? t : undefined;
          },
          60_000,
          200,
        );
        expect(value(text, 'analytics_exporter_audit_windows_repaired_total{source="default"}')).toBe(1);
        expect(value(text, 'analytics_exporter_audit_drift_windows{source="default"}')).toBe(0);
        expect(value(text, 'analytics_exporter_audit_requests_total{source="default"}')).toBeGreaterThan(0);
        expect(value(text, 'analytics_exporter_sync_verified_through_timestamp_seconds{source="default"}')).toBe(Date.parse(END) / 1000);
        expect(value(text, 'analytics_exporter_audit_last_run_timestamp_seconds{source="default"}')).toBeGreaterThan(Date.now() / 1000 - 60);
        expect(await storedMultiset(db.pool(), schema)).toEqual(served());
        // The next audits find nothing: no window repaired again.
        const requests = value(text, 'analytics_exporter_audit_requests_total{source="default"}')!;
        await until(
          'two more audits',
          async () =>
            (value(await metrics(), 'analytics_exporter_audit_requests_total{source="default"}') ?? 0) >= requests + 2 * segmentsFor(WINDOWS) || undefined,
          60_000,
          200,
        );
        expect(value(await metrics(), 'analytics_exporter_audit_windows_repaired_total{source="default"}')).toBe(1);
      } finally {
        await server.stop();
      }
    },
    TEST_TIMEOUT_MS,
  );
});
