/**
 * Parked windows in the ledger (`sync_windows.status = 'parked'`), in PostgreSQL.
 *
 * Glossary
 * - parked window: a window that could not be loaded for a reason of its own (park.ts says which
 *   reasons). It keeps what was stored for it before (its records, its counts), carries the
 *   reason, and counts for the watermark like a committed window, so the source goes on past it. Loading it again (the lookback, `sync --from/--to` over it, the
 *   audit) clears it like any window in range and records it committed.
 */
import type { PoolClient } from '../../../db/pool.js';
import { storableText } from '../../../errors.js';
import type { Tables, WindowTarget } from './sql.js';
import { subtractWindows, type Window } from '../../windows.js';

/** A parked window as the ledger holds it. */
export interface ParkedWindow extends Window {
  /** Why it is parked: the error's text, sanitised ({@link storableText}). */
  reason: string;
  /** When it was last parked (ms since the epoch). */
  parkedAt: number;
  /** Records still stored for it, from a load before it was parked (0 when it never loaded). */
  recordCount: number;
  /** The run that parked it. */
  runId: number;
  /** Whether RETENTION dropped its partition since (an expired window is not loaded again but by `--from`). */
  expired: boolean;
}

/**
 * Parks `target.window` in one statement group of the caller's transaction: the ledger rows inside
 * it (windows committed before, whose records stay) become parked with `reason` (a `state reset`
 * mark on them is cleared: the run tried), the rest of it gets
 * parked rows of no records, and the watermark advances past it as store.ts recordWindow advances it
 * for a committed window (only when the window starts at or before it: it never jumps a gap).
 *
 * @param reason the error's text; stored as {@link storableText} makes it.
 * @returns the watermark after it (ms).
 */
export async function parkWindow(db: PoolClient, target: WindowTarget, reason: string): Promise<number | undefined> {
  const { t, source, window, runId } = target;
  const text = storableText(reason);
  const bounds = [new Date(window.start), new Date(window.end), source];
  const { rows } = await db.query<{ start: Date; end: Date }>(
    `update ${t.windows} set status = 'parked', reason = $4, parked_at = now(), run_id = $5, reload_requested_at = null
      where source = $3 and window_start >= $1 and window_start < $2
      returning window_start as "start", window_end as "end"`,
    [...bounds, text, runId],
  );
  const held = rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime() }));
  for (const gap of subtractWindows([window], held)) {
    await db.query(
      `insert into ${t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id, status, reason, parked_at)
       values ($3, $1, $2, 0, 0, 0, $4, 'parked', $5, now())`,
      [new Date(gap.start), new Date(gap.end), source, runId, text],
    );
  }
  const watermark = await db.query<{ watermark: Date | null }>(
    `insert into ${t.state} as s (source, watermark) values ($3, $2)
       on conflict (source) do update
        set watermark = case when s.watermark is null or $1 <= s.watermark then greatest(s.watermark, $2) else s.watermark end,
            updated_at = now()
      returning watermark`,
    bounds,
  );
  return watermark.rows[0]?.watermark?.getTime() ?? undefined;
}

/**
 * The source's parked windows overlapping `range` (all of them without one), in time order,
 * expired ones included (flagged).
 */
export async function parkedWindows(db: Pick<PoolClient, 'query'>, t: Tables, source: string, range?: Window): Promise<ParkedWindow[]> {
  const { rows } = await db.query<{ start: Date; end: Date; reason: string; parkedAt: Date; recordCount: string; runId: string; expired: boolean }>(
    `select window_start as "start", window_end as "end", reason, parked_at as "parkedAt", record_count as "recordCount",
            run_id as "runId", expired_at is not null as expired
       from ${t.windows}
      where source = $1 and status = 'parked'
        and ($2::timestamptz is null or window_end > $2) and ($3::timestamptz is null or window_start < $3)
      order by window_start`,
    [source, range === undefined ? null : new Date(range.start), range === undefined ? null : new Date(range.end)],
  );
  return rows.map((r) => ({
    start: r.start.getTime(),
    end: r.end.getTime(),
    reason: r.reason,
    parkedAt: r.parkedAt.getTime(),
    recordCount: Number(r.recordCount),
    runId: Number(r.runId),
    expired: r.expired,
  }));
}

/** How many of the source's parked windows are not expired: `analytics_exporter_sync_windows_parked`. */
export async function countParkedWindows(db: Pick<PoolClient, 'query'>, t: Tables, source: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from ${t.windows} where source = $1 and status = 'parked' and expired_at is null`, [
    source,
  ]);
  return rows[0]?.n ?? 0;
}
