/**
 * 11. The audit's cost (`verify`, src/sync/audit/compare.ts): E6 requests to compare a year of hourly
 * windows (8,760) with E6, with no drift and with k windows that differ, against the budgets of
 * issue 24: at most 20 with no drift, at most 1 + 2·k·⌈log2 8,760⌉ with k. The year is seeded in
 * PostgreSQL from what the simulator serves (test/helpers/audit-seed.ts, as a sync stores it);
 * late records are then added to k windows spread over the year, cumulatively (1, then 10, then
 * 100), and each audit (without repair) is run in this process through auditSource against the
 * simulator, whose own count of E6 requests is the one reported. A last audit with repair loads
 * the 100 windows again, and one more must find nothing.
 */
import { loadConfig } from '../../src/config.js';
import { createPool } from '../../src/db/pool.js';
import { silentLogger } from '../../test/helpers/silent-logger.js';
import { auditSource, type AuditResult } from '../../src/sync/audit/source.js';
import { AnalyticsClient } from '../../src/upstream/analytics.js';
import { startSimulator } from '@analytics-exporter/simulator';
import { HOUR_MS, seedHourlyHistory } from '../../test/helpers/audit-seed.js';
import { withFreshDatabase, type BenchContext } from '../lib/context.js';
import { PgStore } from '../../src/sync/store/pg/store.js';

export interface AuditSpec {
  /** Hourly windows of the history. */
  windows: number;
  /** Records of the history. */
  records: number;
  /** Drifted windows of each audit after the first (cumulative). */
  drifts: number[];
}

export interface AuditRow {
  /** Windows that differ (late records added to them). */
  drifted: number;
  /** Windows the audit named. */
  found: number;
  /** E6 requests, by the simulator's count. */
  requests: number;
  /** The budget: 20 with no drift, 1 + 2·k·⌈log2 n⌉ with k. */
  budget: number;
  seconds: number;
  /** Whether the audit repaired what it found. */
  repair: boolean;
}

export interface AuditBenchResult {
  spec: AuditSpec;
  seededRecords: number;
  rows: AuditRow[];
}

const SCHEMA = 'analytics';
const START = Date.parse('2025-11-01T00:00:00Z');

/** The budget for `k` drifted windows of `n`. */
export function auditBudget(n: number, k: number): number {
  return k === 0 ? 20 : 1 + 2 * k * Math.ceil(Math.log2(n));
}

