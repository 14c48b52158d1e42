/**
 * `records_hourly`: the exact count of stored records per source, hour bucket, window start and
 * ROLLUP_DIMENSIONS values (one table and one definition for every source). Bucket = the hour (UTC)
 * of the record's event time, or of its window's start when it has none. Keyed by the window too,
 * so that clearing a window removes exactly its rows (by `window_start` range) whether or not its
 * records still exist: RETENTION drops records and keeps the rollup, and an expired window
 * reloaded by `sync --from` must replace its hours, not add them a second time. A window's rows
 * are inserted once all its records are (one statement per window, {@link HourlyRollup.windowInsert}).
 * A missing or JSON-null dimension value is its own group (null), matched through a unique index
 * on `coalesce(col, '')` and `col is null`, which PostgreSQL 13 supports (no `nulls not distinct`).
 * Readers sum `records` over `window_start`.
 */
import type { RollupConfig, RollupDimension } from '../../../config.js';
import { quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { groupKey, type RollupGroup } from './groups.js';
import { deleteSetting, relationExists, saveSetting, settingIs } from '../settings.js';
import { BUCKET_SQL, columnList, nullMatchedKeys, recordsetColumns, recordsetPick, windowRecordsSql } from '../sql.js';
import type { Query, Queryable, RollupTable, SchemaTables } from '../table.js';

/** Name under which derived_settings keeps the shape and dimensions records_hourly was built for. */
const ROLLUP_SETTING = 'rollup_dimensions';
/**
 * Version of records_hourly's columns and key, stored with the dimensions: a table built with
 * another (or none: the first shape, without `window_start`) is rebuilt like one built for other
 * dimensions.
 */
const ROLLUP_SHAPE = 3;

/**
 * The groups as JSON rows for `json_to_recordset`: `{"b": hour in ms, "v0": …, "n": records}`, a
 * group without an hour given `untimedHour` and merged with the timed group it then equals.
 */
function groupRows(groups: ReadonlyMap<string, RollupGroup>, untimedHour: number): string {
  const untimed = new Map<string, RollupGroup>();
  for (const g of groups.values()) {
    if (g.hour !== null) continue;
    const key = groupKey(untimedHour, g.values);
    const seen = untimed.get(key);
    if (seen === undefined) untimed.set(key, { hour: untimedHour, values: g.values, records: g.records });
    else seen.records += g.records;
  }
  const rows: Record<string, unknown>[] = [];
  const row = (hour: number, values: readonly (string | null)[], records: number): void => {
    const r: Record<string, unknown> = { b: hour, n: records };
    for (let i = 0; i < values.length; i++) r[`v${i}`] = values[i];
    rows.push(r);
  };
  for (const [key, g] of groups) {
    if (g.hour === null) continue;
    const extra = untimed.get(key);
    if (extra !== undefined) untimed.delete(key);
    row(g.hour, g.values, g.records + (extra?.records ?? 0));
  }
  for (const g of untimed.values()) row(untimedHour, g.values, g.records);
  return JSON.stringify(rows);
}

/** records_hourly of one schema for one ROLLUP_DIMENSIONS. */
export class HourlyRollup implements RollupTable {
  /** Whether records_hourly is kept (ROLLUP_DIMENSIONS other than `off`). */
  readonly enabled: boolean;
  private readonly dims: readonly RollupDimension[];
  private readonly cols: string[];

  constructor(
    private readonly t: SchemaTables,
    rollup: RollupConfig,
  ) {
    this.enabled = rollup.enabled;
    this.dims = rollup.dimensions;
    this.cols = rollup.dimensions.map((d) => quoteIdent(d.column));
  }

  /** The dimensions' paths, the parameters of {@link addGroupsSql}. */
  get paths(): string[][] {
    return this.dims.map((d) => d.path);
  }

  /**
   * The insert of a window's rows, in the statement that commits it ($1 the source, $2 the
   * window's start): from `groups` (counted from its pages) when given, else grouped by PostgreSQL
   * from the window's records. A plain insert: the window's rows were deleted first and are keyed
   * by its start, so none can conflict (one would fail the window rather than double its counts);
   * `on conflict` checks cost.
   *
   * @param untimedHour the hour of the window's start, that of its records without an event time.
   * @returns the statement and its parameters from $3.
   */
  windowInsert(untimedHour: number, groups: ReadonlyMap<string, RollupGroup> | undefined): Query {
    if (groups === undefined) return { text: this.addGroupsSql(windowRecordsSql(this.t), '', 3, false), values: this.paths };
    const n = this.dims.length;
    const text = `insert into ${this.t.hourly} (source, bucket, window_start${columnList(this.cols)}, records)
      select $1, to_timestamp(u.b / 1000), $2${recordsetPick(n)}, u.n
        from json_to_recordset($3::json) as u(b bigint${recordsetColumns(n)}, n bigint)`;
    return { text, values: [groupRows(groups, untimedHour)] };
  }

  /** Clearing a window deletes its rows by `window_start`, so also those of windows whose records RETENTION dropped. */
  clearWindowSql(): string[] {
    return this.enabled ? [`cleared as (delete from ${this.t.hourly} where source = $3 and window_start >= $1 and window_start < $2)`] : [];
  }

  /** Built with this shape for these dimensions, or absent when ROLLUP_DIMENSIONS is off. */
  async isCurrent(db: Queryable): Promise<boolean> {
    if (!this.enabled) return !(await relationExists(db, this.t.hourly));
    return (await settingIs(db, this.t, ROLLUP_SETTING, this.setting())) && (await relationExists(db, this.t.hourly));
  }

  async ensureCurrent(db: PoolClient, log: Logger): Promise<boolean> {
    if (await this.isCurrent(db)) return false;
    await this.rebuild(db);
    log.info(this.setting(), this.enabled ? 'rebuilt records_hourly from records for ROLLUP_DIMENSIONS' : 'dropped records_hourly: ROLLUP_DIMENSIONS is off');
    return true;
  }

  /** Drops records_hourly and, unless ROLLUP_DIMENSIONS is off, recreates and fills it from `records`. */
  async rebuild(db: PoolClient): Promise<void> {
    await db.query(`drop table if exists ${this.t.hourly}`);
    if (!this.enabled) {
      await deleteSetting(db, this.t, ROLLUP_SETTING);
      return;
    }
    await db.query(
      `create table ${this.t.hourly} (source text not null, bucket timestamptz not null, window_start timestamptz not null${this.cols.map((c) => `, ${c} text`).join('')}, records bigint not null check (records > 0))`,
    );
    await db.query(`create unique index on ${this.t.hourly} (${this.keyExpressions().join(', ')})`);
    // Readers and ROLLUP_RETENTION select by bucket; the unique index leads with the window start.
    await db.query(`create index on ${this.t.hourly} (bucket)`);
    await db.query(this.addGroupsSql(this.t.records, '', 1), this.paths);
    await saveSetting(db, this.t, ROLLUP_SETTING, this.setting());
  }

  async prune(db: PoolClient, before: number): Promise<number> {
    if (!this.enabled) return 0;
    const { rowCount } = await db.query(`delete from ${this.t.hourly} where bucket < $1`, [new Date(before)]);
    return rowCount ?? 0;
  }

  /**
   * What derived_settings keeps for records_hourly: its shape ({@link ROLLUP_SHAPE}) and the
   * dimensions as `column=dotted.path` strings, in order (an array: jsonb keeps its order).
   */
  setting(): { shape: number; dimensions: string[] } {
    return { shape: ROLLUP_SHAPE, dimensions: this.dims.map((d) => `${d.column}=${d.path.join('.')}`) };
  }

  /**
   * The key expressions of records_hourly's unique index: the source and the window start first, so
   * that clearing a source's window (a `window_start` range) reads the index rather than the whole table.
   */
  private keyExpressions(): string[] {
    return ['source', 'window_start', 'bucket', ...nullMatchedKeys(this.cols)];
  }

  /** `insert into records_hourly … select …, count(*) from <rows> group by source, bucket, window_start, dimensions … on conflict add`. */
  private addGroupsSql(rows: string, where: string, firstParam: number, add = true): string {
    const groups = this.cols.map((_, i) => `, ${i + 4}`).join('');
    const values = this.dims.map((_, i) => `, payload #>> $${firstParam + i}::text[]`).join('');
    return `insert into ${this.t.hourly} as h (source, bucket, window_start${columnList(this.cols)}, records)
      select source, ${BUCKET_SQL}, window_start${values}, count(*) from ${rows} ${where} group by 1, 2, 3${groups}
      ${add ? `on conflict (${this.keyExpressions().join(', ')}) do update set records = h.records + excluded.records` : ''}`;
  }
}
