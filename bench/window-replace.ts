/**
 * What `records`' indexes cost and buy where a sync writes (issue 40, item 3): replacing one
 * one-day window (the `gone` delete of src/sync/derived/index.ts, then a COPY of the window's
 * records) in a table of N records, with the load's COPY, the audit's count per window and the
 * bytes a record beside it. Times only: it needs a quiet machine (run it under the bench lock).
 *
 *   npx tsx bench/window-replace.ts [records=1000000] [days=25] [rounds=5] [indexes=migrations]
 *
 * `indexes`: `migrations` keeps what the migrations made; `none`, `btree` (B-trees on event_time
 * and on (source, window_start)), `mixed` (a B-tree on event_time, BRIN on (source, window_start))
 * or `brin` (BRIN on both) replace them, to compare the choices on the same data.
 *
 * Data: the simulator's records over `days` one-day windows (bench/lib/copy-limit.ts), loaded into
 * a fresh schema of a throwaway cluster as a sync's backfill writes them: window after window, in
 * one transaction each, its delete (which finds nothing) then its COPY, no VACUUM between (timed,
 * with PostgreSQL's CPU: every backend's, from /proc). Then `rounds` replacements of the middle
 * window (its delete, then a COPY of the same rows, in one transaction, as a re-read does) right
 * after the backfill, VACUUM ANALYZE, and `rounds` more, each after the audit's count per window.
 */
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DEFAULT_SOURCE } from '../src/config.js';
import { createTestDatabase, startThrowawayCluster } from '../test/helpers/postgres.js';
import { postgresCpuSeconds } from './lib/cpu.js';
import { migrateSchema, writeCopyFile } from './lib/copy-limit.js';
import { DATA_END, DAY_MS, daysBefore } from './lib/context.js';
import { median } from './lib/stats.js';

const SCHEMA = 'analytics';
const records = Number(process.argv[2] ?? 1_000_000);
const days = Number(process.argv[3] ?? 25);
const rounds = Number(process.argv[4] ?? 5);
const indexes = process.argv[5] ?? 'migrations';

const VARIANTS: Record<string, string[]> = {
  none: [],
  btree: ['create index on records (event_time)', 'create index on records (source, window_start)'],
  mixed: ['create index on records (event_time)', 'create index on records using brin (source, window_start)'],
  brin: ['create index on records using brin (event_time)', 'create index on records using brin (source, window_start)'],
};
if (indexes !== 'migrations' && VARIANTS[indexes] === undefined) throw new Error(`indexes: one of migrations, ${Object.keys(VARIANTS).join(', ')}`);

/** The columns a COPY row of bench/lib/copy-limit.ts fills (run_id only where records still has it). */
async function copyColumns(client: pg.Client): Promise<string> {
  const { rowCount } = await client.query(
    `select 1 from information_schema.columns where table_schema = $1 and table_name = 'records' and column_name = 'run_id'`,
    [SCHEMA],
  );
  return rowCount === 1 ? 'source, payload, event_time, window_start, run_id' : 'source, payload, event_time, window_start';
}

/** Time and PostgreSQL CPU of `fn`, in s. */
async function measured<T>(dataDir: string | null, fn: () => Promise<T>): Promise<{ s: number; cpu: number; value: T }> {
  const cpu0 = postgresCpuSeconds(dataDir) ?? NaN;
  const t0 = performance.now();
  const value = await fn();
  return { s: (performance.now() - t0) / 1000, cpu: (postgresCpuSeconds(dataDir) ?? NaN) - cpu0, value };
}

/** Splits a COPY file of bench/lib/copy-limit.ts into one file per window (its 4th column), in window order. */
async function splitByWindow(file: string, dir: string): Promise<Map<string, string>> {
  const parts = new Map<string, string[]>();
  const lines = createInterface({ input: createReadStream(file) });
  for await (const line of lines) {
    const ws = line.split('\t')[3]!;
    let part = parts.get(ws);
    if (part === undefined) parts.set(ws, (part = []));
    part.push(line);
  }
  const files = new Map<string, string>();
  for (const ws of [...parts.keys()].sort()) {
    const path = join(dir, `window-${files.size}.copy`);
    writeFileSync(path, `${parts.get(ws)!.join('\n')}\n`);
    files.set(new Date(ws).toISOString(), path);
  }
  return files;
}

/** One window's replacement in one transaction, as a sync's: its rows deleted, then COPY; ms each. */
async function replaceWindow(client: pg.Client, columns: string, bounds: string[], file: string): Promise<{ del: number; copy: number; n: number }> {
  await client.query('begin');
  const del = await measured(null, () =>
    client.query(`delete from records where source = $3 and window_start >= $1 and window_start < $2`, [bounds[0], bounds[1], DEFAULT_SOURCE]),
  );
  const copy = await measured(null, () => pipeline(createReadStream(file), client.query(copyFrom(`copy records (${columns}) from stdin`))));
  await client.query('commit');
  return { del: del.s * 1000, copy: copy.s * 1000, n: del.value.rowCount ?? 0 };
}

