/**
 * `records_daily_distinct`: per source, UTC day (`day`, its midnight), ROLLUP_DISTINCT_BY values
 * and field, the union of the day's records_hourly_distinct arrays: a distinct count over whole
 * days reads a row per day instead of one per hour. A union cannot be taken apart again, so
 * whatever deletes hourly rows (a window's commit replacing its rows, ROLLUP_RETENTION) then
 * RECOMPUTES each day it touched from records_hourly_distinct in the same transaction, and a
 * window that only added rows to a day merges their values into it ({@link DailyDistinct.update},
 * {@link DailyDistinct.recompute}): each of its rows always equals the union of the hourly rows of
 * its day, whichever windows they came from. Windows of one source commit concurrently
 * (SYNC_CONCURRENCY): an update first takes a transaction-level advisory lock per (schema,
 * source, day), in one order, so a second window of the same day waits for the first's commit,
 * and its statements (READ COMMITTED: a snapshot per statement) then see the first window's rows.
 *
 * Kept and rebuilt with records_hourly_distinct (src/sync/derived/rollup/distinct.ts), which owns it.
 */
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';
import { columnList, nullMatchedKeys, recordsetColumns, recordsetPick, valuesAgg } from '../sql.js';
import type { SchemaTables } from '../table.js';

/** records_daily_distinct of one schema, for one ROLLUP_DISTINCT_BY and ROLLUP_DISTINCT. */
export class DailyDistinct {
  /** records_daily_distinct of this schema, qualified. */
  readonly table: string;

  /**
   * @param byCols the ROLLUP_DISTINCT_BY columns, quoted.
   * @param valueColumns the ROLLUP_DISTINCT fields' column names, in order (a row's `value_column`).
   */
  constructor(
    private readonly t: SchemaTables,
    private readonly byCols: readonly string[],
    private readonly valueColumns: readonly string[],
  ) {
    this.table = `${quoteIdent(t.schema)}.records_daily_distinct`;
  }

  /** Drops the table, if any (a rebuild, or no ROLLUP_DISTINCT). */
  async drop(db: PoolClient): Promise<void> {
    await db.query(`drop table if exists ${this.table}`);
  }

  /** Creates the table and fills it from records_hourly_distinct (filled first), in a rebuild. */
  async create(db: PoolClient): Promise<void> {
    await db.query(
      `create table ${this.table} (source text not null, day timestamptz not null${this.byCols.map((c) => `, ${c} text`).join('')}, value_column text not null, distinct_values text[] not null)`,
    );
    // The Users panel selects by source and day range; unique: a day recomputed twice at once would fail rather than count twice.
    await db.query(`create unique index on ${this.table} (${this.keyExpressions().join(', ')})`);
    await db.query(this.fillDaysSql(undefined));
  }

  /**
   * Brings the rows of `source`'s `days` up to date with the hourly rows a window's commit just
   * replaced for `window`, under the days' locks ({@link lockDays}). A day the window deleted
   * hourly rows of is recomputed from all its hourly rows (a value may have gone); a day it only
   * added rows to gets their values merged into its rows, the same union for the cost of the
   * window's rows instead of the whole day's (loading a day in 1-hour windows would otherwise
   * re-read the day's hours 24 times).
   *
   * @param days as the window's statement returns them (`cleared`: it deleted hourly rows of the day).
   * @param added the window's values per day (JSON rows `{"b": day in ms, "v0": …, "a": [values]}`):
   *   merged as they are, without reading its hourly rows back; undefined to read them.
   */
  async update(db: PoolClient, source: string, window: Window, days: readonly { day: Date; cleared: boolean }[], added?: string): Promise<void> {
    if (days.length === 0) return;
    await this.lockDays(
      db,
      days.map((d) => ({ source, day: d.day.getTime() })),
    );
    const recomputed = days.filter((d) => d.cleared).map((d) => d.day);
    if (recomputed.length > 0)
      await this.fillDays(
        db,
        recomputed.map(() => source),
        recomputed,
      );
    const merged = days.filter((d) => !d.cleared).map((d) => d.day);
    if (merged.length === 0) return;
    const conflict = `on conflict (${this.keyExpressions().join(', ')}) do update
         set distinct_values = (select ${valuesAgg('u')} from unnest(x.distinct_values || excluded.distinct_values) as u)`;
    if (added !== undefined) {
      // v<by> is the field's position in ROLLUP_DISTINCT, `a` its values sorted (distinctRows).
      const n = this.byCols.length;
      await db.query(
        `insert into ${this.table} as x (source, day${columnList(this.byCols)}, value_column, distinct_values)
         select $1, to_timestamp(r.b / 1000)${recordsetPick(n, 'r')}, ($3::text[])[r.v${n}::int + 1], r.a
           from json_to_recordset($2::json) as r(b bigint${recordsetColumns(n + 1)}, a text[])
          where to_timestamp(r.b / 1000) = any($4::timestamptz[])
         ${conflict}`,
        [source, added, this.valueColumns, merged],
      );
      return;
    }
    const cols = columnList(this.byCols, 'h.');
    await db.query(
      `insert into ${this.table} as x (source, day${columnList(this.byCols)}, value_column, distinct_values)
       select h.source, d.day${cols}, h.value_column, ${valuesAgg('v.value')}
         from unnest($4::timestamptz[]) as d(day)
         join ${this.t.hourlyDistinct} as h
           on h.source = $1 and h.window_start >= $2 and h.window_start < $3 and h.bucket >= d.day and h.bucket < d.day + interval '24 hours'
         cross join lateral unnest(h.distinct_values) as v(value)
        group by h.source, d.day${cols}, h.value_column
       ${conflict}`,
      [source, new Date(window.start), new Date(window.end), merged],
    );
  }

