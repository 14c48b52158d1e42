/**
 * RETENTION during a soak: which day partition it drops, when, and the checks that it did.
 *
 * With PARTITION_INTERVAL=day and SYNC_START_DATE {@link WINDOWS_IN_DROPPED} windows before
 * yesterday's UTC midnight, the oldest partition of `records` is the day before yesterday, holding
 * those windows. RETENTION is
 * chosen so that this partition becomes wholly older than now − RETENTION at 40 % of the
 * soak (its end, yesterday's midnight, equals the cutoff then): serve's next sync run after that
 * drops it and marks its windows expired in the ledger. The other partitions stay.
 */
import type pg from 'pg';
import { partitionName, partitionRange } from '../src/sync/store/pg/partitions.js';
import { formatDuration } from '../src/time.js';
import type { Window } from '../src/sync/windows.js';

const MS_PER_DAY = 86_400_000;
/** Windows the first run loads into the partition retention drops: a few, so that expiry is checked on more than one. */
export const WINDOWS_IN_DROPPED = 6;

/** What the soak sets up for retention, all derived from its start. */
export interface RetentionPlan {
  /** SYNC_START_DATE: {@link WINDOWS_IN_DROPPED} windows before `dropped.end`. */
  syncStart: Date;
  /** The partition that must be dropped, and its table name (unqualified). */
  dropped: Window;
  partition: string;
  /** RETENTION in milliseconds and as the setting's text. */
  retentionMs: number;
  retention: string;
  /** When the cutoff reaches `dropped.end`: the first sync run after this drops the partition. */
  dropDueAt: Date;
}

/**
 * When the partition becomes droppable, as a share of the soak: 0.4, clear of the SIGHUP at 1/3
 * and of replica B's SIGKILL at 1/2. At 1/2 (before 2026-11-27) the drop and the kill fell on
 * the same second: the 30-minute soak saw the partition gone at 15.0 min while both replicas'
 * `retention_partitions_dropped_total` read 0 (B dropped it and was killed before a sample
 * counted it), and failed the check.
 */
export const DROP_SHARE = 0.4;

/**
 * Plans retention for a soak of `minutes` starting at `startedAt`.
 * @param dropShare when the partition becomes droppable, as a share of the soak ({@link DROP_SHARE}).
 *
 * @param daysBack UTC midnights back to the oldest partition kept (1: yesterday's); the one
 *   dropped is the day before it.
 * @param windowMs SYNC_WINDOW; SYNC_START_DATE is aligned to it so the first window starts there.
 * @returns the plan; RETENTION is whole seconds.
 */
export function planRetention(startedAt: Date, minutes: number, windowMs: number, daysBack = 1, dropShare = DROP_SHARE): RetentionPlan {
  const oldestKept = Math.floor(startedAt.getTime() / MS_PER_DAY) * MS_PER_DAY - daysBack * MS_PER_DAY;
  const syncStart = new Date(oldestKept - WINDOWS_IN_DROPPED * windowMs);
  const dropped = partitionRange(syncStart.getTime(), 'day');
  const dropDue = startedAt.getTime() + minutes * 60_000 * dropShare;
  const retentionMs = Math.round((dropDue - dropped.end) / 1000) * 1000;
  return {
    syncStart,
    dropped,
    partition: partitionName(dropped),
    retentionMs,
    retention: formatDuration(retentionMs),
    dropDueAt: new Date(dropped.end + retentionMs),
  };
}

/** Whether table `partition` exists in `schema` (a harness connection; not counted as serve's). */
export async function partitionExists(admin: pg.Client, schema: string, partition: string): Promise<boolean> {
  const { rows } = await admin.query<{ present: boolean }>(`select to_regclass($1) is not null as present`, [
    `${admin.escapeIdentifier(schema)}.${admin.escapeIdentifier(partition)}`,
  ]);
  return rows[0]!.present;
}

/** The ledger's side of a drop, per source. */
export interface ExpiredLedger {
  /** Per source: windows starting in the dropped range, those of them marked expired, and expired windows outside it. */
  bySource: Record<string, { inRange: number; expired: number; expiredOutside: number; recordsLeft: number }>;
}

/**
 * Reads, per source, the ledger windows of the dropped range and whether they are expired, and the
 * rows `records` still holds there (none may: the partition is gone).
 *
 * @throws pg errors.
 */
export async function readExpiredLedger(admin: pg.Client, schema: string, dropped: Window): Promise<ExpiredLedger> {
  const s = admin.escapeIdentifier(schema);
  const bounds = [new Date(dropped.start), new Date(dropped.end)];
  const { rows } = await admin.query<{ source: string; inRange: string; expired: string; expiredOutside: string }>(
    `select source,
            count(*) filter (where window_start >= $1 and window_start < $2) as "inRange",
            count(*) filter (where window_start >= $1 and window_start < $2 and expired_at is not null) as expired,
            count(*) filter (where not (window_start >= $1 and window_start < $2) and expired_at is not null) as "expiredOutside"
       from ${s}.sync_windows group by source order by source`,
    bounds,
  );
  const { rows: left } = await admin.query<{ source: string; n: string }>(
    `select source, count(*) as n from ${s}.records where window_start >= $1 and window_start < $2 group by source`,
    bounds,
  );
  const bySource: ExpiredLedger['bySource'] = {};
  for (const r of rows)
    bySource[r.source] = { inRange: Number(r.inRange), expired: Number(r.expired), expiredOutside: Number(r.expiredOutside), recordsLeft: 0 };
  for (const r of left) (bySource[r.source] ??= { inRange: 0, expired: 0, expiredOutside: 0, recordsLeft: 0 }).recordsLeft = Number(r.n);
  return { bySource };
}