async function measuredReplace(
  client: pg.Client,
  columns: string,
  bounds: string[],
  file: string,
): Promise<{ del: number; copy: number; cpu: number; n: number }> {
  const cpu0 = postgresCpuSeconds(cluster.dataDir) ?? NaN;
  const r = await replaceWindow(client, columns, bounds, file);
  return { ...r, cpu: (postgresCpuSeconds(cluster.dataDir) ?? NaN) - cpu0 };
}

function summary(rounds: { del: number; copy: number; cpu: number }[]): { deleteMs: number; copyMs: number; postgresCpuS: number } {
  return { deleteMs: median(rounds.map((r) => r.del)), copyMs: median(rounds.map((r) => r.copy)), postgresCpuS: median(rounds.map((r) => r.cpu)) };
}

const start = daysBefore(DATA_END, days);
const day = start.getTime() + Math.floor(days / 2) * DAY_MS;
const scratch = mkdtempSync(join(tmpdir(), 'window-replace-'));
const cluster = await startThrowawayCluster();
try {
  const db = await createTestDatabase(cluster.url, 'replace');
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const file = join(scratch, 'all.copy');
    const rows = await writeCopyFile(file, { records, start, end: DATA_END, windowMs: DAY_MS });
    const windowStarts = Array.from({ length: days }, (_, i) => start.getTime() + i * DAY_MS);
    await migrateSchema(db.url, SCHEMA, windowStarts);
    await client.query(`set search_path = ${SCHEMA}`);
    if (indexes !== 'migrations') {
      const { rows: old } = await client.query<{ name: string }>(
        `select indexrelid::regclass::text as name from pg_index where indrelid = 'records'::regclass`,
      );
      for (const { name } of old) await client.query(`drop index ${name}`);
      for (const sql of VARIANTS[indexes]!) await client.query(sql);
    }
    const { rows: defs } = await client.query<{ def: string }>(`select pg_get_indexdef(indexrelid) as def from pg_index where indrelid = 'records'::regclass`);
    const columns = await copyColumns(client);
    const dayFiles = await splitByWindow(file, scratch);
    const bounds = [new Date(day).toISOString(), new Date(day + DAY_MS).toISOString()];
    const dayFile = dayFiles.get(bounds[0]!)!;
    await client.query('checkpoint');
    // The backfill as a sync loads it: window after window, each its delete then its COPY, no VACUUM between.
    const deletes: number[] = [];
    const load = await measured(cluster.dataDir, async () => {
      for (const [ws, path] of dayFiles) {
        const { del } = await replaceWindow(client, columns, [ws, new Date(Date.parse(ws) + DAY_MS).toISOString()], path);
        deletes.push(del);
      }
    });
    const size = await client.query<{ heap: string; idx: string }>(
      `select sum(pg_table_size(c.oid)) as heap, sum(pg_indexes_size(c.oid)) as idx from pg_class c where c.oid in (select inhrelid from pg_inherits where inhparent = 'records'::regclass)`,
    );
    // Replacing the middle window right after the backfill (lookback), then once VACUUM has run.
    const fresh = [];
    for (let i = 0; i < rounds; i++) fresh.push(await measuredReplace(client, columns, bounds, dayFile));
    await client.query('vacuum analyze');
    const audit: number[] = [];
    const replace = [];
    for (let i = 0; i < rounds; i++) {
      // The audit's count per window (src/sync/store/pg/ledger.ts auditWindows) over every window.
      const counted = await measured(cluster.dataDir, () =>
        client.query(`select window_start, count(*) from records where source = $1 and window_start >= $2 and window_start <= $3 group by window_start`, [
          DEFAULT_SOURCE,
          start,
          new Date(DATA_END.getTime() - DAY_MS),
        ]),
      );
      audit.push(counted.s * 1000);
      replace.push(await measuredReplace(client, columns, bounds, dayFile));
    }
    const s = size.rows[0]!;
    const out = {
      indexes,
      defs: defs.map((d) => d.def),
      rows,
      backfill: { s: load.s, postgresCpuS: load.cpu, postgresCpuPerMillion: (load.cpu * 1e6) / rows, deleteMsTotal: deletes.reduce((a, b) => a + b, 0) },
      bytesPerRecord: { heap: Number(s.heap) / rows, indexes: Number(s.idx) / rows },
      windowRows: replace[0]?.n,
      replaceFresh: summary(fresh),
      replace: {
        deleteMs: median(replace.map((r) => r.del)),
        copyMs: median(replace.map((r) => r.copy)),
        postgresCpuS: median(replace.map((r) => r.cpu)),
        rounds: replace,
      },
      auditCountMs: { median: median(audit), runs: audit },
      load1: loadavg()[0],
    };
    process.stdout.write(`${JSON.stringify(out, null, 1)}\n`);
  } finally {
    await client.end();
    await db.drop();
  }
} finally {
  await cluster.stop();
  rmSync(scratch, { recursive: true, force: true });
}
