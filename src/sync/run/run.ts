/**
 * One sync run of one source: E6 → the store, exactly once. It holds `sync:<schema>:<source>`
 * exclusively (one run per source) and `sync:<schema>` shared (a rollup rebuild or RETENTION takes
 * it exclusively, so no partition is dropped under a window being written). {@link runLocked}
 * coordinates the steps, each handed the run's context first: plan.ts, open-reader.ts,
 * load-window.ts or park.ts per window, report.ts, retention.ts. It reaches the database and E6
 * only through store/ports.ts. Design: docs/design/sync-run.md.
 */
import { AbortedError } from '../../errors.js';
import { FieldContract } from './field-contract.js';
import { runContext, schemaLockName, sourceLockName, type LoadContext, type RunContext, type SyncDeps, type SyncOptions } from './context.js';
import { planRun, runNow, type RunPlan } from './plan.js';
import { ProgressLog } from './progress-log.js';
import type { StoreSession } from '../store/ports.js';
import { countParked, loadOrPark } from './park.js';
import { ReadAheads } from './read-ahead.js';
import { openReader } from './open-reader.js';
import { countFields, endRun, reportRunStarted, reportWindow, RunTally } from './report.js';
import { applyRetention } from './retention.js';
import type { SyncResult } from './summary.js';
import { iso } from '../windows.js';

export type { SyncDeps, SyncOptions } from './context.js';
export { applyRetention } from './retention.js';
export type { SyncObserver, SyncResult } from './summary.js';

const LOCKED = { status: 'locked' as const };

/**
 * Runs one sync of `deps.source`. Upstream and database faults end the run `failed`, not thrown.
 *
 * @returns `{ status: 'locked' }` when a lock is busy and `wait` is false; else the run's outcome.
 * @throws {InvalidArgumentError} when `from` ≥ `to` or `to` is later than now (the API's) minus
 *   SYNC_SETTLE; {@link AbortedError} when `signal` ends the wait for a lock;
 *   the database's error when the lock cannot be taken or the run recorded.
 */
export async function runSync(deps: SyncDeps, options: SyncOptions = {}): Promise<SyncResult> {
  const ctx = runContext(deps, options);
  return ctx.store.session(async (session) => {
    const lockOptions = { wait: options.wait ?? false, ...(options.signal ? { signal: options.signal } : {}) };
    const ran = await session.lock(sourceLockName(ctx.schema, ctx.source), lockOptions, async (): Promise<SyncResult> => {
      // Here, not only at migrate: the lock is then waited for (or skipped) as the run's own are.
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

async function runLocked(ctx: RunContext, session: StoreSession): Promise<SyncResult> {
  const started = performance.now();
  // The API's clock, not the host's: a host clock off the API's neither skips nor delays records.
  const now = await runNow(ctx);
  await session.maintenance.ensureTypedViewCurrent();
  const abandoned = await session.ledger.abandonStaleRuns();
  if (abandoned > 0) ctx.log.warn({ runs: abandoned }, 'marked runs left running by a process that died as abandoned (or whose end could not be recorded)');

  const plan = await planRun(ctx, session, now);
  const runId = await session.ledger.startRun(plan.range);
  reportRunStarted(ctx, runId, plan);
  const progress = ctx.showsProgress ? undefined : new ProgressLog(ctx.log, { runId, windowsPlanned: plan.windows.length });
  const contract = await FieldContract.open(session, { catalogue: ctx.tables.rollup.catalogue, mode: ctx.settings.fieldContract });
  const reader = await openReader(ctx, session, { runId, windows: plan.windows });
  const load: LoadContext = { ...ctx, session, runId, contract, reader, readAheads: new ReadAheads(plan.windows) };
  const tally = new RunTally(plan.watermarkBefore);
  try {
    await createPartitions(load, plan);
    for (let index = 0; index < plan.windows.length; index++) {
      if (ctx.options.signal?.aborted) throw new AbortedError('sync interrupted by a signal');
      const summary = await loadOrPark(load, { window: plan.windows[index]!, index }, tally);
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
    await load.readAheads.close((index) => load.reader.drop(index));
  }
  await countParked(load, tally);
  await countFields(load, tally);
  return endRun(load, plan, { tally, started });
}

/** Before any window: there is no DEFAULT partition. */
async function createPartitions(ctx: LoadContext, plan: RunPlan): Promise<void> {
  const created = await ctx.session.maintenance.ensurePartitions(plan.windows.map((w) => w.start));
  if (created.length > 0) {
    ctx.log.info({ runId: ctx.runId, partitions: created.map((p) => ({ name: p.name, from: iso(p.start), to: iso(p.end) })) }, 'created partitions of records');
  }
}

async function pruneRollup(ctx: LoadContext, now: number): Promise<void> {
  const retentionMs = ctx.tables.rollup.retentionMs;
  if (retentionMs === undefined) return;
  const pruned = await ctx.session.maintenance.pruneRollup(now - retentionMs);
  if (pruned > 0)
    ctx.log.info({ runId: ctx.runId, rows: pruned, before: iso(now - retentionMs) }, 'deleted records_hourly buckets older than ROLLUP_RETENTION');
}

/** Tried, not waited for: another source's run holding the schema leaves it to a later run. */
async function retentionAfterRun(ctx: RunContext, session: StoreSession, result: SyncResult): Promise<void> {
  const retentionMs = ctx.tables.retentionMs;
  if (ctx.options.retention === false || result.status === 'locked' || result.status === 'interrupted' || retentionMs === undefined) return;
  const cutoff = ctx.now() - retentionMs;
  const applied = await applyRetention(ctx, session, { runIds: [result.runId], cutoff }, { wait: false });
  if (!applied) ctx.log.debug({ runId: result.runId }, "retention left to a later run: another source's sync is running");
}
