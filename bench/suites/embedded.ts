/**
 * 16. The embedded default (issue 27 item 6): what `npm start` leaves in ./data, against the same
 * records in PostgreSQL, and `sync` into PGlite at scale.
 *
 * Footprint: the demo's density (one record every 13 s, packages/simulator demo.ts) over `days`
 * days ending at DATA_END, served by a simulator child, synced by a `sync` child with DATABASE_URL
 * unset (PGlite in a fresh DATA_DIR, created by that run as `npm start` creates it) and by another
 * into a fresh database of the bench's PostgreSQL. ./data is measured after the sync has exited
 * (apparent size and allocated blocks, by part: pg_wal, base, the rest); the PostgreSQL side is
 * pg_database_size of its database, which holds only those records (and PostgreSQL's own
 * catalogue, as ./data holds PGlite's). The same per-table query then splits both.
 *
 * Scale: one `sync` of `scale.records` records in `scale.days` one-day windows into a PGlite
 * DATA_DIR initialised beforehand (empty, not migrated): records/s end to end (process start to
 * exit), the run's own rate, peak RSS (VmHWM at exit) and the ./data it leaves.
 */
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { DEMO_RECORD_INTERVAL_MS } from '@analytics-exporter/simulator';
import pg from 'pg';
import { pgliteOptions } from '../../src/db/pglite-options.js';
import { runSyncChild, startSimulatorChild, upstreamEnv, type MeasuredRun } from '../lib/children.js';
import { DATA_END, DAY_MS, daysBefore, withFreshDatabase, type BenchContext } from '../lib/context.js';
import { int, mib } from '../lib/stats.js';
import type { Verdict } from '../lib/report.js';

/** ./data ÷ the same records' database in PostgreSQL, at most (issue 27 item 6). */
export const EMBEDDED_SIZE_TARGET = 2;

export interface EmbeddedSpec {
  /** Days of demo data for the footprint (30: SYNC_START_DATE's default, what `npm start` loads). */
  days: number;
  /** The scale run: records, in this many one-day windows. */
  scale: { records: number; days: number };
}

/** Bytes of a folder: apparent (file sizes) and allocated (blocks on disk; less for sparse files). */
export interface DiskBytes {
  apparent: number;
  allocated: number;
}

/** Bytes of one kind of table, with its TOAST, free space and visibility maps, and its indexes. */
export interface TableBytes {
  part: string;
  tableBytes: number;
  indexBytes: number;
}

/** One database's split: its tables by kind, and the rest of pg_database_size (the catalogue). */
export interface DatabaseSplit {
  databaseBytes: number;
  parts: TableBytes[];
}

export interface EmbeddedResult {
  spec: EmbeddedSpec;
  footprint: {
    records: number;
    /** ./data after the sync, whole and by part. */
    dataDir: DiskBytes;
    wal: DiskBytes;
    base: DiskBytes;
    /** The WAL segment size the folder was created with. */
    walSegmentBytes: number;
    embedded: DatabaseSplit;
    postgres: DatabaseSplit;
    embeddedRun: MeasuredRun;
    postgresRun: MeasuredRun;
  };
  scale: {
    records: number;
    run: MeasuredRun;
    dataDir: DiskBytes;
  };
}

/** Apparent and allocated bytes under `path` (files, folders and links themselves included, as `du` counts them). */
export function diskBytes(path: string): DiskBytes {
  const stat = lstatSync(path);
  const out = { apparent: stat.size, allocated: stat.blocks * 512 };
  if (stat.isDirectory()) {
    for (const name of readdirSync(path)) {
      const inner = diskBytes(join(path, name));
      out.apparent += inner.apparent;
      out.allocated += inner.allocated;
    }
  }
  return out;
}

/** The larger of the two sizes: what the folder costs, whichever way it is counted. */
function larger(bytes: DiskBytes): number {
  return Math.max(bytes.apparent, bytes.allocated);
}

