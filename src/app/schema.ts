/**
 * The schema for the commands migrate, rollup rebuild and fields: migrating it with its rollup,
 * rebuilding the rollup on demand, reading the field catalogue. (A run checks the rollup itself.)
 * Design: docs/design/derived-tables.md.
 */
import type { Config } from '../config.js';
import { migratePending, requireMigrated } from '../db/migrate.js';
import { assertWritable, type Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { FieldRow } from '../sync/derived/index.js';
import { schemaLockName } from '../sync/run/context.js';
import type { PgMaintenance } from '../sync/store/pg/maintenance.js';
import { storeOf } from './runtime.js';

/** Holding the schema's lock exclusively, after every source's running sync: the rollup serves them all. */
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
 * For the commands that write: refuses a read-only database, applies the pending migrations of
 * DATABASE_SCHEMA as MIGRATE says (`options.migrate` overrides it: the `migrate` command), then
 * rebuilds the rollup tables when built for other ROLLUP_* settings. Nothing is created that exists.
 * @throws {ReadOnlyDatabaseError}; {@link PendingMigrationsError} with MIGRATE=off; {@link ExporterError}
 *   `ERR_DATABASE` from the migrations; the database's error from the rebuild; {@link AbortedError}
 *   when `options.signal` ends the wait for the lock.
 */
export async function migrateDatabase(
  pool: Pool,
  config: Config,
  log: Logger,
  options: { signal?: AbortSignal; migrate?: 'auto' } = {},
): Promise<{ applied: string[]; rollupRebuilt: boolean }> {
  const schema = config.database.schema;
  await assertWritable(pool);
  const applied = await migratePending(pool, schema, log, options.migrate ?? config.database.migrate);
  // Without the lock first: a start does not wait for another process's sync when nothing changed.
  const current = await storeOf(pool, config, log).session((session) => session.maintenance().isRollupCurrent());
  const rollupRebuilt = !current && (await underSyncLock({ pool, config, log }, (maintenance) => maintenance.ensureRollup(), options.signal));
  return { applied, rollupRebuilt };
}

/** `rollup rebuild`, whatever the tables were built for. @returns rows per table; undefined for one not kept. */
export async function rebuildRollup(pool: Pool, config: Config, log: Logger): Promise<{ hourly: number | undefined; distinct: number | undefined }> {
  await assertWritable(pool);
  await migratePending(pool, config.database.schema, log, config.database.migrate);
  return underSyncLock({ pool, config, log }, (maintenance) => maintenance.rebuildRollup());
}

/** By field name then source; `sources`: `fields --source`. @throws {PendingMigrationsError}; the database's error. */
export async function listFields(pool: Pool, config: Config, log: Logger, sources?: readonly string[]): Promise<FieldRow[]> {
  // Reads only: SELECT is enough, and a pending migration is an error naming it.
  await requireMigrated(pool, config.database.schema);
  return storeOf(pool, config, log).session((session) => session.maintenance().listFields(sources));
}

/** For a person: columns aligned, `-` for none. */
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
