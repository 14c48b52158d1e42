/**
 * `records_hourly_distinct`: per source, hour, window start, ROLLUP_DISTINCT_BY values and field
 * (`value_column`), the field's distinct non-null texts sorted by code point, so a distinct count
 * over hours is exact. A window's commit replaces its rows in records_hourly's statement. It owns
 * records_daily_distinct (daily.ts). Design: docs/design/derived-tables.md.
 */
import type { RollupConfig, RollupDimension } from '../../../config.js';
import { quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import type { Window } from '../../windows.js';
import { sortCodePoints } from './code-points.js';
import { DailyDistinct } from './daily.js';
import { groupKey, type DistinctGroup } from './groups.js';
import { deleteSetting, relationExists, saveSetting, settingIs } from '../settings.js';
import { BUCKET_SQL, columnList, DAY_MS, recordsetColumns, recordsetPick, untimedHourOf, valuesAgg, windowRecordsSql } from '../sql.js';
import type { Query, Queryable, RollupTable, SchemaTables } from '../table.js';

const DISTINCT_SETTING = 'rollup_distinct';
/** 2: a leading `source`; 3: records_daily_distinct beside it; 4: a row per group, its values an array. */
const DISTINCT_SHAPE = 4;

/** As {@link distinctRows}, merged by `bucketOf`; `groups` stays as it was. */
function unionRows(groups: ReadonlyMap<string, DistinctGroup>, bucketOf: (g: DistinctGroup) => number): string {
  const merged = new Map<string, DistinctGroup>();
  // Merged groups whose set is still one of `groups`' (copied before it changes).
  const borrowed = new Set<DistinctGroup>();
  for (const g of groups.values()) {
    const hour = bucketOf(g);
    const key = groupKey(hour, g.values);
    const seen = merged.get(key);
    if (seen === undefined) {
      const group = { hour, values: g.values, seen: g.seen };
      merged.set(key, group);
      borrowed.add(group);
      continue;
    }
    if (borrowed.delete(seen)) seen.seen = new Set(seen.seen);
    for (const v of g.seen) seen.seen.add(v);
  }
  const rows: Record<string, unknown>[] = [];
  for (const g of merged.values()) {
    const r: Record<string, unknown> = { b: g.hour };
    for (let i = 0; i < g.values.length; i++) r[`v${i}`] = g.values[i];
    r.a = sortCodePoints([...g.seen]);
    rows.push(r);
  }
  return JSON.stringify(rows);
}

/** JSON rows for `json_to_recordset`: `{"b": hour in ms, "v0": …, "a": [values by code point]}`, untimed groups at `untimedHour`. */
function distinctRows(groups: ReadonlyMap<string, DistinctGroup>, untimedHour: number): string {
  return unionRows(groups, (g) => g.hour ?? untimedHour);
}

/** As {@link distinctRows}, per UTC day: `b` the day's midnight in ms. */
function dailyRows(groups: ReadonlyMap<string, DistinctGroup>, untimedHour: number): string {
  return unionRows(groups, (g) => Math.floor((g.hour ?? untimedHour) / DAY_MS) * DAY_MS);
}

export class DistinctRollup implements RollupTable {
  /** Rollups on and ROLLUP_DISTINCT not `none`. */
  readonly enabled: boolean;
  readonly daily: DailyDistinct;
  private readonly distinct: readonly RollupDimension[];
  private readonly by: readonly RollupDimension[];
  private readonly byCols: string[];

  constructor(
    private readonly t: SchemaTables,
    rollup: RollupConfig,
  ) {
    this.distinct = rollup.enabled ? rollup.distinct : [];
    this.enabled = this.distinct.length > 0;
    this.by = rollup.distinctBy;
    this.byCols = rollup.distinctBy.map((d) => quoteIdent(d.column));
    this.daily = new DailyDistinct(
      t,
      this.byCols,
      this.distinct.map((d) => d.column),
    );
  }

  /** Nothing: {@link windowReplace} replaces a window's rows at its commit. */
  clearWindowSql(): string[] {
    return [];
  }

  /**
   * `alongside` (records_hourly's insert: $1 source, $2 window start) wrapped with the delete of the
   * window's rows and the insert of its new ones, from `groups` when given, else from its records.
   * Returns the UTC days touched (`day`, ascending) and whether rows of each were deleted (`cleared`).
   * @returns the statement and its parameters from `firstParam`, the window's end the last.
   */
  windowReplace(alongside: string, firstParam: number, window: Window, untimedHour: number, groups: ReadonlyMap<string, DistinctGroup> | undefined): Query {
    if (groups === undefined) {
      const values: unknown[] = this.distinctParams();
      const text = this.replaceSql(alongside, this.addDistinctSql(windowRecordsSql(this.t), firstParam), firstParam + values.length);
      return { text, values: [...values, new Date(window.end)] };
    }
    // v<by> is the field's position in ROLLUP_DISTINCT, `a` its values.
    const n = this.by.length;
    const inserted = `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${columnList(this.byCols)}, value_column, distinct_values)
      select $1, to_timestamp(u.b / 1000), $2${recordsetPick(n)}, ($${firstParam + 1}::text[])[u.v${n}::int + 1], u.a
        from json_to_recordset($${firstParam}::json) as u(b bigint${recordsetColumns(n + 1)}, a text[])
      returning bucket`;
    return {
      text: this.replaceSql(alongside, inserted, firstParam + 2),
      values: [distinctRows(groups, untimedHour), this.distinct.map((d) => d.column), new Date(window.end)],
    };
  }

  /** After {@link windowReplace}, with the `days` it returned; without `groups` the hourly rows are read back. */
  async updateDays(
    db: PoolClient,
    source: string,
    window: Window,
    days: readonly { day: Date; cleared: boolean }[],
    groups: ReadonlyMap<string, DistinctGroup> | undefined,
  ): Promise<void> {
    await this.daily.update(db, source, window, days, groups === undefined ? undefined : dailyRows(groups, untimedHourOf(window.start)));
  }

  async isCurrent(db: Queryable): Promise<boolean> {
    if (!this.enabled) return !(await relationExists(db, this.t.hourlyDistinct)) && !(await relationExists(db, this.daily.table));
    return (
      (await settingIs(db, this.t, DISTINCT_SETTING, this.setting())) &&
      (await relationExists(db, this.t.hourlyDistinct)) &&
      (await relationExists(db, this.daily.table))
    );
  }

  async ensureCurrent(db: PoolClient, log: Logger): Promise<boolean> {
    if (await this.isCurrent(db)) return false;
    const convert = this.enabled && (await this.isPerValue(db));
    await this.rebuild(db, convert);
    log.info(
      this.setting(),
      !this.enabled
        ? 'dropped records_hourly_distinct and records_daily_distinct: no ROLLUP_DISTINCT'
        : convert
          ? 'converted records_hourly_distinct and records_daily_distinct to a row per group with its values as an array'
          : 'rebuilt records_hourly_distinct and records_daily_distinct from records for ROLLUP_DISTINCT',
    );
    return true;
  }

  /** Both tables, unless there is no distinct field; with `convert`, from its own rows of shape 3 ({@link isPerValue}). */
  async rebuild(db: PoolClient, convert = false): Promise<void> {
    const perValue = `${quoteIdent(this.t.schema)}.records_hourly_distinct_per_value`;
    if (convert) await db.query(`alter table ${this.t.hourlyDistinct} rename to records_hourly_distinct_per_value`);
    await db.query(`drop table if exists ${this.t.hourlyDistinct}`);
    await this.daily.drop(db);
    await deleteSetting(db, this.t, DISTINCT_SETTING);
    if (!this.enabled) return;
    await db.query(
      `create table ${this.t.hourlyDistinct} (source text not null, bucket timestamptz not null, window_start timestamptz not null${this.byCols.map((c) => `, ${c} text`).join('')}, value_column text not null, distinct_values text[] not null check (cardinality(distinct_values) > 0))`,
    );
    // A commit deletes by window start; the Users panel, a day's recompute and ROLLUP_RETENTION by bucket.
    await db.query(`create index on ${this.t.hourlyDistinct} (source, window_start)`);
    await db.query(`create index on ${this.t.hourlyDistinct} (source, bucket)`);
    if (convert) {
      const cols = columnList(this.byCols);
      await db.query(
        `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${cols}, value_column, distinct_values)
         select source, bucket, window_start${cols}, value_column, ${valuesAgg('value')}
           from ${perValue} group by source, bucket, window_start${cols}, value_column`,
      );
      await db.query(`drop table ${perValue}`);
    } else {
      await db.query(this.addDistinctSql(this.t.records, 1, false), this.distinctParams());
    }
    await this.daily.create(db);
    await saveSetting(db, this.t, DISTINCT_SETTING, this.setting());
  }

  /** Recomputes the days touched in records_daily_distinct. @returns 0: the run reports records_hourly's. */
  async prune(db: PoolClient, before: number): Promise<number> {
    if (!this.enabled) return 0;
    const { rows } = await db.query<{ source: string; day: Date }>(
      `with pruned as (delete from ${this.t.hourlyDistinct} where bucket < $1 returning source, bucket)
         select distinct source, date_trunc('day', bucket, 'UTC') as day from pruned`,
      [new Date(before)],
    );
    await this.daily.recompute(
      db,
      rows.map((r) => ({ source: r.source, day: r.day.getTime() })),
    );
    return 0;
  }

  /** `column=dotted.path` strings; the dashboard's "User column" lists the columns of `distinct`. */
  setting(): { shape: number; by: string[]; distinct: string[] } {
    return {
      shape: DISTINCT_SHAPE,
      by: this.by.map((d) => `${d.column}=${d.path.join('.')}`),
      distinct: this.distinct.map((d) => `${d.column}=${d.path.join('.')}`),
    };
  }

  /** Shape 3 (a row per value) for these settings: converted, not rebuilt, so hours RETENTION dropped stay. */
  private async isPerValue(db: Queryable): Promise<boolean> {
    return (await settingIs(db, this.t, DISTINCT_SETTING, { ...this.setting(), shape: 3 })) && (await relationExists(db, this.t.hourlyDistinct));
  }

  /** The ROLLUP_DISTINCT_BY paths, then each field's column name and path. */
  private distinctParams(): (string | string[])[] {
    return this.enabled ? [...this.by.map((d) => d.path), ...this.distinct.flatMap((d) => [d.column, d.path])] : [];
  }

  private replaceSql(alongside: string, inserted: string, endParam: number): string {
    return `with cleared as (delete from ${this.t.hourlyDistinct} where source = $1 and window_start >= $2 and window_start < $${endParam} returning bucket),
      hourly as (${alongside}),
      added as (${inserted})
      select date_trunc('day', bucket, 'UTC') as day, bool_or(cleared) as cleared
        from (select bucket, true as cleared from cleared union all select bucket, false from added) as b group by 1 order by 1`;
  }

  /** The insert grouped from `source` rows; parameters from `firstParam`: {@link distinctParams}. */
  private addDistinctSql(source: string, firstParam: number, returning = true): string {
    const by = this.by.map((_, i) => `, payload #>> $${firstParam + i}::text[]`).join('');
    const base = firstParam + this.by.length;
    const fields = this.distinct.map((_, j) => `($${base + 2 * j}::text, payload #>> $${base + 2 * j + 1}::text[])`).join(', ');
    const groups = this.byCols.map((_, i) => `, ${i + 4}`).join('');
    const n = this.byCols.length;
    return `insert into ${this.t.hourlyDistinct} (source, bucket, window_start${columnList(this.byCols)}, value_column, distinct_values)
      select source, ${BUCKET_SQL}, window_start${by}, f.col, ${valuesAgg('f.value')}
        from ${source} cross join lateral (values ${fields}) as f(col, value)
       where f.value is not null
       group by 1, 2, 3${groups}, ${n + 4}
      ${returning ? 'returning bucket' : ''}`;
  }
}
