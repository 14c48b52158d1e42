/**
 * One sync run of one source: E6 → the store, exactly once.
 *
 * Locks (session advisory locks of the store, src/db/pool.ts):
 * - `sync:<schema>:<source>`, exclusive: one run per source at a time, whatever process runs it.
 * - `sync:<schema>`, shared by every source's run while it loads; taken exclusive by what changes
 *   the tables every source writes: rebuilding records_hourly and RETENTION's partition drops. A
 *   partition is therefore never dropped while a window of any source is being written into it
 *   (its insert would fail for want of a partition, or the window would lose rows it just wrote).
 *
 * Under those locks, {@link runLocked} coordinates the steps, each in its own module and each
 * handed the run's context first (context.ts): plan the windows (plan.ts), read them ahead of the
 * writer as parts that E6 answers each in one complete page (read.ts, reader.ts, split.ts: exact
 * whatever order E6 returns records in), store each window in one transaction with its derived
 * tables and its ledger entry (load-window.ts; a window that fails for a reason of its own is parked
 * instead, park.ts), report (report.ts). The partitions of `records`
 * the windows need are created before loading (partitions.ts); RETENTION drops the old ones after
 * the run (retention.ts). The run reaches the database and E6 only through ports.ts.
 */
import { AbortedError } from '../../errors.js';
import { FieldContract } from './field-contract.js';
import { runContext, schemaLockName, sourceLockName, type LoadContext, type RunContext, type SyncDeps, type SyncOptions } from './context.js';
import { planRun, type RunPlan } from './plan.js';
import { ProgressLog } from './progress-log.js';
import type { StoreSession } from '../store/ports.js';
import { countParked, loadOrPark } from './park.js';
import { openReader } from './open-reader.js';
import { endRun, reportRunStarted, reportWindow, RunTally } from './report.js';
import { applyRetention } from './retention.js';
import type { SyncResult } from './summary.js';
import { iso } from '../windows.js';

export { schemaLockName, sourceLockName, type SyncDeps, type SyncOptions } from './context.js';
export { applyRetention } from './retention.js';
export type { ShrunkWindow, SyncObserver, SyncResult, WindowSummary } from './summary.js';

const LOCKED = { status: 'locked' as const };

/**
 * Runs one sync of `deps.source`. Never throws for upstream or database faults: they end the run
 * with status `failed` and the error, after the windows committed so far (the next run completes the data).
 *
 * @returns `{ status: 'locked' }` when another run of the source holds its lock, or a rollup
 *   rebuild or RETENTION holds the schema's (and `wait` is false);
 *   otherwise the run's outcome: `succeeded`, `failed` or `interrupted` (signal).
 * @throws {InvalidArgumentError} before anything is loaded when `from` ≥ `to` or `to` is later than
 *   now minus SYNC_SETTLE; {@link AbortedError} when `signal` aborts while waiting for the lock
 *   (`wait`), before the run starts; otherwise only when the database cannot be reached to take
 *   the lock or record the run.
 */
export async function runSync(deps: SyncDeps, options: SyncOptions = {}): Promise<SyncResult> {
  const ctx = runContext(deps, options);
  return ctx.store.session(async (session) => {
    // With the signal, a --wait for the lock ends on SIGINT/SIGTERM instead of blocking in the database.
    const lockOptions = { wait: options.wait ?? false, ...(options.signal ? { signal: options.signal } : {}) };
    const ran = await session.lock(sourceLockName(ctx.schema, ctx.source), lockOptions, async (): Promise<SyncResult> => {
      // Here rather than when serve and sync migrate: taken the way the run takes its locks (a --wait
      // a signal can end, a serve tick that skips when busy), and exclusive, so no source's window is
      // being loaded while records_hourly is rebuilt.
      if (!(await session.maintenance.isRollupCurrent())) {
        const rebuilt = await session.lock(schemaLockName(ctx.schema), lockOptions, () => session.maintenance.ensureRollup());
        if (!rebuilt.acquired) return LOCKED;
      }
      const loaded = await session.lock(schemaLockName(ctx.schema), { ...lockOptions, shared: true }, () => runLocked(ctx, session));
      if (!loaded.acquired) return LOCKED;
      const result = loaded.value;
      await retentionAfterRun(ctx, session, result);
      return result;
    });
    return ran.acquired ? ran.value : LOCKED;
  });
}

