/** The field catalogue (record_fields) as read back, and each field's column type in records_typed. */
import type { Queryable, SchemaTables } from '../table.js';

export interface FieldRow {
  source: string;
  /** A top-level key. */
  path: string;
  /** Its records_typed column, named once it is first held and kept while left out (TYPED_VIEW_MAX_FIELDS); null before. */
  column: string | null;
  /** Sorted. */
  types: string[];
  /** Null when the field has no column (only objects or arrays seen). */
  viewType: 'text' | 'numeric' | 'boolean' | 'timestamptz' | null;
  records: number;
  firstSeen: Date;
  lastSeen: Date;
  example: string | null;
}

/** One row per field over every source's rows, types united (one records_typed column serves all); `source` joined by commas. */
export function mergeSources(rows: readonly FieldRow[]): FieldRow[] {
  const byPath = new Map<string, FieldRow>();
  for (const r of rows) {
    const m = byPath.get(r.path);
    if (m === undefined) {
      byPath.set(r.path, { ...r, types: [...r.types] });
      continue;
    }
    m.source = `${m.source},${r.source}`;
    m.column ??= r.column;
    m.types = [...new Set([...m.types, ...r.types])].sort();
    m.viewType = viewType(m.types);
    m.records += r.records;
    if (r.firstSeen < m.firstSeen) m.firstSeen = r.firstSeen;
    if (r.lastSeen > m.lastSeen) m.lastSeen = r.lastSeen;
    m.example ??= r.example;
  }
  return [...byPath.values()];
}

/**
 * By field name then source; `viewType` from that source's types ({@link mergeSources} gives the view's).
 * @throws the database's error (a schema not migrated).
 */
export async function readFields(db: Queryable, t: SchemaTables, sources?: readonly string[]): Promise<FieldRow[]> {
  const { rows } = await db.query<{
    source: string;
    path: string;
    column: string | null;
    types: string[];
    records: string;
    firstSeen: Date;
    lastSeen: Date;
    example: string | null;
  }>(
    `select source, path, view_column as "column", types, records, first_seen as "firstSeen", last_seen as "lastSeen", example
       from ${t.fields} where $1::text[] is null or source = any($1::text[]) order by path collate "C", source collate "C"`,
    [sources === undefined ? null : [...sources]],
  );
  return rows.map((r) => ({ ...r, records: Number(r.records), viewType: viewType(r.types) }));
}

/** One scalar type gives its own, a mix or only nulls text, only objects or arrays no column. */
export function viewType(types: readonly string[]): FieldRow['viewType'] {
  const scalar = types.filter((x) => x === 'string' || x === 'date-time' || x === 'number' || x === 'boolean');
  const nested = types.some((x) => x === 'object' || x === 'array');
  if (scalar.length === 0) return nested ? null : 'text';
  if (scalar.length > 1 || nested) return 'text';
  return scalar[0] === 'number' ? 'numeric' : scalar[0] === 'boolean' ? 'boolean' : scalar[0] === 'date-time' ? 'timestamptz' : 'text';
}
