/**
 * 15. Bytes per record: where the ETL's data set goes on disk. Every table of the schema with its
 * partitions, TOAST and indexes (PostgreSQL's size functions), and the `records` heap per record
 * taken apart: line pointer, tuple header, each column, alignment padding, page overhead and free
 * space (pgstattuple, when the contrib is installed).
 */
import pg from 'pg';
import type { Verdict } from './report.js';
import { int, verdict } from './stats.js';

/** Bytes per record on disk, everything the schema stores included, at most (issue 27 item 4). */
export const BYTES_PER_RECORD_TARGET = 300;

/** An empty TOAST table: no heap page, one page of its index. */
const EMPTY_TOAST_BYTES = 8192;
/** Size of a heap page's line pointer (ItemIdData), bytes. */
const LINE_POINTER_BYTES = 4;

/** One table of the schema, its partitions summed under the partitioned table's name. */
export interface TableSize {
  name: string;
  partitions: number;
  /** Main fork, free space map and visibility map, bytes (pg_table_size without TOAST). */
  heap: number;
  /** The TOAST table and its index, bytes. */
  toast: number;
  /** Each index, by the partitioned index's name, bytes. */
  indexes: { name: string; bytes: number }[];
  /** pg_total_relation_size, bytes. */
  total: number;
}

/** The `records` heap per record. */
export interface RecordsHeap {
  /** Average pg_column_size of each column, in table order (bytes; a null counts 0). */
  columns: { name: string; type: string; avgBytes: number }[];
  /** pgstattuple over every partition: undefined without the contrib. */
  tuples: { count: number; bytes: number; deadBytes: number; freeBytes: number; tableBytes: number } | undefined;
  /** The tables' fillfactor storage parameter (100 when unset). */
  fillfactor: number;
}

export interface Footprint {
  records: number;
  tables: TableSize[];
  /** Σ pg_total_relation_size of the schema's tables, bytes. */
  total: number;
  /** pg_database_size, bytes: the schema's tables, the catalogue and what else the database holds. */
  database: number;
  heap: RecordsHeap;
}

/**
 * Measures the schema `schema` of the database at `url`, which holds `records` records. Installs
 * pgstattuple in the database (schema public) when the server has it; the bench's server is a
 * throwaway cluster whose user is a superuser.
 */
export async function measureFootprint(url: string, records: number, schema = 'analytics'): Promise<Footprint> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('checkpoint');
    const { rows: rels } = await client.query<{ root: string; partition: boolean; heap: string; toast: string; total: string; reloptions: string[] | null }>(
      `select r.relname as root, c.relispartition as partition,
              pg_table_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) as heap,
              coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) as toast,
              pg_total_relation_size(c.oid) as total, c.reloptions
         from pg_class c
         join pg_namespace n on n.oid = c.relnamespace
         join pg_class r on r.oid = coalesce(pg_partition_root(c.oid), c.oid)
        where n.nspname = $1 and c.relkind = 'r'
        order by 1`,
      [schema],
    );
    const { rows: idx } = await client.query<{ root: string; name: string; bytes: string }>(
      `select r.relname as root, ri.relname as name, pg_relation_size(i.indexrelid) as bytes
         from pg_index i
         join pg_class c on c.oid = i.indrelid
         join pg_namespace n on n.oid = c.relnamespace
         join pg_class r on r.oid = coalesce(pg_partition_root(c.oid), c.oid)
         join pg_class ri on ri.oid = coalesce(pg_partition_root(i.indexrelid), i.indexrelid)
        where n.nspname = $1 and c.relkind = 'r'`,
      [schema],
    );
    const tables = new Map<string, TableSize>();
    let fillfactor = 100;
    for (const r of rels) {
      const t = tables.get(r.root) ?? { name: r.root, partitions: 0, heap: 0, toast: 0, indexes: [], total: 0 };
      tables.set(r.root, t);
      if (r.partition) t.partitions++;
      const ff = r.reloptions?.find((o) => o.startsWith('fillfactor='));
      if (r.root === 'records' && ff !== undefined) fillfactor = Number(ff.slice('fillfactor='.length));
      t.heap += Number(r.heap);
      t.toast += Number(r.toast);
      t.total += Number(r.total);
    }
    for (const i of idx) {
      const t = tables.get(i.root)!;
      const index = t.indexes.find((x) => x.name === i.name) ?? { name: i.name, bytes: 0 };
      if (!t.indexes.includes(index)) t.indexes.push(index);
      index.bytes += Number(i.bytes);
    }
    const { rows: cols } = await client.query<{ name: string; type: string }>(
      `select a.attname as name, format_type(a.atttypid, a.atttypmod) as type
         from pg_attribute a where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`,
      [`"${schema}".records`],
    );
    const { rows: avg } = await client.query<Record<string, string | null>>(
      `select ${cols.map((c, n) => `avg(coalesce(pg_column_size(${client.escapeIdentifier(c.name)}), 0)) as c${n}`).join(', ')} from "${schema}".records`,
    );
    const columns = cols.map((c, n) => ({ name: c.name, type: c.type, avgBytes: Number(avg[0]![`c${n}`] ?? 0) }));
    const tuples = await recordsTuples(client, schema);
    const { rows: db } = await client.query<{ bytes: string }>('select pg_database_size(current_database()) as bytes');
    const list = [...tables.values()].sort((a, b) => b.total - a.total);
    for (const t of list) t.indexes.sort((a, b) => b.bytes - a.bytes);
    return { records, tables: list, total: list.reduce((s, t) => s + t.total, 0), database: Number(db[0]!.bytes), heap: { columns, tuples, fillfactor } };
  } finally {
    await client.end();
  }
}

