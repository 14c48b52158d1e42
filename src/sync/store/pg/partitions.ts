/**
 * Partitions of `records` and retention.
 *
 * Glossary
 * - partition: a child table of `records` holding the rows whose window_start lies in its range
 *   [start, end), named `records_<start>_<end>` after that range in UTC (YYYYMMDD, with THHMMSS
 *   when a bound is not midnight). A window's rows share window_start, so a window lives in one
 *   partition even when it crosses the partition's end.
 * - interval: the length of the partitions the sync creates (PARTITION_INTERVAL): a calendar month,
 *   an ISO week (Monday to Monday) or a day, in UTC. Partitions of another length that exist
 *   already (created under another interval, or by the migration, which creates months) are kept;
 *   a new partition is cut short where it would overlap one.
 * - expired window: a ledger window whose partition RETENTION dropped (`sync_windows.expired_at`).
 *
 * There is no DEFAULT partition: a row outside every partition is refused, and the sync creates
 * the partitions a run needs before it loads anything.
 */
import type { PartitionInterval } from '../../../config.js';
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, withTransaction, type PoolClient } from '../../../db/pool.js';
import type { DroppedPartition, Partition } from '../ports.js';
import { expireWindows, loadedByRuns } from './ledger.js';
import type { Tables } from './tables.js';
import type { Window } from '../../windows.js';

const MS_PER_DAY = 86_400_000;
/** 1970-01-01 was a Thursday: Mondays lie 4 days after multiples of a week since the epoch. */
const MONDAY_OFFSET_MS = 4 * MS_PER_DAY;
const MS_PER_WEEK = 7 * MS_PER_DAY;

/** How long retention waits for the lock on `records` that dropping a partition takes. */
export const RETENTION_LOCK_TIMEOUT_MS = 10_000;

/**
 * The range of the partition of `interval` holding `ms` (UTC calendar month, ISO week from Monday,
 * or day).
 *
 * @param ms a window start, milliseconds since the epoch.
 * @returns [start, end) in milliseconds, with start ≤ ms < end.
 */
