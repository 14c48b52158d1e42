/**
 * The ledger in PostgreSQL: every statement on `sync_windows`, `sync_state` and `sync_runs`. One
 * source's rows through {@link PgLedger}; the schema-wide statements retention needs as functions.
 *
 * Invariants: the watermark only advances over a window that starts at or before it (it never
 * jumps a gap) except through `state set-watermark`; a parked window's records stay; an expired
 * window is loaded again only by `sync --from`. Design: docs/design/ledger.md.
 */
import { withTransaction, type PoolClient } from '../../../db/pool.js';
import { InvalidArgumentError, storableText } from '../../../errors.js';
import type {
  Ledger,
  LedgerCount,
  ParkedWindow,
  ReloadMarks,
  RunEnding,
  SourceState,
  StoredWindow,
  TextBag,
  WatermarkMove,
  WindowCounts,
  WindowGroup,
} from '../ports.js';
import { iso, subtractWindows, type Window } from '../../windows.js';
import type { Queryable, Tables } from './tables.js';

const ms = (d: Date | null | undefined): number | undefined => (d === null || d === undefined ? undefined : d.getTime());
const windowsOf = (rows: readonly { start: Date; end: Date }[]): Window[] => rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime() }));

/** The watermark rule ($1 start, $2 end, $3 source). */
const ADVANCE_WATERMARK = (t: Tables) => `insert into ${t.state} as s (source, watermark) values ($3, $2)
       on conflict (source) do update
        set watermark = case when s.watermark is null or $1 <= s.watermark then greatest(s.watermark, $2) else s.watermark end,
            updated_at = now()
      returning watermark`;

/** One source's ledger, on one connection (inside the caller's transaction, if any). */
export class PgLedger implements Ledger {
  constructor(
    private readonly db: PoolClient,
    private readonly t: Tables,
    readonly source: string,
  ) {}

  async readWatermark(): Promise<number | undefined> {
    const { rows } = await this.db.query<{ watermark: Date | null }>(`select watermark from ${this.t.state} where source = $1`, [this.source]);
    return ms(rows[0]?.watermark);
  }

  async committedWindows(range: Window): Promise<Window[]> {
    const { rows } = await this.db.query<{ start: Date; end: Date }>(
      `select window_start as "start", window_end as "end" from ${this.t.windows}
        where source = $3 and status = 'committed' and window_start < $2 and window_end > $1 order by window_start`,
      [new Date(range.start), new Date(range.end), this.source],
    );
    return windowsOf(rows);
  }

  async expiredWindows(range: Window): Promise<Window[]> {
    const { rows } = await this.db.query<{ start: Date; end: Date }>(
      `select window_start as "start", window_end as "end" from ${this.t.windows}
        where source = $3 and expired_at is not null and window_start < $2 and window_end > $1 order by window_start`,
      [new Date(range.start), new Date(range.end), this.source],
    );
    return windowsOf(rows);
  }

  async reloadWindows(): Promise<Window[]> {
    const { rows } = await this.db.query<{ start: Date; end: Date }>(
      `select window_start as "start", window_end as "end" from ${this.t.windows}
        where source = $1 and reload_requested_at is not null and expired_at is null order by window_start`,
      [this.source],
    );
    return windowsOf(rows);
  }

