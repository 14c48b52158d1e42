/**
 * `records_daily_distinct`: per source, UTC day, ROLLUP_DISTINCT_BY values and field, the union of
 * the day's records_hourly_distinct arrays. Invariant: each row equals that union. A union cannot be
 * taken apart, so a day that lost hourly rows is recomputed, one only added to is merged into,
 * under a transaction-level lock per (schema, source, day). Owned by distinct.ts. Design:
 * docs/design/derived-tables.md.
 */
import { ADVISORY_LOCK_NAMESPACE, quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Window } from '../../windows.js';
import { columnList, nullMatchedKeys, recordsetColumns, recordsetPick, valuesAgg } from '../sql.js';
import type { SchemaTables } from '../table.js';

export class DailyDistinct {
  /** Qualified. */
  readonly table: string;

  /** @param byCols quoted. @param valueColumns in ROLLUP_DISTINCT's order (a row's `value_column`). */
  constructor(
    private readonly t: SchemaTables,
    private readonly byCols: readonly string[],
    private readonly valueColumns: readonly string[],
  ) {
    this.table = `${quoteIdent(t.schema)}.records_daily_distinct`;
  }

  async drop(db: PoolClient): Promise<void> {
    await db.query(`drop table if exists ${this.table}`);
  }

  /** Filled from records_hourly_distinct, filled first. */
  async create(db: PoolClient): Promise<void> {
    await db.query(
      `create table ${this.table} (source text not null, day timestamptz not null${this.byCols.map((c) => `, ${c} text`).join('')}, value_column text not null, distinct_values text[] not null)`,
    );
    // Unique: a day recomputed twice at once fails rather than counts twice.
    await db.query(`create unique index on ${this.table} (${this.keyExpressions().join(', ')})`);
    await db.query(this.fillDaysSql(undefined));
  }

  /**
   * After a window's commit: a `cleared` day recomputed, the others merged into.
   * @param added the window's values per day (JSON rows `{"b": day in ms, "v0": …, "a": [values]}`);
   *   undefined to read its hourly rows back.
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

  /** @param days `day` a UTC midnight in ms. */
  async recompute(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    if (days.length === 0) return;
    await this.lockDays(db, days);
    await this.fillDays(
      db,
      days.map((d) => d.source),
      days.map((d) => new Date(d.day)),
    );
  }

  /** In ascending key order, so two transactions take turns without deadlock; later statements see the other's rows. */
  private async lockDays(db: PoolClient, days: readonly { source: string; day: number }[]): Promise<void> {
    // Output expressions not named by ORDER BY are evaluated after the sort: the locks go in key order.
    await db.query(`select pg_advisory_xact_lock($1, k) from (select distinct hashtext(n) as k from unnest($2::text[]) as n) as keys order by k`, [
      ADVISORY_LOCK_NAMESPACE,
      days.map((d) => `distinct_day:${this.t.schema}:${d.source}:${new Date(d.day).toISOString().slice(0, 10)}`),
    ]);
  }

  /** The caller holds the days' locks. */
  private async fillDays(db: PoolClient, sources: readonly string[], days: readonly Date[]): Promise<void> {
    const pairs = 'unnest($1::text[], $2::timestamptz[]) as d(source, day)';
    await db.query(`delete from ${this.table} as x using ${pairs} where x.source = d.source and x.day = d.day`, [sources, days]);
    await db.query(this.fillDaysSql(pairs), [sources, days]);
  }

  private keyExpressions(): string[] {
    return ['source', 'day', ...nullMatchedKeys(this.byCols), 'value_column'];
  }

  /** @param days a relation aliased `d` (`source`, `day`); undefined: every day (a rebuild). */
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
