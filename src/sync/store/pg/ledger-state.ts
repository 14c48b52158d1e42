/**
 * A source's sync state as the `state` commands show and change it, in PostgreSQL: the watermark
 * (sync_state), the last run (sync_runs), the ledger's windows by state (sync_windows), the last
 * full audit's verified-through (sync_state.verified_through), and the windows `state reset` marks
 * for re-load (sync_windows.reload_requested_at, planned by plan.ts).
 *
 * Glossary (windows.ts has the rest)
 * - committed window: loaded, its records stored (status `committed`, not expired).
 * - parked window: could not be loaded for a reason of its own (parked.ts), not expired.
 * - expired window: RETENTION dropped its partition (expired_at); committed or parked before.
 * - unloaded stretch: a part of time no committed or expired window covers (a gap in the
 *   ledger, or a parked window); moving the watermark forward past one skips it for good.
 *
 * Every function runs on the caller's connection, which holds the source's sync lock (the one a
 * run takes: context.ts sourceLockName), so no run of the source changes the ledger meanwhile.
 */
import type { PoolClient } from '../../../db/pool.js';
import { InvalidArgumentError } from '../../../errors.js';
import type { Tables } from './sql.js';
import { iso, type Window } from '../../windows.js';

/** Windows of one state in the ledger: how many, and the span from the first's start to the last's end. */
export interface WindowGroup {
  count: number;
  /** Start of the earliest (ms), or undefined when there is none. */
  from: number | undefined;
  /** End of the latest (ms), or undefined when there is none. */
  to: number | undefined;
}

/** One source's state. */
export interface SourceState {
  source: string;
  /** The watermark (ms), or undefined before the source's first window. */
  watermark: number | undefined;
  /** The source's latest run (by start), or undefined before its first. */
  lastRun:
    | {
        id: number;
        status: 'running' | 'succeeded' | 'failed' | 'interrupted' | 'abandoned';
        startedAt: number;
        finishedAt: number | undefined;
        /** The first line of its error, or undefined. */
        error: string | undefined;
      }
    | undefined;
  windows: {
    /** Committed windows but the expired ones, and the records they hold (the ledger's record_count). */
    committed: WindowGroup & { records: number };
    /** Parked windows but the expired ones. */
    parked: WindowGroup;
    /** Windows whose records RETENTION dropped (committed or parked before). */
    expired: WindowGroup;
    /** Committed and parked windows `state reset` marked for re-load by the next run. */
    reloadRequested: WindowGroup;
  };
  /**
   * The last audit of every retained window (`verify` without --from/--to, AUDIT_SCHEDULE): the end
   * of the latest window with no difference left in it or before it (ms; undefined when none), and
   * when it was recorded (ms; undefined before the first such audit).
   */
  verified: { through: number | undefined; at: number | undefined };
}

/** `2026-10-02T00:00:00.000Z` to ms, a null to undefined. */
const ms = (d: Date | null | undefined): number | undefined => (d === null || d === undefined ? undefined : d.getTime());

/** Reads `source`'s state (see {@link SourceState}); a source that never ran has no watermark, run or window. */
export async function readSourceState(db: Pick<PoolClient, 'query'>, t: Tables, source: string): Promise<SourceState> {
  const state = await db.query<{ watermark: Date | null; verified_through: Date | null; verified_at: Date | null }>(
    `select watermark, verified_through, verified_at from ${t.state} where source = $1`,
    [source],
  );
  const run = await db.query<{
    id: string;
    status: NonNullable<SourceState['lastRun']>['status'];
    started_at: Date;
    finished_at: Date | null;
    error: string | null;
  }>(`select id, status, started_at, finished_at, error from ${t.runs} where source = $1 order by started_at desc, id desc limit 1`, [source]);
  const groups = await db.query<{ state: string; n: string; first: Date | null; last: Date | null; records: string | null }>(
    `select s.state, count(*) as n, min(w.window_start) as first, max(w.window_end) as last, sum(w.record_count) as records
       from ${t.windows} w
       cross join lateral (values
         (case when w.expired_at is not null then 'expired' else w.status end),
         (case when w.reload_requested_at is not null and w.expired_at is null then 'reload' end)) as s(state)
      where w.source = $1 and s.state is not null
      group by s.state`,
    [source],
  );
  const group = (name: string): WindowGroup & { records: number } => {
    const row = groups.rows.find((r) => r.state === name);
    return { count: Number(row?.n ?? 0), from: ms(row?.first), to: ms(row?.last), records: Number(row?.records ?? 0) };
  };
  const plain = ({ count, from, to }: WindowGroup): WindowGroup => ({ count, from, to });
  const last = run.rows[0];
  const s = state.rows[0];
  return {
    source,
    watermark: ms(s?.watermark),
    lastRun:
      last === undefined
        ? undefined
        : {
            id: Number(last.id),
            status: last.status,
            startedAt: last.started_at.getTime(),
            finishedAt: ms(last.finished_at),
            error: last.error === null ? undefined : last.error.split('\n', 1)[0],
          },
    windows: {
      committed: group('committed'),
      parked: plain(group('parked')),
      expired: plain(group('expired')),
      reloadRequested: plain(group('reload')),
    },
    verified: { through: ms(s?.verified_through), at: ms(s?.verified_at) },
  };
}

/** A ledger window as the watermark's check reads it. */
export interface LedgerWindow extends Window {
  /** Committed or expired: its records were loaded (RETENTION may have dropped them since). */
  loaded: boolean;
}