/** pgstattuple summed over the partitions of `records`; undefined when the server lacks the contrib. */
async function recordsTuples(client: pg.Client, schema: string): Promise<RecordsHeap['tuples']> {
  const { rows: available } = await client.query("select 1 from pg_available_extensions where name = 'pgstattuple'");
  if (available.length === 0) return undefined;
  await client.query('create extension if not exists pgstattuple with schema public');
  const { rows } = await client.query<{ count: string; bytes: string; dead: string; free: string; len: string }>(
    `select sum(s.tuple_count) as count, sum(s.tuple_len) as bytes, sum(s.dead_tuple_len) as dead, sum(s.free_space) as free, sum(s.table_len) as len
       from pg_inherits i cross join lateral public.pgstattuple(i.inhrelid) s
      where i.inhparent = $1::regclass`,
    [`"${schema}".records`],
  );
  const r = rows[0]!;
  return { count: Number(r.count), bytes: Number(r.bytes), deadBytes: Number(r.dead), freeBytes: Number(r.free), tableBytes: Number(r.len) };
}

/** Bytes per record of everything the schema stores. */
export function bytesPerRecord(f: Footprint): number {
  return f.total / f.records;
}

/** Target row 15, from the footprint after a sync with every derived table on (and, for the reading, one without). */
export function footprintVerdict(withDerived: Footprint, bare: Footprint | undefined): Verdict {
  const figure = bytesPerRecord(withDerived);
  const met = figure <= BYTES_PER_RECORD_TARGET;
  return {
    name: '15. Bytes per record',
    met,
    detail:
      `${figure.toFixed(1)} bytes per record on disk (${int(withDerived.total)} bytes for ${int(withDerived.records)} records: every table, index and TOAST of the schema after a sync with every derived table on` +
      `${bare === undefined ? '' : `; ${bytesPerRecord(bare).toFixed(1)} without derived tables`}); target ≤ ${BYTES_PER_RECORD_TARGET}`,
    results: [{ id: 'bytes_per_record', figure: Number(figure.toFixed(1)), unit: 'bytes', target: BYTES_PER_RECORD_TARGET, met }],
  };
}