export async function auditSuite(ctx: BenchContext, spec: AuditSpec): Promise<AuditBenchResult> {
  return withFreshDatabase(ctx, 'audit', async (db) => {
    const end = START + spec.windows * HOUR_MS;
    const sim = await startSimulator({ records: spec.records, start: new Date(START + 1000), end: new Date(end) });
    const pool = createPool(db.url, silentLogger, { max: 3 });
    const config = loadConfig({
      STATISTICS_URL: sim.url,
      AUTH_URL: sim.url,
      CLIENT_ID: 'demo-client',
      CLIENT_SECRET: 'demo-secret',
      SYNC_WINDOW: '1h',
      DATABASE_SCHEMA: SCHEMA,
    });
    const source = config.sources[0]!;
    const client = AnalyticsClient.fromConfig(source.upstream!, { log: silentLogger });
    try {
      ctx.log(`audit: seeding ${spec.windows} hourly windows`);
      const seededRecords = await seedHourlyHistory(pool, SCHEMA, sim, START, spec.windows);
      const store = new PgStore({ pool, schema: SCHEMA, tables: config.tables, log: silentLogger }).forSource(source.name, silentLogger);
      const deps = { store, client, config: source.sync, tables: config.tables, schema: SCHEMA, log: silentLogger };
      const rows: AuditRow[] = [];
      const audit = async (drifted: number, repair: boolean): Promise<AuditResult> => {
        const before = sim.stats.analyticsRequests;
        const started = performance.now();
        const result = await auditSource(deps, { repair });
        const seconds = (performance.now() - started) / 1000;
        // The simulator's count; with a repair it also holds the repair runs' reads, which are not the audit's.
        const counted = sim.stats.analyticsRequests - before;
        if (!repair && counted !== result.requests) throw new Error(`audit: the audit counted ${result.requests} E6 requests, the simulator ${counted}`);
        const requests = result.requests;
        rows.push({ drifted, found: result.drifted.length, requests, budget: auditBudget(spec.windows, drifted), seconds, repair });
        ctx.log(`audit: ${drifted} drifted windows: ${result.drifted.length} found in ${requests} E6 requests`);
        return result;
      };
      // Late records go to hours whose bounds hold no record, so the repair's sync (whatever it
      // does with a record exactly at a window's start) stores each window as seeded.
      const atBounds = new Set(
        sim
          .servedJson(new Date(START), new Date(end))
          .map((text) => Date.parse((JSON.parse(text) as { timestamp: string }).timestamp))
          .filter((ms) => (ms - START) % HOUR_MS === 0)
          .map((ms) => (ms - START) / HOUR_MS),
      );
      await audit(0, false);
      const hours: number[] = [];
      for (const k of spec.drifts) {
        // Late records in k windows spread over the year (those of the smaller k among them).
        const added: number[] = [];
        for (let i = 0; i < k; i++) {
          let h = Math.floor(((i + 0.5) * spec.windows) / k);
          while (atBounds.has(h) || atBounds.has(h + 1)) h++;
          if (!hours.includes(h) && !added.includes(h)) added.push(h);
        }
        sim.insertRecords(
          added.flatMap((h) => sim.dataset.plausibleRecords(1, new Date(START + h * HOUR_MS + 60_000), new Date(START + (h + 1) * HOUR_MS - 60_000), true, h)),
        );
        hours.push(...added);
        const result = await audit(hours.length, false);
        if (result.drifted.length !== hours.length) throw new Error(`audit: ${hours.length} windows differ, the audit found ${result.drifted.length}`);
      }
      const repaired = await audit(hours.length, true);
      if (repaired.left.length > 0) throw new Error(`audit: ${repaired.left.length} windows left after the repair`);
      const after = await audit(0, false);
      if (after.drifted.length > 0) throw new Error(`audit: ${after.drifted.length} windows differ after the repair`);
      return { spec, seededRecords, rows };
    } finally {
      await client.close();
      await pool.end();
      await sim.close();
    }
  });
}

/** The verdict: every audit within its budget. */
export function auditMet(result: AuditBenchResult): boolean {
  return result.rows.every((r) => r.requests <= r.budget);
}

/** The section of BENCHMARKS.md. */
export function renderAudit(result: AuditBenchResult): string[] {
  const n = result.spec.windows;
  return [
    `## 11. The audit (\`verify\`): ${n.toLocaleString('en-US')} hourly windows`,
    '',
    `A year of hourly windows (${result.seededRecords.toLocaleString('en-US')} records) seeded in PostgreSQL from what the simulator serves, as a sync stores it; late records are then added to k windows spread over the year (cumulatively), and each audit runs in the bench process (auditSource, without repair, then with it) against the simulator. Budget: at most 20 E6 requests with no drift, at most 1 + 2·k·⌈log2 ${n.toLocaleString('en-US')}⌉ = 1 + ${2 * Math.ceil(Math.log2(n))}·k with k windows that differ. The audit counts its own requests, and the simulator's count must equal it; with --repair the runs' reads of the windows (as \`sync\` would) come on top and are not shown.`,
    '',
    '| Windows that differ (k) | found | E6 requests | budget | within | seconds |',
    '|---|---|---|---|---|---|',
    ...result.rows.map(
      (r) =>
        `| ${r.drifted}${r.repair ? ' (with --repair)' : ''} | ${r.found} | **${r.requests}** | ${r.budget} | ${r.requests <= r.budget ? 'yes' : 'NO'} | ${r.seconds.toFixed(2)} |`,
    ),
    '',
  ];
}
