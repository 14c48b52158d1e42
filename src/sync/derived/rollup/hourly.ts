/**
 * `records_hourly`: the exact count of stored records per source, hour bucket, window start and
 * ROLLUP_DIMENSIONS values. Keyed by window start, so clearing a window removes exactly its rows
 * even after RETENTION dropped its records. A missing or null value is its own group. Readers sum
 * `records` over `window_start`. Design: docs/design/derived-tables.md.
 */
import type { RollupConfig, RollupDimension } from '../../../config.js';
import { quoteIdent, type PoolClient } from '../../../db/pool.js';
import type { Logger } from '../../../log.js';
import { groupKey, type RollupGroup } from './groups.js';
import { deleteSetting, relationExists, saveSetting, settingIs } from '../settings.js';
import { BUCKET_SQL, columnList, nullMatchedKeys, recordsetColumns, recordsetPick, windowRecordsSql } from '../sql.js';
import type { Query, Queryable, RollupTable, SchemaTables } from '../table.js';

const ROLLUP_SETTING = 'rollup_dimensions';
/** A table of another shape (none: the first, without `window_start`) is rebuilt. */
const ROLLUP_SHAPE = 3;

/** JSON rows for `json_to_recordset`: `{"b": hour in ms, "v0": …, "n": records}`, untimed groups at `untimedHour`. */
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

export class HourlyRollup implements RollupTable {
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

  get paths(): string[][] {
    return this.dims.map((d) => d.path);
  }

  /**
   * From `groups` when given, else grouped from the window's records ($1 source, $2 window start). A
   * plain insert: the window's rows were cleared, so a conflict fails rather than doubles a count.
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

  clearWindowSql(): string[] {
    return this.enabled ? [`cleared as (delete from ${this.t.hourly} where source = $3 and window_start >= $1 and window_start < $2)`] : [];
  }

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
    // Readers and ROLLUP_RETENTION select by bucket.
    await db.query(`create index on ${this.t.hourly} (bucket)`);
    await db.query(this.addGroupsSql(this.t.records, '', 1), this.paths);
    await saveSetting(db, this.t, ROLLUP_SETTING, this.setting());
  }

  async prune(db: PoolClient, before: number): Promise<number> {
    if (!this.enabled) return 0;
    const { rowCount } = await db.query(`delete from ${this.t.hourly} where bucket < $1`, [new Date(before)]);
    return rowCount ?? 0;
  }

  /** Dimensions as `column=dotted.path`, an array: jsonb keeps its order. */
  setting(): { shape: number; dimensions: string[] } {
    return { shape: ROLLUP_SHAPE, dimensions: this.dims.map((d) => `${d.column}=${d.path.join('.')}`) };
  }

  /** Source and window start first, so clearing a window reads the index. */
  private keyExpressions(): string[] {
    return ['source', 'window_start', 'bucket', ...nullMatchedKeys(this.cols)];
  }

  private addGroupsSql(rows: string, where: string, firstParam: number, add = true): string {
    const groups = this.cols.map((_, i) => `, ${i + 4}`).join('');
    const values = this.dims.map((_, i) => `, payload #>> $${firstParam + i}::text[]`).join('');
    return `insert into ${this.t.hourly} as h (source, bucket, window_start${columnList(this.cols)}, records)
      select source, ${BUCKET_SQL}, window_start${values}, count(*) from ${rows} ${where} group by 1, 2, 3${groups}
      ${add ? `on conflict (${this.keyExpressions().join(', ')}) do update set records = h.records + excluded.records` : ''}`;
  }
}