/** Every table of the schema with its bytes (pg_table_size: heap, TOAST, free space map, visibility map) and its indexes'. */
const TABLES_SQL = `select c.relname as name, pg_table_size(c.oid)::bigint as table_bytes, pg_indexes_size(c.oid)::bigint as index_bytes
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'analytics' and c.relkind in ('r', 'm')`;
const DATABASE_SQL = 'select pg_database_size(current_database())::bigint as bytes';

const DERIVED = new Set(['records_hourly', 'records_hourly_distinct', 'records_daily_distinct', 'record_fields']);

/** The kind of a table of the schema, by name: a partition of records, a derived table, or the ledger and the rest. */
function partOf(name: string): string {
  if (name === 'records' || /^records_\d{8}_\d{8}$/.test(name)) return 'records (partitions)';
  if (DERIVED.has(name)) return 'derived tables (rollups, catalogue)';
  return 'ledger, state and the rest of the schema';
}

function split(databaseBytes: number, rows: readonly { name: string; table_bytes: string | number; index_bytes: string | number }[]): DatabaseSplit {
  const parts = new Map<string, TableBytes>();
  for (const row of rows) {
    const part = partOf(row.name);
    const entry = parts.get(part) ?? { part, tableBytes: 0, indexBytes: 0 };
    entry.tableBytes += Number(row.table_bytes);
    entry.indexBytes += Number(row.index_bytes);
    parts.set(part, entry);
  }
  return { databaseBytes, parts: [...parts.values()].sort((a, b) => a.part.localeCompare(b.part)) };
}

/** Splits the PGlite database in `dataDir` (opened with the exporter's options, after its sync has exited). */
async function embeddedSplit(dataDir: string): Promise<{ split: DatabaseSplit; walSegmentBytes: number }> {
  const db = await PGlite.create(pgliteOptions(dataDir));
  try {
    const tables = await db.query<{ name: string; table_bytes: string | number; index_bytes: string | number }>(TABLES_SQL);
    const database = await db.query<{ bytes: string | number }>(DATABASE_SQL);
    const segment = await db.query<{ bytes: string }>(`select setting as bytes from pg_settings where name = 'wal_segment_size'`);
    return { split: split(Number(database.rows[0]!.bytes), tables.rows), walSegmentBytes: Number(segment.rows[0]!.bytes) };
  } finally {
    await db.close();
  }
}

async function postgresSplit(url: string): Promise<DatabaseSplit> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = await client.query<{ name: string; table_bytes: string; index_bytes: string }>(TABLES_SQL);
    const database = await client.query<{ bytes: string }>(DATABASE_SQL);
    return split(Number(database.rows[0]!.bytes), tables.rows);
  } finally {
    await client.end();
  }
}

/** Environment of a `sync` child into the embedded database in `dataDir` (DATABASE_URL unset). */
function embeddedEnv(simulatorUrl: string, dataDir: string): Record<string, string> {
  const { DATABASE_URL: _unset, ...env } = upstreamEnv(simulatorUrl, '', { DATA_DIR: dataDir });
  return env;
}

function range(start: Date, end: Date): string[] {
  return ['--from', start.toISOString(), '--to', end.toISOString()];
}