/** The section of BENCHMARKS.md: the breakdown by relation, then the `records` heap per record. */
export function renderFootprint(withDerived: Footprint, bare: Footprint | undefined): string[] {
  const n = withDerived.records;
  const per = (bytes: number) => (bytes / n).toFixed(2);
  const out = [
    `## 15. Bytes per record: ${int(n)} records on disk`,
    '',
    `The ETL benchmark's first sync (every derived table on), measured after it exits and a CHECKPOINT: pg_table_size without TOAST (heap), the TOAST table with its index, pg_relation_size of each index, pg_total_relation_size per table; partitions summed under their table (indexes under the partitioned index's name). ` +
      `The total is every table of the schema; pg_database_size adds the system catalogue and is ${int(withDerived.database)} bytes (${per(withDerived.database)} a record). ` +
      `Without derived tables (ROLLUP_DIMENSIONS=off, FIELD_CATALOGUE=off): ${bare === undefined ? 'not measured' : `${int(bare.total)} bytes, **${per(bare.total)}** a record`}.`,
    '',
    '| Relation | bytes | bytes per record |',
    '|---|---:|---:|',
  ];
  // Tables under half a byte a record (the ledger, settings, catalogue, quarantine) share one row.
  const small = withDerived.tables.filter((t) => t.total / n < 0.5);
  for (const t of withDerived.tables) {
    if (small.includes(t)) continue;
    const parts = t.partitions > 1 ? ` (${t.partitions} partitions)` : t.partitions === 1 ? ' (1 partition)' : '';
    out.push(`| ${t.name}${parts}: heap | ${int(t.heap)} | ${per(t.heap)} |`);
    // An empty TOAST table is one page of its index: shown only when it holds something.
    if (t.toast > EMPTY_TOAST_BYTES * Math.max(1, t.partitions)) out.push(`| ${t.name}: TOAST | ${int(t.toast)} | ${per(t.toast)} |`);
    for (const i of t.indexes) out.push(`| ${t.name}: index ${i.name} | ${int(i.bytes)} | ${per(i.bytes)} |`);
    const rest = t.toast <= EMPTY_TOAST_BYTES * Math.max(1, t.partitions) ? t.toast : 0;
    if (rest > 0) out.push(`| ${t.name}: empty TOAST | ${int(rest)} | ${per(rest)} |`);
  }
  if (small.length > 0) {
    const bytes = small.reduce((s, t) => s + t.total, 0);
    out.push(`| ${small.map((t) => t.name).join(', ')}: heap, TOAST, indexes | ${int(bytes)} | ${per(bytes)} |`);
  }
  out.push(
    `| **total** (target ≤ ${BYTES_PER_RECORD_TARGET} a record: ${verdict(bytesPerRecord(withDerived) <= BYTES_PER_RECORD_TARGET)}) | **${int(withDerived.total)}** | **${per(withDerived.total)}** |`,
    '',
  );
  const records = withDerived.tables.find((t) => t.name === 'records');
  const h = withDerived.heap;
  if (records !== undefined && h.tuples !== undefined && h.tuples.count > 0) {
    const count = h.tuples.count;
    const tuple = h.tuples.bytes / count;
    const columns = h.columns.reduce((s, c) => s + c.avgBytes, 0);
    // A heap tuple's header is 23 bytes, padded to 24 (8-byte alignment) with ≤ 8 columns.
    const header = 24;
    const heapPer = records.heap / count;
    out.push(
      `The \`records\` heap per record (${int(count)} tuples, pgstattuple; fillfactor ${h.fillfactor}): each column is its average pg_column_size; padding is what aligning the columns after variable-length ones adds inside the tuple; the rest is page headers, the padding of each tuple to 8 bytes, the free space and visibility maps, and free space (${per(h.tuples.freeBytes)} a record free, ${per(h.tuples.deadBytes)} dead).`,
      '',
      '| Part of the heap | bytes per record |',
      '|---|---:|',
      `| line pointer | ${LINE_POINTER_BYTES.toFixed(2)} |`,
      `| tuple header | ${header.toFixed(2)} |`,
      ...h.columns.map((c) => `| ${c.name} (${c.type}) | ${c.avgBytes.toFixed(2)} |`),
      `| alignment padding between columns | ${(tuple - header - columns).toFixed(2)} |`,
      `| page headers, tuple padding, maps, free space | ${(heapPer - tuple - LINE_POINTER_BYTES).toFixed(2)} |`,
      `| **heap** | **${heapPer.toFixed(2)}** |`,
      '',
    );
  }
  return out;
}
