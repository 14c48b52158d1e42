/**
 * 3. Slow upstream: the simulator waits `latencyMs` before answering every request (E0 and
 * E6). `sync` with the default concurrency against the sequential figure (SYNC_CONCURRENCY=1).
 */
import { loadConfig } from '../../src/config.js';
import { runSyncChild, startSimulatorChild, upstreamEnv, type MeasuredRun } from '../lib/children.js';
import { DATA_END, countRecords, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';
import { SYNC_ENV, syncArgs } from './etl.js';

export interface SlowSpec {
  /** Records spread over `days` one-day windows, 1000 a page. */
  records: number;
  days: number;
  latencyMs: number;
  concurrentRuns: number;
  sequentialRuns: number;
}

export interface SlowVariant {
  label: string;
  concurrency: number | 'default';
  runs: MeasuredRun[];
  medianSeconds: number;
  pages: number;
}

export interface SlowResult {
  spec: SlowSpec;
  concurrent: SlowVariant;
  sequential: SlowVariant;
}

export async function slowSuite(ctx: BenchContext, spec: SlowSpec): Promise<SlowResult> {
  const start = daysBefore(DATA_END, spec.days);
  const sim = await startSimulatorChild({ records: spec.records, start, end: DATA_END, latencyMs: spec.latencyMs });
  try {
    const variant = async (label: string, concurrency: number | 'default', runs: number): Promise<SlowVariant> => {
      const env = concurrency === 'default' ? { ...SYNC_ENV } : { ...SYNC_ENV, SYNC_CONCURRENCY: String(concurrency) };
      const measured: MeasuredRun[] = [];
      for (let i = 1; i <= runs; i++) {
        const run = await withFreshDatabase(ctx, 'bench_slow', async (db) => {
          const r = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, env));
          const stored = await countRecords(db.url);
          if (stored !== spec.records) throw new Error(`slow sync stored ${stored} of ${spec.records} records`);
          return r;
        });
        measured.push(run);
        ctx.log(`slow upstream, ${label}, run ${i}/${runs}: ${run.wallSeconds.toFixed(2)} s, ${String(run.summary?.pages)} pages`);
      }
      return { label, concurrency, runs: measured, medianSeconds: median(measured.map((r) => r.wallSeconds)), pages: Number(measured[0]!.summary?.pages ?? 0) };
    };
    const concurrent = await variant(`default concurrency (${loadConfig({}).sources[0]!.sync.concurrency})`, 'default', spec.concurrentRuns);
    const sequential = await variant('sequential (SYNC_CONCURRENCY=1)', 1, spec.sequentialRuns);
    return { spec, concurrent, sequential };
  } finally {
    await sim.stop();
  }
}
