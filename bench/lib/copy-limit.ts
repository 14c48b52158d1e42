/**
 * The store's limit: PostgreSQL loading the very records a sync stores, with `psql \copy` from
 * a file, into a table identical to `records` (made by the project's own migrations).
 *
 * The file holds one COPY text row per record: the record's JSON as the simulator serves it,
 * its event time and its window (aligned as the sync aligns it), so the server parses
 * the same jsonb, fills the same columns and maintains the same indexes as the sync does.
 */
import { DEFAULT_SOURCE } from '../../src/config.js';
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { migrate } from '../../src/db/migrate.js';
import { createPool, withClient } from '../../src/db/pool.js';
import { silentLogger } from '../../test/helpers/silent-logger.js';
import { createDataset } from '@analytics-exporter/simulator';
import { catalogueRecords, type WindowFields } from '../../src/sync/derived/index.js';
import type { FieldStats } from '../../src/sync/derived/fields/field-types.js';
import { ensurePartitions } from '../../src/sync/store/pg/partitions.js';
import { Tables } from '../../src/sync/store/pg/tables.js';
import { alignDown } from '../../src/sync/windows.js';

/** COPY text format: backslash, newline, carriage return and tab are escaped. */
function copyText(value: string): string {
  return value.replace(/[\\\n\r\t]/g, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}

/**
 * Writes the records of [start, end) of the simulator dataset with `records` base records (the
 * simulator's defaults otherwise, as `simulate` uses them) as COPY rows of
 * (source, payload, event_time, window_start).
 *
 * @param fields when given, filled with each window's field catalogue (window start in ms →
 *   the records' top-level fields, as the sync catalogues a page: src/sync/derived/index.ts).
 * @returns the number of rows written.
 */
export async function writeCopyFile(
  path: string,
  spec: { records: number; start: Date; end: Date; windowMs: number },
  fields?: Map<number, WindowFields>,
): Promise<number> {
  const dataset = createDataset({ records: spec.records, start: spec.start, end: spec.end });
  const out = createWriteStream(path);
  let rows = 0;
  let chunk = '';
  for (const record of dataset.iterate(spec.start, spec.end, false)) {
    const ms = Date.parse(record.timestamp);
    const windowStart = alignDown(ms, spec.windowMs);
    if (fields !== undefined) {
      const window: WindowFields = fields.get(windowStart) ?? new Map<string, FieldStats>();
      fields.set(windowStart, window);
      catalogueRecords([record], [0], [ms], window);
    }
    chunk += `${DEFAULT_SOURCE}\t${copyText(JSON.stringify(record))}\t${record.timestamp}\t${new Date(windowStart).toISOString()}\n`;
    rows++;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  return rows;
}

/**
 * Creates schema `schema` with the project's migrations (the `records` table and its indexes),
 * and the monthly partitions of `records` that windows starting at `windowStarts` (ms) need, as a
 * sync creates them before loading (records has no default partition).
 */
export async function migrateSchema(databaseUrl: string, schema: string, windowStarts: readonly number[] = []): Promise<void> {
  const pool = createPool(databaseUrl, silentLogger, { max: 1 });
  try {
    await migrate(pool, schema, silentLogger);
    await withClient(pool, (client) => ensurePartitions(client, new Tables(schema), windowStarts, 'month'));
  } finally {
    await pool.end();
  }
}

/**
 * Times `psql -c "\copy schema.records (…) from 'file'"` (the psql process from start to exit).
 *
 * @returns seconds.
 * @throws when psql fails.
 */
export async function timePsqlCopy(databaseUrl: string, schema: string, file: string): Promise<number> {
  const command = `\\copy "${schema}".records (source, payload, event_time, window_start) from '${file.replaceAll("'", "''")}'`;
  const started = performance.now();
  const child = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', databaseUrl, '-c', command], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', (err) => reject(new Error(`cannot run psql (install the PostgreSQL client: apt-get install postgresql-client): ${err.message}`)));
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`psql \\copy failed (exit ${code}): ${output.trim()}`);
  return (performance.now() - started) / 1000;
}