export async function embeddedSuite(ctx: BenchContext, spec: EmbeddedSpec): Promise<EmbeddedResult> {
  const start = daysBefore(DATA_END, spec.days);
  const records = Math.floor((spec.days * DAY_MS) / DEMO_RECORD_INTERVAL_MS);
  let sim = await startSimulatorChild({ records, start, end: DATA_END });
  let footprint: EmbeddedResult['footprint'];
  try {
    const dataDir = join(ctx.scratch, 'embedded-footprint');
    ctx.log(`embedded: ${int(records)} records of demo density over ${spec.days} days into PGlite`);
    const embeddedRun = await runSyncChild(range(start, DATA_END), embeddedEnv(sim.url, dataDir));
    // Measured before the folder is opened again for its split.
    const sizes = { dataDir: diskBytes(dataDir), wal: diskBytes(join(dataDir, 'pg_wal')), base: diskBytes(join(dataDir, 'base')) };
    const embedded = await embeddedSplit(dataDir);
    ctx.log('embedded: the same records into PostgreSQL');
    const { postgresRun, postgres } = await withFreshDatabase(ctx, 'embedded', async (db) => {
      const run = await runSyncChild(range(start, DATA_END), upstreamEnv(sim.url, db.url));
      return { postgresRun: run, postgres: await postgresSplit(db.url) };
    });
    footprint = { records, ...sizes, walSegmentBytes: embedded.walSegmentBytes, embedded: embedded.split, postgres, embeddedRun, postgresRun };
  } finally {
    await sim.stop();
  }

  const scaleStart = daysBefore(DATA_END, spec.scale.days);
  sim = await startSimulatorChild({ records: spec.scale.records, start: scaleStart, end: DATA_END });
  try {
    const dataDir = join(ctx.scratch, 'embedded-scale');
    // Initialised here, so that the run's peak RSS is the sync's: PGlite's first start runs initdb in
    // a second WebAssembly instance (the footprint's run shows that peak).
    await (await PGlite.create(pgliteOptions(dataDir))).close();
    ctx.log(`embedded: sync of ${int(spec.scale.records)} records into PGlite`);
    const run = await runSyncChild([...range(scaleStart, DATA_END)], { ...embeddedEnv(sim.url, dataDir), SYNC_WINDOW: '1d' });
    return { spec, footprint, scale: { records: spec.scale.records, run, dataDir: diskBytes(dataDir) } };
  } finally {
    await sim.stop();
  }
}

/** ./data (the larger of apparent and allocated) ÷ pg_database_size of the same records. */
export function embeddedRatio(result: EmbeddedResult): number {
  return larger(result.footprint.dataDir) / result.footprint.postgres.databaseBytes;
}

/** 16.: ./data at most {@link EMBEDDED_SIZE_TARGET} × the same records in PostgreSQL. */
export function embeddedVerdict(result: EmbeddedResult): Verdict {
  const { footprint: f } = result;
  const ratio = embeddedRatio(result);
  const met = ratio <= EMBEDDED_SIZE_TARGET;
  return {
    name: '16. Embedded footprint',
    met,
    detail:
      `${int(f.records)} records (${result.spec.days} days of the demo): ./data ${mib(f.dataDir.apparent)} apparent, ${mib(f.dataDir.allocated)} allocated (WAL ${mib(f.wal.apparent)}) ` +
      `against ${mib(f.postgres.databaseBytes)} in PostgreSQL (pg_database_size): ×${ratio.toFixed(2)}; target ≤ ×${EMBEDDED_SIZE_TARGET}`,
    results: [{ id: 'embedded_size_vs_postgres', figure: Number(ratio.toFixed(3)), unit: 'ratio', target: EMBEDDED_SIZE_TARGET, met }],
  };
}

function perRecord(bytes: number, records: number): string {
  return int(bytes / records);
}