export function partitionRange(ms: number, interval: PartitionInterval): Window {
  if (interval === 'day') {
    const start = Math.floor(ms / MS_PER_DAY) * MS_PER_DAY;
    return { start, end: start + MS_PER_DAY };
  }
  if (interval === 'week') {
    const start = Math.floor((ms - MONDAY_OFFSET_MS) / MS_PER_WEEK) * MS_PER_WEEK + MONDAY_OFFSET_MS;
    return { start, end: start + MS_PER_WEEK };
  }
  const d = new Date(ms);
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

/** `records_20261101_20261201`: the partition's name after its range (UTC; THHMMSS added to a bound that is not midnight). */
export function partitionName(range: Window): string {
  const stamp = (ms: number): string => {
    const text = new Date(ms).toISOString(); // 2026-11-01T00:00:00.000Z
    const date = text.slice(0, 10).replaceAll('-', '');
    return ms % MS_PER_DAY === 0 ? date : `${date}T${text.slice(11, 19).replaceAll(':', '')}`;
  };
  return `records_${stamp(range.start)}_${stamp(range.end)}`;
}

/**
 * The partitions to create so that every one of `starts` lies in a partition: for each start no
 * partition holds, the interval's range around it, cut short where it would overlap an existing
 * partition (or one planned before it). Pure; {@link ensurePartitions} runs it on the catalogue.
 *
 * @param starts window starts in milliseconds, in any order.
 * @param existing the partitions there are (disjoint).
 * @returns new disjoint partitions, in time order.
 */
export function missingPartitions(starts: readonly number[], existing: readonly Window[], interval: PartitionInterval): Partition[] {
  const known: Window[] = [...existing];
  const created: Partition[] = [];
  for (const start of [...new Set(starts)].sort((a, b) => a - b)) {
    if (known.some((p) => p.start <= start && start < p.end)) continue;
    const range = partitionRange(start, interval);
    for (const p of known) {
      if (p.end <= start && p.end > range.start) range.start = p.end;
      if (p.start > start && p.start < range.end) range.end = p.start;
    }
    const partition = { ...range, name: partitionName(range) };
    known.push(partition);
    created.push(partition);
  }
  return created;
}

/**
 * The partitions of `records` with a range bound (a DEFAULT or MINVALUE/MAXVALUE partition, which
 * the exporter never creates, is left out), in time order.
 */
export async function listPartitions(db: PoolClient, t: Tables): Promise<Partition[]> {
  // pg_get_expr writes the bounds as timestamptz literals with their offset: cast back, exact.
  const { rows } = await db.query<{ name: string; start: Date | null; end: Date | null }>(
    `select c.relname as "name", b.bounds[1]::timestamptz as "start", b.bounds[2]::timestamptz as "end"
       from pg_inherits i
       join pg_class c on c.oid = i.inhrelid
       cross join lateral regexp_match(pg_get_expr(c.relpartbound, c.oid), $$FROM \\('([^']+)'\\) TO \\('([^']+)'\\)$$) as b(bounds)
      where i.inhparent = $1::regclass
      order by 2`,
    [t.records],
  );
  return rows.filter((r) => r.start !== null && r.end !== null).map((r) => ({ name: r.name, start: r.start!.getTime(), end: r.end!.getTime() }));
}

/**
 * Creates, in one transaction, the partitions of `records` that rows of windows starting at
 * `starts` need (see {@link missingPartitions}). Partitions are shared by every source, whose runs
 * go on at once: a transaction-level advisory lock per schema makes one run at a time read the
 * catalogue and create what is missing (`if not exists` alone does not make two concurrent
 * creations of one table safe). A partition gets `REPLICA IDENTITY FULL` when `records` has it
 * (PostgreSQL does not pass it on), so that a publication publishing deletes of `records`
 * (docs/deploy.md, logical replication) takes a window's delete in a new partition too.
 *
 * @returns the partitions created, in time order (empty when every start has its partition).
 * @throws the database's error (pg DatabaseError) when the catalogue cannot be read or a table created.
 */
export async function ensurePartitions(db: PoolClient, t: Tables, starts: readonly number[], interval: PartitionInterval): Promise<Partition[]> {
  if (starts.length === 0) return [];
  return withTransaction(db, async () => {
    await db.query('select pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `partitions:${t.schema}`]);
    const missing = missingPartitions(starts, await listPartitions(db, t), interval);
    for (const p of missing) {
      // DDL takes no parameters; both bounds are ISO text from Date, and the name is quoted.
      await db.query(
        `create table if not exists ${quoteIdent(t.schema)}.${quoteIdent(p.name)} partition of ${t.records}
           for values from ('${new Date(p.start).toISOString()}') to ('${new Date(p.end).toISOString()}')`,
      );
    }
    if (missing.length > 0) {
      const { rows } = await db.query<{ full: boolean }>(`select relreplident = 'f' as full from pg_class where oid = $1::regclass`, [t.records]);
      if (rows[0]?.full === true) {
        for (const p of missing) await db.query(`alter table ${quoteIdent(t.schema)}.${quoteIdent(p.name)} replica identity full`);
      }
    }
    return missing;
  });
}

/**
 * Retention: drops every partition of `records` whose whole range is older than `cutoff`
 * (end ≤ cutoff: a partly covered partition stays), except one holding a window one of the runs
 * `runIds` loaded (an explicit `sync --from` of old windows keeps what it loaded until the next
 * run). Partitions hold every source's rows: the caller holds the schema's sync lock exclusively,
 * so no source's window is being written into one (src/sync/run/run.ts). In
 * one transaction with the drops, the ledger windows starting in a dropped range are marked
 * expired, so later runs do not load them again, and their quarantined records are deleted.
 * Nothing else is touched: tables derived from records keep their rows.
 *
 * @param cutoff milliseconds since the epoch: now minus RETENTION.
 * @returns the partitions dropped, in time order.
 * @throws the database's error (55P03 lock_not_available after {@link RETENTION_LOCK_TIMEOUT_MS}
 *   waiting for a reader of `records`); then nothing is dropped.
 */
export async function dropExpiredPartitions(db: PoolClient, t: Tables, cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]> {
  return withTransaction(db, async () => {
    // Dropping a partition locks records exclusively: rather than queue every reader behind a long
    // dashboard query, give up and let the next run try again.
    await db.query(`set local lock_timeout = '${RETENTION_LOCK_TIMEOUT_MS}ms'`);
    const dropped: DroppedPartition[] = [];
    for (const p of await listPartitions(db, t)) {
      if (p.end > cutoff) continue;
      if (await loadedByRuns(db, t, p, runIds)) continue;
      const windows = await expireWindows(db, t, p);
      await db.query(`delete from ${t.quarantine} where window_start >= $1 and window_start < $2`, [new Date(p.start), new Date(p.end)]);
      await db.query(`drop table ${quoteIdent(t.schema)}.${quoteIdent(p.name)}`);
      dropped.push({ ...p, windows });
    }
    return dropped;
  });
}
