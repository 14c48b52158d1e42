/**
 * 9. The Analytics history dashboard at scale: every SQL query of grafana/dashboards/analytics-history.json
 * (each panel and each query variable), with Grafana's variables and macros expanded as
 * test/integration/dashboards.test.ts expands them (grafana/src/interpolate.ts), timed against a
 * schema holding N records over 30 days.
 *
 * The data is loaded fast, not through a sync: migrate, create the partitions the range needs
 * (src/sync/store/pg/partitions.ts, PARTITION_INTERVAL's default, month), `psql \copy` the simulator's
 * records (bench/lib/copy-limit.ts), rebuild records_hourly, records_hourly_distinct and records_daily_distinct as `rollup rebuild` does
 * (Derived.rebuildRollup), merge each one-day window's field catalogue as a sync's commit does
 * (catalogueRecords, Derived.addWindowRecords), write the ledger a sync would have written (one
 * run, a window per day, the watermark), then ANALYZE.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Dashboard, Panel, RowPanel, VariableModel } from '@grafana/grafana-foundation-sdk/dashboard';
import { DEFAULT_SOURCE, loadConfig } from '../../src/config.js';
import { createPool, withClient, withTransaction, type PoolClient } from '../../src/db/pool.js';
import { silentLogger } from '../../test/helpers/silent-logger.js';
import { Derived, inexactCounts, type WindowFields } from '../../src/sync/derived/index.js';
import { FieldCatalogue } from '../../src/sync/derived/fields/catalogue.js';
import { TypedView } from '../../src/sync/derived/fields/typed-view.js';
import { ensurePartitions, listPartitions } from '../../src/sync/store/pg/partitions.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { DASHBOARDS_DIR } from '../../grafana/src/generate.js';
import { renderSql, type Selection } from '../../grafana/src/interpolate.js';
import { migrateSchema, timePsqlCopy, writeCopyFile } from '../lib/copy-limit.js';
import { DATA_END, DAY_MS, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { median } from '../lib/stats.js';

export interface DashboardsSpec {
  /** Base records of the simulator dataset per size (the rows stored are what it generates). */
  sizes: number[];
  /** Days of data, ending at {@link DATA_END}. */
  days: number;
  /** Timed runs per query and range, after one warm-up. */
  runs: number;
  /** Dashboard time ranges ending at the data's end, in days. */
  rangesDays: number[];
}

/** One query's timings at one size and range. */
export interface QueryTiming {
  /** `variable <name>` or `<panel title> / <refId>`. */
  query: string;
  kind: 'variable' | 'panel';
  rangeDays: number;
  medianMs: number;
  runsMs: number[];
  rows: number;
  /** EXPLAIN (ANALYZE, BUFFERS) of a panel query whose median misses {@link DASHBOARD_TARGET_MS}. */
  plan?: string;
}

export interface DashboardSize {
  records: number;
  partitions: string[];
  loadSeconds: { copy: number; rollup: number; catalogue: number; analyze: number };
  hourlyRows: number;
  distinctRows: number;
  dailyRows: number;
  catalogueFields: number;
  /** pg_total_relation_size, bytes. */
  bytes: { records: number; hourly: number; distinct: number; daily: number; fields: number };
  timings: QueryTiming[];
}

export interface DashboardsResult {
  spec: DashboardsSpec;
  sizes: DashboardSize[];
}

/** A panel query's median must be at most this (ms). */
export const DASHBOARD_TARGET_MS = 100;
/** The largest size's median ÷ the smallest's, at most, for "flat". */
export const DASHBOARD_FLAT_RATIO = 1.5;
/**
 * Below this median (ms) at the largest size a query counts as flat whatever its ratio: a few ms
 * are a loopback round trip and the other work of a shared 2-core machine, not the data.
 */
export const DASHBOARD_NOISE_FLOOR_MS = 10;