/** Section 16's tables. */
export function renderEmbedded(result: EmbeddedResult): string[] {
  const { footprint: f, scale: s } = result;
  const rest = (d: DatabaseSplit) => d.databaseBytes - d.parts.reduce((n, p) => n + p.tableBytes + p.indexBytes, 0);
  const names = [...new Set([...f.embedded.parts, ...f.postgres.parts].map((p) => p.part))].sort();
  const find = (d: DatabaseSplit, name: string) => d.parts.find((p) => p.part === name) ?? { part: name, tableBytes: 0, indexBytes: 0 };
  const cell = (bytes: number) => `${mib(bytes)} (${perRecord(bytes, f.records)} B/record)`;
  const outside = {
    apparent: f.dataDir.apparent - f.wal.apparent - f.base.apparent,
    allocated: f.dataDir.allocated - f.wal.allocated - f.base.allocated,
  };
  return [
    `## 16. The embedded default: ${int(f.records)} records in ./data`,
    '',
    `The demo's density (one record every ${DEMO_RECORD_INTERVAL_MS / 1000} s) over ${result.spec.days} days, synced by \`sync\` with DATABASE_URL unset into a fresh DATA_DIR (PGlite, created by that run as \`npm start\` creates it; WAL segments of ${mib(f.walSegmentBytes)}), ` +
      `and by another \`sync\` into a fresh database of the bench's PostgreSQL. ./data is measured after the sync exited (PGlite closed: its last checkpoint done); both databases are then split by the same query (pg_table_size: heap, TOAST, free space and visibility maps; pg_indexes_size).`,
    '',
    '| ./data | apparent | allocated | per record (apparent) |',
    '|---|---:|---:|---:|',
    `| whole folder | **${mib(f.dataDir.apparent)}** | ${mib(f.dataDir.allocated)} | ${perRecord(f.dataDir.apparent, f.records)} B |`,
    `| pg_wal | ${mib(f.wal.apparent)} | ${mib(f.wal.allocated)} | ${perRecord(f.wal.apparent, f.records)} B |`,
    `| base (the database, template0 and template1) | ${mib(f.base.apparent)} | ${mib(f.base.allocated)} | ${perRecord(f.base.apparent, f.records)} B |`,
    `| the rest (global, pg_xact, configuration, …) | ${mib(outside.apparent)} | ${mib(outside.allocated)} | – |`,
    '',
    '| Part | PGlite table | PGlite indexes | PostgreSQL table | PostgreSQL indexes |',
    '|---|---:|---:|---:|---:|',
    ...names.map((name) => {
      const e = find(f.embedded, name);
      const p = find(f.postgres, name);
      return `| ${name} | ${cell(e.tableBytes)} | ${cell(e.indexBytes)} | ${cell(p.tableBytes)} | ${cell(p.indexBytes)} |`;
    }),
    `| system catalogue and the rest of the database | ${mib(rest(f.embedded))} | | ${mib(rest(f.postgres))} | |`,
    `| **pg_database_size** | **${cell(f.embedded.databaseBytes)}** | | **${cell(f.postgres.databaseBytes)}** | |`,
    '',
    `./data ÷ PostgreSQL's database: **×${embeddedRatio(result).toFixed(2)}** (target ≤ ×${EMBEDDED_SIZE_TARGET}). ` +
      `The syncs: PGlite ${f.embeddedRun.wallSeconds.toFixed(1)} s wall, ${f.embeddedRun.cpuSeconds.toFixed(1)} CPU s, peak RSS ${mib(f.embeddedRun.peakRssBytes)}; ` +
      `PostgreSQL ${f.postgresRun.wallSeconds.toFixed(1)} s wall, ${f.postgresRun.cpuSeconds.toFixed(1)} CPU s (the sync process only), peak RSS ${mib(f.postgresRun.peakRssBytes)}.`,
    '',
    `### \`sync\` into PGlite: ${int(s.records)} records`,
    '',
    `${int(s.records)} records in ${result.spec.scale.days} one-day windows, zero latency, one run into a DATA_DIR initialised beforehand (PGlite's first start runs initdb in a second WebAssembly instance, which the footprint's run above includes: its peak RSS is mostly that). Judged in row 18: peak RSS ≤ 400 MiB, and records/s ≥ 0.5 × the ETL's sync into PostgreSQL (same records, windows and settings) when the ETL ran too.`,
    '',
    "| records/s (process start to exit) | records/s (the run's summary) | wall s | CPU s (sync process, PGlite inside it) | peak RSS | ./data apparent / allocated | ./data per record |",
    '|---:|---:|---:|---:|---:|---:|---:|',
    `| **${int(s.records / s.run.wallSeconds)}** | ${int(Number(s.run.summary?.recordsPerSecond ?? 0))} | ${s.run.wallSeconds.toFixed(1)} | ${s.run.cpuSeconds.toFixed(1)} | **${mib(s.run.peakRssBytes)}** | ${mib(s.dataDir.apparent)} / ${mib(s.dataDir.allocated)} | ${perRecord(s.dataDir.apparent, s.records)} B |`,
    '',
  ];
}