/**
 * The first stretch of [from, to) that is not loaded: a gap no ledger window covers, or a parked
 * window (clipped to the range), in time order. Pure.
 *
 * @param ledger the ledger's windows overlapping the range, any order (they never overlap).
 * @returns undefined when committed or expired windows cover all of [from, to).
 */
export function firstUnloaded(from: number, to: number, ledger: readonly LedgerWindow[]): Window | undefined {
  let at = from;
  for (const w of [...ledger].sort((a, b) => a.start - b.start)) {
    if (w.end <= at) continue;
    if (w.start >= to) break;
    if (w.start > at) return { start: at, end: w.start };
    if (!w.loaded) return { start: at, end: Math.min(w.end, to) };
    at = w.end;
    if (at >= to) return undefined;
  }
  return at < to ? { start: at, end: to } : undefined;
}

/** What {@link setWatermark} did. */
export interface WatermarkMove {
  /** The watermark before (ms), or undefined when the source had none. */
  before: number | undefined;
  after: number;
  /** With `force`: the first unloaded stretch it moved past (see {@link firstUnloaded}). */
  skipped: Window | undefined;
}

/**
 * Sets `source`'s watermark to `to` (ms), in one transaction of the caller's. Moving it back makes
 * the next resumed run plan from there (minus SYNC_LOOKBACK: plan.ts), loading every window after
 * it again. Moving it forward makes the next run skip what lies between: refused, unless `force`,
 * when a stretch of it is not loaded ({@link firstUnloaded}), counted from the watermark, or from
 * `origin` (the configured START_DATE) before the source's first window.
 *
 * @throws {InvalidArgumentError} naming `--force` and the first unloaded stretch, when refused.
 */
export async function setWatermark(
  db: Pick<PoolClient, 'query'>,
  t: Tables,
  source: string,
  move: { to: number; force: boolean; origin: number },
): Promise<WatermarkMove> {
  const { rows } = await db.query<{ watermark: Date | null }>(`select watermark from ${t.state} where source = $1 for update`, [source]);
  const before = ms(rows[0]?.watermark);
  const from = before ?? move.origin;
  let skipped: Window | undefined;
  if (move.to > from) {
    const ledger = await db.query<{ start: Date; end: Date; loaded: boolean }>(
      `select window_start as "start", window_end as "end", (status = 'committed' or expired_at is not null) as loaded
         from ${t.windows} where source = $1 and window_start < $3 and window_end > $2`,
      [source, new Date(from), new Date(move.to)],
    );
    skipped = firstUnloaded(
      from,
      move.to,
      ledger.rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), loaded: r.loaded })),
    );
    if (skipped !== undefined && !move.force) {
      throw new InvalidArgumentError(
        `moving the watermark of source ${source} forward to ${iso(move.to)} would skip windows that are not loaded, the first [${iso(skipped.start)}, ${iso(skipped.end)}); ` +
          'the next run would never load them. Pass --force to move it anyway',
      );
    }
  }
  await db.query(
    `insert into ${t.state} as s (source, watermark) values ($1, $2)
       on conflict (source) do update set watermark = $2, updated_at = now()`,
    [source, new Date(move.to)],
  );
  return { before, after: move.to, skipped };
}

/** What {@link markForReload} marked, and what it left. */
export interface ReloadMarks {
  /** Ledger windows marked, in time order (whole: those overlapping the range). */
  windows: (Window & { status: 'committed' | 'parked' })[];
  /** Expired windows overlapping the range, left as they are. */
  expired: number;
}

/**
 * Marks `source`'s ledger windows overlapping `range` (whole windows, committed and parked, not
 * the expired ones) for re-load by the next resumed run (plan.ts), in one statement. Their records
 * stay until that load replaces them; the watermark does not move.
 */
export async function markForReload(db: Pick<PoolClient, 'query'>, t: Tables, source: string, range: Window): Promise<ReloadMarks> {
  const bounds = [source, new Date(range.start), new Date(range.end)];
  const { rows } = await db.query<{ start: Date; end: Date; status: 'committed' | 'parked' }>(
    `update ${t.windows} set reload_requested_at = now()
      where source = $1 and expired_at is null and window_start < $3 and window_end > $2
      returning window_start as "start", window_end as "end", status`,
    bounds,
  );
  const expired = await db.query<{ n: number }>(
    `select count(*)::int as n from ${t.windows} where source = $1 and expired_at is not null and window_start < $3 and window_end > $2`,
    bounds,
  );
  const windows = rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), status: r.status })).sort((a, b) => a.start - b.start);
  return { windows, expired: expired.rows[0]?.n ?? 0 };
}

/** The source's windows marked for re-load but the expired ones, in time order (the port's reloadWindows). */
export async function reloadWindows(db: Pick<PoolClient, 'query'>, t: Tables, source: string): Promise<Window[]> {
  const { rows } = await db.query<{ start: Date; end: Date }>(
    `select window_start as "start", window_end as "end" from ${t.windows}
      where source = $1 and reload_requested_at is not null and expired_at is null order by window_start`,
    [source],
  );
  return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime() }));
}

/**
 * Records a full audit's verified-through (the port's recordVerified) in the source's state row. A
 * source without one has no window, so nothing was audited: nothing is recorded.
 */
export async function recordVerified(db: Pick<PoolClient, 'query'>, t: Tables, source: string, through: number | undefined): Promise<void> {
  await db.query(`update ${t.state} set verified_through = $2, verified_at = now() where source = $1`, [
    source,
    through === undefined ? null : new Date(through),
  ]);
}
