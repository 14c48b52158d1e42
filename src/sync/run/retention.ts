/**
 * RETENTION (global: it drops whole partitions of `records`, which hold every source's rows): after
 * a run, or once after the runs of several sources (src/app/sync.ts).
 */
import { coerceError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { schemaLockName } from './context.js';
import type { LockOptions, StoreSession } from '../store/ports.js';
import type { SyncObserver } from './summary.js';
import { iso } from '../windows.js';

/** What retention needs of a session of the store. */
export type RetentionSession = Pick<StoreSession, 'lock'> & { maintenance: Pick<StoreSession['maintenance'], 'dropExpiredPartitions'> };

/**
 * Under the schema's lock taken exclusively, so no source's window is being written meanwhile,
 * drops the partitions wholly older than `run.cutoff` (ms; partitions holding windows of
 * `run.runIds` are kept: partitions.ts dropExpiredPartitions), logs and reports them. A failure is
 * logged, not thrown: the runs' windows are committed, and the next run tries again.
 *
 * @param ctx.log the logger of the invocation (retention is about no one source).
 * @param lock.wait wait for the schema's lock (bounded by `lock.signal`); false: give up at once
 *   when a source's run holds it.
 * @returns whether the lock was taken (and retention applied or its failure logged).
 * @throws {AbortedError} when `lock.signal` aborts the wait; the database's error when the lock
 *   cannot be taken.
 */
export async function applyRetention(
  ctx: { schema: string; log: Logger; observer?: SyncObserver | undefined },
  session: RetentionSession,
  run: { runIds: readonly number[]; cutoff: number },
  lock: Omit<LockOptions, 'shared'>,
): Promise<boolean> {
  const { runIds, cutoff } = run;
  const locked = await session.lock(schemaLockName(ctx.schema), lock, async () => {
    try {
      const dropped = await session.maintenance.dropExpiredPartitions(cutoff, runIds);
      if (dropped.length === 0) return;
      ctx.log.info(
        {
          runIds,
          cutoff: iso(cutoff),
          partitions: dropped.map((p) => ({ name: p.name, from: iso(p.start), to: iso(p.end), windows: p.windows })),
        },
        'retention dropped partitions of records wholly older than RETENTION; their windows are marked expired',
      );
      ctx.observer?.partitionsDropped?.({ partitions: dropped });
    } catch (err) {
      ctx.log.warn({ runIds, err: coerceError(err) }, 'retention failed; nothing was dropped, the next run tries again');
    }
  });
  return locked.acquired;
}
