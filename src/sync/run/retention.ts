/**
 * RETENTION, global (partitions hold every source's rows): after a run, or once after the runs of
 * several sources (src/app/sync.ts). Design: docs/design/ledger.md.
 */
import { coerceError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { schemaLockName } from './context.js';
import type { LockOptions, StoreSession } from '../store/ports.js';
import type { SyncObserver } from './summary.js';
import { iso } from '../windows.js';

export type RetentionSession = Pick<StoreSession, 'lock'> & { maintenance: Pick<StoreSession['maintenance'], 'dropExpiredPartitions'> };

/**
 * Under the schema's lock taken exclusively; `run.cutoff` in ms. A failure is logged, not thrown.
 * @returns whether the lock was taken.
 * @throws {AbortedError} when `lock.signal` ends the wait; the database's error when the lock cannot be taken.
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