interface Target {
  refId: string;
  datasource: { type: string };
  rawSql?: string;
}

const SCHEMA = 'analytics';
/** records_daily_distinct of {@link SCHEMA} (src/sync/derived/index.ts names it; Tables does not). */
const DAILY = `${SCHEMA}.records_daily_distinct`;

function loadDashboard(): Dashboard {
  return JSON.parse(readFileSync(join(DASHBOARDS_DIR, 'analytics-history.json'), 'utf8')) as Dashboard;
}

const queryText = (v: VariableModel): string => (typeof v.query === 'string' ? v.query : JSON.stringify(v.query ?? ''));

/** Runs `sql` once to warm up, then `runs` times; wall time per run in ms. */
async function timeQuery(client: PoolClient, sql: string, runs: number): Promise<{ runsMs: number[]; rows: number; result: Record<string, unknown>[] }> {
  const first = await client.query<Record<string, unknown>>(sql);
  const runsMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await client.query(sql);
    runsMs.push(performance.now() - t0);
  }
  return { runsMs, rows: first.rows.length, result: first.rows };
}

/** Loads `records` base records over the spec's days into a fresh schema, as described above. */
async function load(ctx: BenchContext, url: string, records: number, spec: DashboardsSpec): Promise<Omit<DashboardSize, 'timings'>> {
  const start = daysBefore(DATA_END, spec.days);
  const copyFile = join(ctx.scratch, `dashboards-${records}.copy`);
  const fields = new Map<number, WindowFields>();
  ctx.log(`dashboards: writing ${records} records as COPY rows`);
  const rows = await writeCopyFile(copyFile, { records, start, end: DATA_END, windowMs: DAY_MS }, fields);
  await migrateSchema(url, SCHEMA);
  const tables = new Tables(SCHEMA);
  // The rollup's dimensions as a default configuration has them (ROLLUP_DIMENSIONS).
  const rollup = loadConfig({}).tables.rollup;
  const derived = new Derived(tables, rollup);
  const catalogue = new FieldCatalogue(tables, rollup);
  const view = new TypedView(tables, rollup.typedViewMaxFields);
  const windowStarts = [...fields.keys()].sort((a, b) => a - b);
  const pool = createPool(url, silentLogger, { max: 1 });
  try {
    const partitions = await withClient(pool, async (client) => {
      await ensurePartitions(client, tables, windowStarts, 'month');
      return (await listPartitions(client, tables)).map((p) => p.name);
    });
    ctx.log(`dashboards: \\copy of ${rows} rows into ${partitions.join(', ')}`);
    const copy = await timePsqlCopy(url, SCHEMA, copyFile);
    return await withClient(pool, async (client) => {
      const t0 = performance.now();
      await withTransaction(client, () => derived.rebuildRollup(client));
      const t1 = performance.now();
      ctx.log(
        `dashboards: records_hourly, records_hourly_distinct and records_daily_distinct rebuilt in ${((t1 - t0) / 1000).toFixed(1)} s; merging the catalogue of ${windowStarts.length} windows`,
      );
      for (const ws of windowStarts) {
        const window = { start: ws, end: ws + DAY_MS };
        const commit = {
          source: DEFAULT_SOURCE,
          window,
          runId: 0,
          rollup: inexactCounts(),
          fields: fields.get(ws)!,
          changes: undefined,
          log: silentLogger,
          catalogueChanged: false,
        };
        // The catalogue's part of a window's commit, and records_typed after it (the rollups were rebuilt whole above).
        await withTransaction(client, async () => {
          await catalogue.commitWindow(client, commit);
          await view.commitWindow(client, commit);
        });
      }
      const t2 = performance.now();
      // The ledger a sync of the range leaves: one run, a window per day, the watermark.
      await client.query(
        `insert into ${tables.runs} (source, started_at, finished_at, status, range_start, range_end, windows, pages, records)
           values ($6, $1, $1, 'succeeded', $2, $1, $3, $4, $5)`,
        [DATA_END, start, windowStarts.length, Math.ceil(rows / 1000), rows, DEFAULT_SOURCE],
      );
      await client.query(
        `insert into ${tables.windows} (source, window_start, window_end, record_count, total_records, pages, run_id)
           select source, window_start, window_start + interval '1 day', count(*), count(*), ceil(count(*) / 1000.0), 1 from ${tables.records} group by 1, 2`,
      );
      await client.query(`insert into ${tables.state} (source, watermark) values ($2, $1) on conflict (source) do update set watermark = $1`, [
        DATA_END,
        DEFAULT_SOURCE,
      ]);
      await client.query('analyze');
      const t3 = performance.now();
      const size = await client.query<{
        records: string;
        hourly: string;
        distinct: string;
        fields: string;
        hourly_rows: string;
        distinct_rows: string;
        daily: string;
        daily_rows: string;
        catalogue: string;
      }>(
        `select (select sum(pg_total_relation_size(c.oid)) from pg_class c
                  where c.oid = $1::regclass or c.oid in (select inhrelid from pg_inherits where inhparent = $1::regclass)) as records,
                pg_total_relation_size($2::regclass) as hourly,
                pg_total_relation_size($3::regclass) as fields,
                pg_total_relation_size($4::regclass) as distinct,
                pg_total_relation_size($5::regclass) as daily,
                (select count(*) from ${tables.hourly}) as hourly_rows,
                (select count(*) from ${tables.hourlyDistinct}) as distinct_rows,
                (select count(*) from ${DAILY}) as daily_rows,
                (select count(*) from ${tables.fields}) as catalogue`,
        [tables.records, tables.hourly, tables.fields, tables.hourlyDistinct, DAILY],
      );
      const s = size.rows[0]!;
      return {
        records: rows,
        partitions,
        loadSeconds: { copy, rollup: (t1 - t0) / 1000, catalogue: (t2 - t1) / 1000, analyze: (t3 - t2) / 1000 },
        hourlyRows: Number(s.hourly_rows),
        distinctRows: Number(s.distinct_rows),
        dailyRows: Number(s.daily_rows),
        catalogueFields: Number(s.catalogue),
        bytes: { records: Number(s.records), hourly: Number(s.hourly), distinct: Number(s.distinct), daily: Number(s.daily), fields: Number(s.fields) },
      };
    });
  } finally {
    await pool.end();
  }
}

