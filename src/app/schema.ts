/**
 * The application layer of the tables derived from `records` (src/sync/derived/index.ts): migrating a
 * schema together with its rollup, rebuilding the rollup on demand, and reading the field
 * catalogue, for the commands migrate, rollup rebuild and fields. (A sync run checks the rollup
 * itself, under its own lock: src/sync/run/run.ts.)
 */
import type { Config } from '../config.js';
import { migrate } from '../db/migrate.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { FieldRow } from '../sync/derived/index.js';
import { schemaLockName } from '../sync/run/context.js';
import type { PgMaintenance } from '../sync/store/pg/maintenance.js';
import { storeOf } from './runtime.js';

/**
 * Runs `fn` on a session holding the schema's sync lock exclusively (waiting for the running syncs
 * of every source, which hold it shared). records_hourly is one table for every source, so its
 * rebuild excludes them all.
 */
async function underSyncLock<T>(
  on: { pool: Pool; config: Config; log: Logger },
  fn: (maintenance: PgMaintenance) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  return storeOf(on.pool, on.config, on.log).session(async (session) => {
    const lock = { wait: true, ...(signal ? { signal } : {}) };
    const locked = await session.lock(schemaLockName(on.config.database.schema), lock, () => fn(session.maintenance()));
    if (!locked.acquired) throw new Error('unreachable: a waiting advisory lock is always acquired');
    return locked.value;
  });
}

/**
 * Applies pending migrations to DATABASE_SCHEMA, then rebuilds records_hourly and
 * records_hourly_distinct from `records` when built for other ROLLUP_* settings (or not yet; or
 * drops them when off), under the schema's sync lock.
 *
 * @param options.signal ends the wait for the lock (syncs of the schema running) with {@link AbortedError}.
 * @returns the migrations applied now, and whether the rollup was rebuilt.
 * @throws {ExporterError} `ERR_DATABASE` from the migrations; the database's error from the rebuild;
 *   {@link AbortedError} when `options.signal` aborts the wait for the lock.
 */
export async function migrateDatabase(
  pool: Pool,
  config: Config,
  log: Logger,
  options: { signal?: AbortSignal } = {},
): Promise<{ applied: string[]; rollupRebuilt: boolean }> {
  const schema = config.database.schema;
  const applied = await migrate(pool, schema, log);
  // Checked first without the lock, so a start does not wait for another process's sync when nothing changed.
  const current = await storeOf(pool, config, log).session((session) => session.maintenance().isRollupCurrent());
  const rollupRebuilt = !current && (await underSyncLock({ pool, config, log }, (maintenance) => maintenance.ensureRollup(), options.signal));
  return { applied, rollupRebuilt };
}

/**
 * Rebuilds records_hourly and records_hourly_distinct from `records` for ROLLUP_DIMENSIONS,
 * ROLLUP_DISTINCT and ROLLUP_DISTINCT_BY, whatever they were built for (migrating first), under
 * the schema's sync lock. With ROLLUP_DIMENSIONS=off (or ROLLUP_DISTINCT=none for the second) the
 * table is dropped instead.
 *
 * @returns the number of rows each table holds afterwards; undefined for a table not kept.
 */
export async function rebuildRollup(pool: Pool, config: Config, log: Logger): Promise<{ hourly: number | undefined; distinct: number | undefined }> {
  await migrate(pool, config.database.schema, log);
  return underSyncLock({ pool, config, log }, (maintenance) => maintenance.rebuildRollup());
}

/**
 * The field catalogue of DATABASE_SCHEMA (migrating first), ordered by field name then source.
 *
 * @param sources only these sources' rows (`fields --source`); default: every source's.
 */
export async function listFields(pool: Pool, config: Config, log: Logger, sources?: readonly string[]): Promise<FieldRow[]> {
  await migrate(pool, config.database.schema, log);
  return storeOf(pool, config, log).session((session) => session.maintenance().listFields(sources));
}

/**
 * The catalogue as a plain-text table for a person: one line per field, columns aligned, an
 * example in its JSON form (already cut short in the catalogue), `-` for none.
 */
export function formatFieldsTable(fields: readonly FieldRow[]): string {
  if (fields.length === 0) return 'no fields catalogued yet: run a sync first\n';
  const header = ['SOURCE', 'FIELD', 'COLUMN', 'TYPE', 'JSON TYPES', 'RECORDS', 'FIRST SEEN', 'LAST SEEN', 'EXAMPLE'];
  const rows = fields.map((f) => [
    f.source,
    f.path,
    f.viewType === null ? '-' : (f.column ?? '-'),
    f.viewType ?? '-',
    f.types.join(','),
    String(f.records),
    f.firstSeen.toISOString(),
    f.lastSeen.toISOString(),
    f.example ?? '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[header, ...rows].map(line).join('\n')}\n`;
}