  async parkedWindows(range?: Window): Promise<ParkedWindow[]> {
    const { rows } = await this.db.query<{ start: Date; end: Date; reason: string; parkedAt: Date; recordCount: string; runId: string; expired: boolean }>(
      `select window_start as "start", window_end as "end", reason, parked_at as "parkedAt", record_count as "recordCount",
              run_id as "runId", expired_at is not null as expired
         from ${this.t.windows}
        where source = $1 and status = 'parked'
          and ($2::timestamptz is null or window_end > $2) and ($3::timestamptz is null or window_start < $3)
        order by window_start`,
      [this.source, range === undefined ? null : new Date(range.start), range === undefined ? null : new Date(range.end)],
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

  /** Parked windows not expired: `analytics_exporter_sync_windows_parked`. */
  async countParked(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      `select count(*)::int as n from ${this.t.windows} where source = $1 and status = 'parked' and expired_at is null`,
      [this.source],
    );
    return rows[0]?.n ?? 0;
  }

  async auditWindows(range: Window): Promise<StoredWindow[]> {
    const { t } = this;
    type Row = { start: Date; end: Date; stored: string; seen: string; followsLedger: boolean; parked: boolean; claimed: string | null; served: string | null };
    const { rows } = await this.db.query<Row>(
      `with w as (
         select window_start, window_end, status, total_records, short_claimed, short_served from ${t.windows}
          where source = $3 and expired_at is null and window_start < $2 and window_end > $1),
       bounds as (select min(window_start) as lo, max(window_start) as hi from w),
       r as (
         select window_start, count(*) as n from ${t.records}, bounds
          where source = $3 and window_start >= bounds.lo and window_start <= bounds.hi group by window_start),
       q as (
         select window_start, count(*) as n from ${t.quarantine}, bounds
          where source = $3 and window_start >= bounds.lo and window_start <= bounds.hi group by window_start)
       select w.window_start as "start", w.window_end as "end", coalesce(r.n, 0) + coalesce(q.n, 0) as stored, w.total_records as seen,
              exists (select 1 from ${t.windows} p where p.source = $3 and p.window_end = w.window_start) as "followsLedger",
              w.status = 'parked' as parked, w.short_claimed as claimed, w.short_served as served
         from w left join r using (window_start) left join q using (window_start)
        order by w.window_start`,
      [new Date(range.start), new Date(range.end), this.source],
    );
    return rows.map((r) => ({
      start: r.start.getTime(),
      end: r.end.getTime(),
      stored: Number(r.stored),
      seen: Number(r.seen),
      followsLedger: r.followsLedger,
      parked: r.parked,
      ...(r.claimed === null ? {} : { short: { claimed: Number(r.claimed), served: Number(r.served) } }),
    }));
  }

  async ledgerCounts(range: Window): Promise<LedgerCount[]> {
    const { rows } = await this.db.query<{ start: Date; end: Date; total: string }>(
      `(select window_start as "start", window_end as "end", total_records as "total" from ${this.t.windows}
         where source = $3 and status = 'committed' and window_start < $2 and window_end > $1)
       union all
       (select window_start, window_end, total_records from ${this.t.windows}
         where source = $3 and status = 'committed' and window_end <= $1 order by window_end desc limit 1)`,
      [new Date(range.start), new Date(range.end), this.source],
    );
    return rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), totalRecords: Number(r.total) }));
  }

  async heldAtEnd(end: number, boundarySet: TextBag): Promise<TextBag> {
    const { t, source } = this;
    const { rows: windows } = await this.db.query<{ start: Date; owns: boolean }>(
      `select window_start as start, (status = 'parked' or expired_at is not null) as owns from ${t.windows} where source = $1 and window_end = $2`,
      [source, new Date(end)],
    );
    const window = windows[0];
    if (window === undefined) return new Map();
    if (window.owns) return new Map(boundarySet);
    const texts = [...boundarySet.keys()];
    // One pass over the window's rows (a hash join on the payload), not one per text.
    const { rows } = await this.db.query<{ i: number; n: number }>(
      `with b as (select text, i, ${t.tryJsonb}(text) as payload from unnest($3::text[]) with ordinality as u(text, i)),
            r as (select b.i, count(*) as n from b join ${t.records} r on r.payload = b.payload where r.source = $1 and r.window_start = $2 group by b.i),
            q as (select b.i, count(*) as n from b join ${t.quarantine} q on q.payload_text = b.text where q.source = $1 and q.window_start = $2 group by b.i)
       select b.i::int as i, (coalesce(r.n, 0) + coalesce(q.n, 0))::int as n from b left join r using (i) left join q using (i)`,
      [source, window.start, texts],
    );
    const held = new Map<string, number>();
    for (const { i, n } of rows) {
      const text = texts[i - 1]!;
      if (n > 0) held.set(text, Math.min(n, boundarySet.get(text)!));
    }
    return held;
  }

  async abandonStaleRuns(): Promise<number> {
    const { rowCount } = await this.db.query(`update ${this.t.runs} set status = 'abandoned', finished_at = now() where source = $1 and status = 'running'`, [
      this.source,
    ]);
    return rowCount ?? 0;
  }

  async startRun(range: Window): Promise<number> {
    const { rows } = await this.db.query<{ id: string }>(`insert into ${this.t.runs} (source, range_start, range_end) values ($3, $1, $2) returning id`, [
      new Date(range.start),
      new Date(range.end),
      this.source,
    ]);
    return Number(rows[0]!.id);
  }

  async finishRun(runId: number, ending: RunEnding): Promise<void> {
    // storableText: recording a failure never fails on its text (NUL, lone surrogates, length).
    await this.db.query(`update ${this.t.runs} set finished_at = now(), status = $2, windows = $3, pages = $4, records = $5, error = $6 where id = $1`, [
      runId,
      ending.status,
      ending.windows,
      ending.pages,
      ending.records,
      ending.error === undefined ? null : storableText(ending.error),
    ]);
  }

  /** @returns the watermark after (ms). */
  async recordWindow(window: Window, runId: number, counts: WindowCounts): Promise<number | undefined> {
    await this.db.query(
      `insert into ${this.t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id, short_claimed, short_served)
       values ($7, $1, $2, $3, $4, $5, $6, $8, $9)`,
      [
        new Date(window.start),
        new Date(window.end),
        counts.recordCount,
        counts.totalRecords,
        counts.pages,
        runId,
        this.source,
        counts.short?.claimed ?? null,
        counts.short?.served ?? null,
      ],
    );
    const { rows } = await this.db.query<{ watermark: Date | null }>(ADVANCE_WATERMARK(this.t), [new Date(window.start), new Date(window.end), this.source]);
    return ms(rows[0]?.watermark);
  }

  async clearWindows(window: Window): Promise<void> {
    await this.db.query(`delete from ${this.t.windows} where source = $3 and window_start >= $1 and window_start < $2`, [
      new Date(window.start),
      new Date(window.end),
      this.source,
    ]);
  }

  parkWindow(of: { window: Window; runId: number }, reason: string): Promise<number | undefined> {
    return withTransaction(this.db, () => this.#park(of.window, of.runId, reason));
  }

  async #park(window: Window, runId: number, reason: string): Promise<number | undefined> {
    const text = storableText(reason);
    const bounds = [new Date(window.start), new Date(window.end), this.source];
    const { rows } = await this.db.query<{ start: Date; end: Date }>(
      `update ${this.t.windows} set status = 'parked', reason = $4, parked_at = now(), run_id = $5, reload_requested_at = null
        where source = $3 and window_start >= $1 and window_start < $2
        returning window_start as "start", window_end as "end"`,
      [...bounds, text, runId],
    );
    for (const gap of subtractWindows([window], windowsOf(rows))) {
      await this.db.query(
        `insert into ${this.t.windows} (source, window_start, window_end, record_count, total_records, pages, run_id, status, reason, parked_at)
         values ($3, $1, $2, 0, 0, 0, $4, 'parked', $5, now())`,
        [new Date(gap.start), new Date(gap.end), this.source, runId, text],
      );
    }
    const watermark = await this.db.query<{ watermark: Date | null }>(ADVANCE_WATERMARK(this.t), bounds);
    return ms(watermark.rows[0]?.watermark);
  }

  async recordVerified(through: number | undefined): Promise<void> {
    await this.db.query(`update ${this.t.state} set verified_through = $2, verified_at = now() where source = $1`, [
      this.source,
      through === undefined ? null : new Date(through),
    ]);
  }

  async state(): Promise<SourceState> {
    const { t, source } = this;
    const state = await this.db.query<{ watermark: Date | null; verified_through: Date | null; verified_at: Date | null }>(
      `select watermark, verified_through, verified_at from ${t.state} where source = $1`,
      [source],
    );
    type LastRun = NonNullable<SourceState['lastRun']>;
    const run = await this.db.query<{ id: string; status: LastRun['status']; started_at: Date; finished_at: Date | null; error: string | null }>(
      `select id, status, started_at, finished_at, error from ${t.runs} where source = $1 order by started_at desc, id desc limit 1`,
      [source],
    );
    type Group = { state: string; n: string; first: Date | null; last: Date | null; records: string | null; claimed: string | null; served: string | null };
    const groups = await this.db.query<Group>(
      `select s.state, count(*) as n, min(w.window_start) as first, max(w.window_end) as last, sum(w.record_count) as records,
              sum(w.short_claimed) as claimed, sum(w.short_served) as served
         from ${t.windows} w
         cross join lateral (values
           (case when w.expired_at is not null then 'expired' else w.status end),
           (case when w.reload_requested_at is not null and w.expired_at is null then 'reload' end),
           (case when w.short_claimed is not null and w.status = 'committed' and w.expired_at is null then 'short' end)) as s(state)
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
      lastRun: last && {
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
        short: (() => {
          const row = groups.rows.find((r) => r.state === 'short');
          return { ...plain(group('short')), claimed: Number(row?.claimed ?? 0), served: Number(row?.served ?? 0) };
        })(),
      },
      verified: { through: ms(s?.verified_through), at: ms(s?.verified_at) },
    };
  }

  /**
   * `state set-watermark` to `move.to` (ms), from `move.origin` when there is none.
   * @throws {InvalidArgumentError} moving forward past a stretch not loaded without `force`.
   */
  async setWatermark(move: { to: number; force: boolean; origin: number }): Promise<WatermarkMove> {
    const { t, source } = this;
    const { rows } = await this.db.query<{ watermark: Date | null }>(`select watermark from ${t.state} where source = $1 for update`, [source]);
    const before = ms(rows[0]?.watermark);
    const from = before ?? move.origin;
    let skipped: Window | undefined;
    if (move.to > from) {
      const ledger = await this.db.query<{ start: Date; end: Date; loaded: boolean }>(
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
    await this.db.query(
      `insert into ${t.state} as s (source, watermark) values ($1, $2)
         on conflict (source) do update set watermark = $2, updated_at = now()`,
      [source, new Date(move.to)],
    );
    return { before, after: move.to, skipped };
  }

  /** `state reset`: whole windows overlapping `range`, not the expired ones. */
  async markForReload(range: Window): Promise<ReloadMarks> {
    const bounds = [this.source, new Date(range.start), new Date(range.end)];
    const { rows } = await this.db.query<{ start: Date; end: Date; status: 'committed' | 'parked' }>(
      `update ${this.t.windows} set reload_requested_at = now()
        where source = $1 and expired_at is null and window_start < $3 and window_end > $2
        returning window_start as "start", window_end as "end", status`,
      bounds,
    );
    const expired = await this.db.query<{ n: number }>(
      `select count(*)::int as n from ${this.t.windows} where source = $1 and expired_at is not null and window_start < $3 and window_end > $2`,
      bounds,
    );
    const windows = rows.map((r) => ({ start: r.start.getTime(), end: r.end.getTime(), status: r.status })).sort((a, b) => a.start - b.start);
    return { windows, expired: expired.rows[0]?.n ?? 0 };
  }
}

/** A ledger window as the watermark's check reads it: `loaded` when committed or expired. */
export interface LedgerWindow extends Window {
  loaded: boolean;
}

/** The first stretch of [from, to) no loaded window covers (a gap, or a parked window); undefined when none. */
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

/** Retention, every source's: whether a window of runs `runIds` starts in `range`. */
export async function loadedByRuns(db: Queryable, t: Tables, range: Window, runIds: readonly number[]): Promise<boolean> {
  const { rowCount } = await db.query(`select 1 from ${t.windows} where run_id = any($3::bigint[]) and window_start >= $1 and window_start < $2 limit 1`, [
    new Date(range.start),
    new Date(range.end),
    [...runIds],
  ]);
  return (rowCount ?? 0) > 0;
}

/** Retention, every source's: marks the windows starting in `range` expired. @returns how many. */
export async function expireWindows(db: Queryable, t: Tables, range: Window): Promise<number> {
  const { rowCount } = await db.query(`update ${t.windows} set expired_at = now() where window_start >= $1 and window_start < $2 and expired_at is null`, [
    new Date(range.start),
    new Date(range.end),
  ]);
  return rowCount ?? 0;
}