/** Times every query variable (in order, each seeing those before it) and panel query for each range. */
async function timeDashboard(ctx: BenchContext, url: string, spec: DashboardsSpec): Promise<QueryTiming[]> {
  const dashboard = loadDashboard();
  const vars = dashboard.templating.list ?? [];
  const panels = (dashboard.panels ?? [])
    .flatMap((p: Panel | RowPanel) => (p.type === 'row' ? (p as RowPanel).panels : [p as Panel]))
    .flatMap((panel) =>
      ((panel.targets ?? []) as unknown as Target[])
        .filter((t) => t.datasource.type === 'grafana-postgresql-datasource' && t.rawSql !== undefined)
        .map((t) => ({ name: `${panel.title} / ${t.refId}`, sql: t.rawSql! })),
    );
  const pool = createPool(url, silentLogger, { max: 1 });
  const out: QueryTiming[] = [];
  try {
    await withClient(pool, async (client) => {
      for (const days of spec.rangesDays) {
        const range = { from: daysBefore(DATA_END, days), to: DATA_END };
        const selections: Record<string, Selection> = {};
        for (const v of vars) {
          if ((v.type as string) !== 'query') continue;
          const sql = renderSql(queryText(v), { variables: vars, selections }, range);
          const { runsMs, rows, result } = await timeQuery(client, sql, spec.runs);
          const values = result.map((r) => String(Object.values(r)[0]));
          if (values.length === 0) throw new Error(`variable ${v.name} offers nothing: ${sql}`);
          selections[v.name] = v.includeAll ? { values, all: true } : { values: [String(v.current?.value)] };
          out.push({ query: `variable ${v.name}`, kind: 'variable', rangeDays: days, medianMs: median(runsMs), runsMs, rows });
        }
        for (const panel of panels) {
          const sql = renderSql(panel.sql, { variables: vars, selections }, range);
          const { runsMs, rows } = await timeQuery(client, sql, spec.runs);
          const timing: QueryTiming = { query: panel.name, kind: 'panel', rangeDays: days, medianMs: median(runsMs), runsMs, rows };
          if (timing.medianMs > DASHBOARD_TARGET_MS) {
            const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${sql}`);
            timing.plan = plan.map((r) => r['QUERY PLAN']).join('\n');
          }
          out.push(timing);
        }
        ctx.log(`dashboards: ${days}-day range timed`);
      }
    });
  } finally {
    await pool.end();
  }
  return out;
}

export async function dashboardsSuite(ctx: BenchContext, spec: DashboardsSpec): Promise<DashboardsResult> {
  const sizes: DashboardSize[] = [];
  for (const records of spec.sizes) {
    sizes.push(
      await withFreshDatabase(ctx, 'bench_dash', async (db) => {
        const loaded = await load(ctx, db.url, records, spec);
        const timings = await timeDashboard(ctx, db.url, spec);
        return { ...loaded, timings };
      }),
    );
  }
  return { spec, sizes };
}

const ms = (v: number): string => (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0));

/** The target row: every panel's median ≤ {@link DASHBOARD_TARGET_MS} at every size and range, and largest ÷ smallest ≤ {@link DASHBOARD_FLAT_RATIO}. */
export function dashboardsVerdict(result: DashboardsResult): { met: boolean; detail: string } {
  const panels = result.sizes.flatMap((s) => s.timings.filter((t) => t.kind === 'panel').map((t) => ({ s, t })));
  const slow = panels.filter(({ t }) => t.medianMs > DASHBOARD_TARGET_MS);
  const flat = flatness(result).filter((f) => f.kind === 'panel');
  const notFlat = flat.filter((f) => !f.flat);
  const first = result.sizes[0]!.records;
  const last = result.sizes[result.sizes.length - 1]!.records;
  const slowText =
    slow.length === 0
      ? `every panel's median ≤ ${DASHBOARD_TARGET_MS} ms`
      : `${slow.length} of ${panels.length} panel medians > ${DASHBOARD_TARGET_MS} ms: ${slow.map(({ s, t }) => `${t.query} ${t.rangeDays}d at ${s.records.toLocaleString('en-US')} (${ms(t.medianMs)} ms)`).join('; ')}`;
  const flatText =
    notFlat.length === 0
      ? `every panel flat from ${first.toLocaleString('en-US')} to ${last.toLocaleString('en-US')} (ratio ≤ ${DASHBOARD_FLAT_RATIO}, or under ${DASHBOARD_NOISE_FLOOR_MS} ms)`
      : `not flat (ratio > ${DASHBOARD_FLAT_RATIO} and over ${DASHBOARD_NOISE_FLOOR_MS} ms): ${notFlat.map((f) => `${f.query} ${f.rangeDays}d ×${f.ratio.toFixed(2)}`).join('; ')}`;
  return { met: slow.length === 0 && notFlat.length === 0, detail: `${slowText}; ${flatText}` };
}

/** Largest size's median ÷ smallest's, per query and range, and whether that is flat (see {@link DASHBOARD_NOISE_FLOOR_MS}). */
function flatness(result: DashboardsResult): { query: string; kind: QueryTiming['kind']; rangeDays: number; ratio: number; flat: boolean }[] {
  const first = result.sizes[0]!;
  const last = result.sizes[result.sizes.length - 1]!;
  return first.timings.map((a) => {
    const b = last.timings.find((t) => t.query === a.query && t.rangeDays === a.rangeDays)!;
    const ratio = b.medianMs / a.medianMs;
    return { query: a.query, kind: a.kind, rangeDays: a.rangeDays, ratio, flat: ratio <= DASHBOARD_FLAT_RATIO || b.medianMs < DASHBOARD_NOISE_FLOOR_MS };
  });
}

/** The report's section (Markdown lines). */
export function renderDashboards(result: DashboardsResult): string[] {
  const { spec, sizes } = result;
  const first = sizes[0]!;
  const last = sizes[sizes.length - 1]!;
  const out: string[] = [
    '## 9. Analytics history dashboard queries',
    '',
    `Every SQL query of grafana/dashboards/analytics-history.json (each panel and each query variable, variables evaluated in order and "All" customers selected), with Grafana's macros expanded by grafana/src/interpolate.ts, ` +
      `for a ${spec.rangesDays.map((d) => `${d}-day`).join(' and a ')} range ending at the data's end; 1 warm-up, then the median of ${spec.runs} runs, in ms (client wall time over loopback, one connection). ` +
      `Data: the simulator's records over ${spec.days} days (one-day windows) loaded by \`psql \\copy\` into monthly partitions made by src/sync/store/pg/partitions.ts, records_hourly, records_hourly_distinct and records_daily_distinct rebuilt from them (Derived.rebuildRollup, as \`rollup rebuild\`, default ROLLUP_* settings), ` +
      'the field catalogue merged window by window (catalogueRecords and the catalogue commit of each window), one succeeded run with a ledger window per day, then ANALYZE. ' +
      '"catalogue s" is the merge only: the fields are gathered while the COPY file is written, as a sync gathers them while a page waits for the writer.',
    '',
    "The simulator's records have few distinct rollup groups (its customers × event types × hours), so records_hourly stops growing once every group of the range is filled: " +
      'the aggregate panels read about the same number of rows at both sizes. With more customers or event types its rows, and those panels, grow with the distinct groups, not with the records. ' +
      "Likewise records_hourly_distinct holds one row per hour and customer (the simulator's 12 customers) with the hour's users as an array, and records_daily_distinct one per day and customer with the day's; " +
      'the Users panel reads the daily rows for the whole days of the range and the hourly rows of the days at its edges (none for these ranges, which start and end at UTC midnights), ' +
      'and counts the distinct elements of their arrays, so it reads as many rows at both sizes, and about as many elements once most users appear on most days: they grow with the users active per day, not with their records. ' +
      'The ETL cost of maintaining the derived tables is section 1\'s "ETL without rollups and catalogue" row (target row "9. ETL with rollups and catalogue").',
    '',
    '| Records | partitions | \\copy s | rollup rebuild s | catalogue s | ANALYZE s | records_hourly rows | records_hourly_distinct rows | records_daily_distinct rows | catalogue fields |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...sizes.map(
      (s) =>
        `| ${s.records.toLocaleString('en-US')} | ${s.partitions.join(', ')} | ${s.loadSeconds.copy.toFixed(1)} | ${s.loadSeconds.rollup.toFixed(1)} | ${s.loadSeconds.catalogue.toFixed(2)} | ${s.loadSeconds.analyze.toFixed(1)} | ${s.hourlyRows.toLocaleString('en-US')} | ${s.distinctRows.toLocaleString('en-US')} | ${s.dailyRows.toLocaleString('en-US')} | ${s.catalogueFields} |`,
    ),
    '',
    'Bytes stored per record (pg_total_relation_size, tables with their indexes and TOAST, ÷ the records):',
    '',
    '| Records | records (all partitions) | records_hourly | records_hourly_distinct | records_daily_distinct | record_fields | total |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...sizes.map((s) => {
      const per = (b: number) => (b / s.records).toFixed(2);
      return `| ${s.records.toLocaleString('en-US')} | ${per(s.bytes.records)} | ${per(s.bytes.hourly)} | ${per(s.bytes.distinct)} | ${per(s.bytes.daily)} | ${per(s.bytes.fields)} | **${per(s.bytes.records + s.bytes.hourly + s.bytes.distinct + s.bytes.daily + s.bytes.fields)}** |`;
    }),
    '',
  ];
  for (const s of sizes) {
    out.push(
      `### ${s.records.toLocaleString('en-US')} records`,
      '',
      `| Query | ${spec.rangesDays.map((d) => `${d}d median ms (runs)`).join(' | ')} | rows | ≤ ${DASHBOARD_TARGET_MS} ms |`,
      `|---|${spec.rangesDays.map(() => '---:|').join('')}---:|---|`,
    );
    const names = [...new Set(s.timings.map((t) => t.query))];
    for (const name of names) {
      const cells = spec.rangesDays.map((d) => s.timings.find((t) => t.query === name && t.rangeDays === d)!);
      const bold = (t: QueryTiming) => (t.kind === 'panel' && t.medianMs > DASHBOARD_TARGET_MS ? `**${ms(t.medianMs)}**` : ms(t.medianMs));
      const met = cells[0]!.kind === 'variable' ? '–' : cells.every((t) => t.medianMs <= DASHBOARD_TARGET_MS) ? 'yes' : '**no**';
      out.push(
        `| ${name} | ${cells.map((t) => `${bold(t)} (${t.runsMs.map((r) => r.toFixed(1)).join(', ')})`).join(' | ')} | ${cells.map((t) => t.rows).join(' / ')} | ${met} |`,
      );
    }
    out.push('');
  }
  out.push(
    `### Flat from ${first.records.toLocaleString('en-US')} to ${last.records.toLocaleString('en-US')} records?`,
    '',
    `Median at ${last.records.toLocaleString('en-US')} ÷ median at ${first.records.toLocaleString('en-US')}, per query and range. Taken as flat: a ratio ≤ ${DASHBOARD_FLAT_RATIO} ` +
      `(${(last.records / first.records).toFixed(1)}× the records; linear growth would give about ${(last.records / first.records).toFixed(1)}), or a median under ${DASHBOARD_NOISE_FLOOR_MS} ms at ${last.records.toLocaleString('en-US')} ` +
      '(there the loopback round trip and the rest of the shared machine dominate: a sub-millisecond query can show ×1.8 from one run to the next).',
    '',
    `| Query | ${spec.rangesDays.map((d) => `${d}d ratio`).join(' | ')} | flat |`,
    `|---|${spec.rangesDays.map(() => '---:|').join('')}---|`,
  );
  const flat = flatness(result);
  for (const name of [...new Set(flat.map((f) => f.query))]) {
    const cells = spec.rangesDays.map((d) => flat.find((f) => f.query === name && f.rangeDays === d)!);
    out.push(
      `| ${name} | ${cells.map((f) => `×${f.ratio.toFixed(2)}`).join(' | ')} | ${cells.every((f) => f.flat) ? (cells.every((f) => f.ratio <= DASHBOARD_FLAT_RATIO) ? 'yes' : `yes (under ${DASHBOARD_NOISE_FLOOR_MS} ms)`) : '**no**'} |`,
    );
  }
  out.push('');
  const missed = last.timings.filter((t) => t.plan !== undefined);
  if (missed.length > 0) {
    out.push(
      `### Plans of the panels over ${DASHBOARD_TARGET_MS} ms at ${last.records.toLocaleString('en-US')} records`,
      '',
      'EXPLAIN (ANALYZE, BUFFERS) of the expanded query, run once after the timed runs.',
      '',
    );
    for (const t of missed) out.push(`#### ${t.query}, ${t.rangeDays}-day range (median ${ms(t.medianMs)} ms)`, '', '```', t.plan!, '```', '');
  }
  return out;
}