  /**
   * Sets the rows of each (source, UTC day) in `days` to the union of that day's
   * records_hourly_distinct rows (deleting them when it has none), under the days' locks ({@link lockDays}).
   *
   * @param days `day` a UTC midnight in milliseconds.
   */
  async recompute(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    if (days.length === 0) return;
    await this.lockDays(db, days);
    await this.fillDays(
      db,
      days.map((d) => d.source),
      days.map((d) => new Date(d.day)),
    );
  }

  /**
   * Takes a transaction-level advisory lock per (schema, source, day) of `days`, in the ascending
   * order of their keys, so that two transactions updating a day take turns without ever
   * deadlocking; in READ COMMITTED a statement that starts once the locks are held sees every
   * hourly and daily row committed before, the other transaction's included.
   */
  private async lockDays(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    // Output expressions not named by ORDER BY are evaluated after the sort (SELECT's reference
    // page): the locks are taken in the order of their keys.
    await db.query(`select pg_advisory_xact_lock($1, k) from (select distinct hashtext(n) as k from unnest($2::text[]) as n) as keys order by k`, [
      ADVISORY_LOCK_NAMESPACE,
      days.map((d) => `distinct_day:${this.t.schema}:${d.source}:${new Date(d.day).toISOString().slice(0, 10)}`),
    ]);
  }

  /** Sets the rows of each (`sources[i]`, `days[i]`) to the union of its hourly rows (the caller holds the days' locks). */
  private async fillDays(db: PoolClient, sources: readonly string[], days: readonly Date[]): Promise<void> {
    const pairs = 'unnest($1::text[], $2::timestamptz[]) as d(source, day)';
    await db.query(`delete from ${this.table} as x using ${pairs} where x.source = d.source and x.day = d.day`, [sources, days]);
    await db.query(this.fillDaysSql(pairs), [sources, days]);
  }

  /** The key expressions of the unique index: the source, the day, the ROLLUP_DISTINCT_BY columns (null-matched like records_hourly's) and the field. */
  private keyExpressions(): string[] {
    return ['source', 'day', ...nullMatchedKeys(this.byCols), 'value_column'];
  }

  /**
   * `insert into records_daily_distinct … select …`: the union of the records_hourly_distinct rows
   * of each day of `days`, a relation (`days` aliased `d`, with the columns `source` and `day`);
   * all days of every source when undefined (a rebuild).
   */
  private fillDaysSql(days: string | undefined): string {
    const cols = columnList(this.byCols, 'h.');
    const from =
      days === undefined
        ? `${this.t.hourlyDistinct} as h`
        : `${days} join ${this.t.hourlyDistinct} as h on h.source = d.source and h.bucket >= d.day and h.bucket < d.day + interval '24 hours'`;
    return `insert into ${this.table} (source, day${columnList(this.byCols)}, value_column, distinct_values)
      select h.source, date_trunc('day', h.bucket, 'UTC')${cols}, h.value_column, ${valuesAgg('v.value')}
        from ${from} cross join lateral unnest(h.distinct_values) as v(value)
       group by h.source, date_trunc('day', h.bucket, 'UTC')${cols}, h.value_column`;
  }
}
