/**
 * Partitions of `records` and RETENTION. A partition holds the rows whose window_start lies in its
 * range, so a window lives in one partition even when it crosses its end. New ones are
 * PARTITION_INTERVAL long (UTC month, ISO week or day), cut short where they would overlap one of
 * another length. There is no DEFAULT partition: a run creates those it needs before loading.
 * Design: docs/design/sync-run.md (creation), docs/design/ledger.md (retention).
 */
import type { PartitionInterval } from '../../../config.js';
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, withTransaction, type PoolClient } from '../../../db/pool.js';
import { asSchemaOwner } from '../../../db/schema-owner.js';
import type { DroppedPartition, Partition } from '../ports.js';
import { expireWindows, loadedByRuns } from './ledger.js';
import type { Tables } from './tables.js';
import type { Window } from '../../windows.js';

const MS_PER_DAY = 86_400_000;
/** 1970-01-01 was a Thursday: Mondays lie 4 days after multiples of a week since the epoch. */
const MONDAY_OFFSET_MS = 4 * MS_PER_DAY;
const MS_PER_WEEK = 7 * MS_PER_DAY;

/** Giving up beats queueing every reader of `records` behind a long query. */
const RETENTION_LOCK_TIMEOUT_MS = 10_000;

/** The range (ms) of the partition of `interval` holding `ms`. */
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

/** `records_20261101_20261201` (UTC; THHMMSS added to a bound that is not midnight). */
export function partitionName(range: Window): string {
  const stamp = (ms: number): string => {
    const text = new Date(ms).toISOString(); // 2026-11-01T00:00:00.000Z
    const date = text.slice(0, 10).replaceAll('-', '');
    return ms % MS_PER_DAY === 0 ? date : `${date}T${text.slice(11, 19).replaceAll(':', '')}`;
  };
  return `records_${stamp(range.start)}_${stamp(range.end)}`;
}

/** For each of `starts` (ms) no partition holds, the interval's range around it, cut short at existing ones. */
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

/** In time order; a DEFAULT or MINVALUE/MAXVALUE partition (never created here) left out. */
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

/** As the schema's owner when this role may act as it: the partitions are the owner's, as `records`. */
async function createPartitions(db: PoolClient, t: Tables, missing: readonly Partition[]): Promise<void> {
  for (const p of missing) {
    // DDL takes no parameters: the bounds are ISO text from Date, the name quoted.
    await db.query(
      `create table if not exists ${quoteIdent(t.schema)}.${quoteIdent(p.name)} partition of ${t.records}
         for values from ('${new Date(p.start).toISOString()}') to ('${new Date(p.end).toISOString()}')`,
    );
  }
  const { rows } = await db.query<{ full: boolean }>(`select relreplident = 'f' as full from pg_class where oid = $1::regclass`, [t.records]);
  if (rows[0]?.full === true) {
    for (const p of missing) await db.query(`alter table ${quoteIdent(t.schema)}.${quoteIdent(p.name)} replica identity full`);
  }
}

/**
 * In one transaction under a lock per schema (sources run at once), as the schema's owner when
 * this role is a member of it but not it (schema-owner.ts); a new partition takes
 * `records`' REPLICA IDENTITY FULL, which PostgreSQL does not pass on.
 * @returns the partitions created, in time order. @throws the database's error.
 */
export async function ensurePartitions(db: PoolClient, t: Tables, starts: readonly number[], interval: PartitionInterval): Promise<Partition[]> {
  if (starts.length === 0) return [];
  return withTransaction(db, async () => {
    await db.query('select pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, `partitions:${t.schema}`]);
    const missing = missingPartitions(starts, await listPartitions(db, t), interval);
    if (missing.length > 0) await asSchemaOwner(db, t.schema, [t.records], () => createPartitions(db, t, missing));
    return missing;
  });
}

/**
 * RETENTION: drops each partition ending at or before `cutoff` (ms) but one holding a window of
 * `runIds`, marking the ledger windows in it expired and deleting their quarantined rows, in one
 * transaction; the caller holds the schema's lock exclusively.
 * @throws the database's error (55P03 after {@link RETENTION_LOCK_TIMEOUT_MS}); nothing is dropped then.
 */
export async function dropExpiredPartitions(db: PoolClient, t: Tables, cutoff: number, runIds: readonly number[]): Promise<DroppedPartition[]> {
  return withTransaction(db, async () => {
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
