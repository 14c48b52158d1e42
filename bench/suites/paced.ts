/**
 * 8. Paced backfill under the simulator's rate limit: the same `sync` backfill against a simulator
 * that lets `limit.perSecond` E6/E7 requests a second through (429 with Retry-After beyond it),
 * with a request budget under that limit (UPSTREAM_RATE_LIMIT) and without one. Wall time of the
 * `sync` process and the 429s it drew. The simulator runs in the bench process, so its counts are
 * read directly; its bucket starts full for each run.
 */
import { startSimulator } from '@analytics-exporter/simulator';
import { runSyncChild, upstreamEnv, type MeasuredRun } from '../lib/children.js';
import { DATA_END, countRecords, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';
import { syncArgs } from './etl.js';

export interface PacedSpec {
  /** Records spread over `days` one-day windows. */
  records: number;
  days: number;
  pageSize: number;
  /** The simulator's limit: requests a second and burst. */
  limit: { perSecond: number; burst: number };
  /** UPSTREAM_RATE_LIMIT and UPSTREAM_RATE_BURST of the paced variant. */
  budget: { perSecond: number; burst: number };
  runs: number;
}

export interface PacedRun {
  run: MeasuredRun;
  requests: number;
  tooManyRequests: number;
}

export interface PacedVariant {
  label: string;
  runs: PacedRun[];
  medianSeconds: number;
  /** Median over the runs. */
  tooManyRequests: number;
  requests: number;
}

export interface PacedResult {
  spec: PacedSpec;
  variants: PacedVariant[];
}

export async function pacedSuite(ctx: BenchContext, spec: PacedSpec): Promise<PacedResult> {
  const start = daysBefore(DATA_END, spec.days);
  const sim = await startSimulator({ records: spec.records, start, end: DATA_END });
  const syncEnv = { SYNC_WINDOW: '1d', SYNC_PAGE_SIZE: String(spec.pageSize), SYNC_CONCURRENCY: '4' };
  try {
    const variant = async (label: string, env: Record<string, string>): Promise<PacedVariant> => {
      const runs: PacedRun[] = [];
      for (let i = 1; i <= spec.runs; i++) {
        // A new setting object: the simulator's bucket starts full, as for a process starting cold.
        sim.faults.rateLimit = { ...spec.limit };
        const requests0 = sim.stats.analyticsRequests;
        const limited0 = sim.stats.responses['429'] ?? 0;
        const run = await withFreshDatabase(ctx, 'bench_paced', async (db) => {
          const r = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, { ...syncEnv, ...env }));
          const stored = await countRecords(db.url);
          if (stored !== spec.records) throw new Error(`paced backfill, ${label}: stored ${stored} of ${spec.records} records`);
          return r;
        });
        const measured = { run, requests: sim.stats.analyticsRequests - requests0, tooManyRequests: (sim.stats.responses['429'] ?? 0) - limited0 };
        runs.push(measured);
        ctx.log(
          `paced backfill, ${label}, run ${i}/${spec.runs}: ${run.wallSeconds.toFixed(2)} s, ${measured.requests} E6 requests, ${measured.tooManyRequests} answered 429`,
        );
      }
      return {
        label,
        runs,
        medianSeconds: median(runs.map((r) => r.run.wallSeconds)),
        tooManyRequests: median(runs.map((r) => r.tooManyRequests)),
        requests: median(runs.map((r) => r.requests)),
      };
    };
    const paced = await variant(`budget ${spec.budget.perSecond}/s, burst ${spec.budget.burst}`, {
      UPSTREAM_RATE_LIMIT: String(spec.budget.perSecond),
      UPSTREAM_RATE_BURST: String(spec.budget.burst),
    });
    // Without a budget every 429 is retried after its Retry-After; with the default 5 attempts a
    // window's pages can keep meeting a spent bucket until one gives up and the run fails (seen in a
    // full run once the COPY write path made the sync faster), so this variant rides them out with
    // 10, as an operator without a budget would have to. Its 429s and its time against the paced
    // run's are the figure.
    const unpaced = await variant('no budget, 10 attempts a request', { UPSTREAM_MAX_ATTEMPTS: '10' });
    return { spec, variants: [paced, unpaced] };
  } finally {
    await sim.close();
  }
}
