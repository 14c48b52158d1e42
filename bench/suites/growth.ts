/**
 * 2. Memory and 4. Growth: `sync` runs of several sizes over the same days and windows at zero
 * latency, each a child process whose wall time and peak RSS are measured. The largest size is
 * the ETL benchmark's, whose sync runs are reused rather than repeated.
 */
import { runSyncChild, startSimulatorChild, upstreamEnv, type MeasuredRun } from '../lib/children.js';
import { DATA_END, countRecords, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';
import { SYNC_ENV, syncArgs } from './etl.js';

export interface SizeResult {
  records: number;
  runs: MeasuredRun[];
  medianSeconds: number;
  medianPeakRssBytes: number;
  /** Median wall time per record, in microseconds. */
  microsPerRecord: number;
}

/**
 * Runs `sync` `runs` times for each size, each into a fresh database.
 *
 * @param nodeArgs Node flags for the sync, e.g. `--heap-growing-percent=0` for V8's own heap sizing.
 */
export async function measureSizes(ctx: BenchContext, sizes: readonly number[], days: number, runs: number, nodeArgs: string[] = []): Promise<SizeResult[]> {
  const start = daysBefore(DATA_END, days);
  const results: SizeResult[] = [];
  for (const records of sizes) {
    const sim = await startSimulatorChild({ records, start, end: DATA_END });
    const measured: MeasuredRun[] = [];
    try {
      for (let i = 1; i <= runs; i++) {
        const run = await withFreshDatabase(ctx, 'bench_growth', async (db) => {
          const r = await runSyncChild(syncArgs(start, DATA_END), upstreamEnv(sim.url, db.url, SYNC_ENV), { nodeArgs });
          const stored = await countRecords(db.url);
          if (stored !== records) throw new Error(`sync of ${records} records stored ${stored}`);
          return r;
        });
        measured.push(run);
        ctx.log(
          `growth ${records} records${nodeArgs.length > 0 ? ` (node ${nodeArgs.join(' ')})` : ''}, run ${i}/${runs}: ${run.wallSeconds.toFixed(2)} s, peak RSS ${(run.peakRssBytes / 2 ** 20).toFixed(1)} MiB`,
        );
      }
    } finally {
      await sim.stop();
    }
    results.push(sizeResult(records, measured));
  }
  return results;
}

export function sizeResult(records: number, runs: MeasuredRun[]): SizeResult {
  const medianSeconds = median(runs.map((r) => r.wallSeconds));
  return {
    records,
    runs,
    medianSeconds,
    medianPeakRssBytes: median(runs.map((r) => r.peakRssBytes)),
    microsPerRecord: (medianSeconds / records) * 1e6,
  };
}