/** The run under its locks: a coordinator over the steps. */
async function runLocked(ctx: RunContext, session: StoreSession): Promise<SyncResult> {
  const started = performance.now();
  const now = ctx.now();
  await session.maintenance.ensureTypedViewCurrent();
  const abandoned = await session.ledger.abandonStaleRuns();
  if (abandoned > 0) ctx.log.warn({ runs: abandoned }, 'marked runs left running by a process that died as abandoned (or whose end could not be recorded)');

  const plan = await planRun(ctx, session, now);
  const runId = await session.ledger.startRun(plan.range);
  reportRunStarted(ctx, runId, plan);
  const progress = ctx.showsProgress ? undefined : new ProgressLog(ctx.log, { runId, windowsPlanned: plan.windows.length });
  const contract = await FieldContract.open(session, { catalogue: ctx.tables.rollup.catalogue, mode: ctx.settings.fieldContract });
  const load: LoadContext = { ...ctx, session, runId, contract, reader: await openReader(ctx, session, { runId, windows: plan.windows }) };
  const tally = new RunTally(plan.watermarkBefore);
  try {
    await createPartitions(load, plan);
    for (let index = 0; index < plan.windows.length; index++) {
      if (ctx.options.signal?.aborted) throw new AbortedError('sync interrupted by a signal');
      const summary = await loadOrPark(load, { window: plan.windows[index]!, index }, tally);
      // undefined: parked, and park.ts told.
      if (summary !== undefined) {
        tally.add(summary);
        reportWindow(load, summary);
      }
      progress?.windowDone(summary?.records ?? 0);
    }
    await pruneRollup(load, now);
  } catch (thrown) {
    tally.fail(thrown, ctx.options.signal);
  } finally {
    load.reader.close();
  }
  await countParked(load, tally);
  return endRun(load, plan, { tally, started });
}

/** Before any window: a row no partition takes would fail its window (there is no DEFAULT partition). */
async function createPartitions(ctx: LoadContext, plan: RunPlan): Promise<void> {
  const created = await ctx.session.maintenance.ensurePartitions(plan.windows.map((w) => w.start));
  if (created.length > 0) {
    ctx.log.info({ runId: ctx.runId, partitions: created.map((p) => ({ name: p.name, from: iso(p.start), to: iso(p.end) })) }, 'created partitions of records');
  }
}

/** ROLLUP_RETENTION: the derived tables' buckets older than it go at the end of each run. */
async function pruneRollup(ctx: LoadContext, now: number): Promise<void> {
  const retentionMs = ctx.tables.rollup.retentionMs;
  if (retentionMs === undefined) return;
  const pruned = await ctx.session.maintenance.pruneRollup(now - retentionMs);
  if (pruned > 0)
    ctx.log.info({ runId: ctx.runId, rows: pruned, before: iso(now - retentionMs) }, 'deleted records_hourly buckets older than ROLLUP_RETENTION');
}

/** RETENTION after a run that loaded (unless `options.retention` is false), when no other source's run holds the schema. */
async function retentionAfterRun(ctx: RunContext, session: StoreSession, result: SyncResult): Promise<void> {
  const retentionMs = ctx.tables.retentionMs;
  if (ctx.options.retention === false || result.status === 'locked' || result.status === 'interrupted' || retentionMs === undefined) return;
  const cutoff = ctx.now() - retentionMs;
  const applied = await applyRetention(ctx, session, { runIds: [result.runId], cutoff }, { wait: false });
  if (!applied) ctx.log.debug({ runId: result.runId }, "retention left to a later run: another source's sync is running");
}
