import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { migrate } from '../../src/db/migrate.js';
import { silentLogger } from './silent-logger.js';
import type { Pool } from '../../src/db/pool.js';

/** The names of the migrations in migrations/ (without `.sql`), in the order they apply. */
export const MIGRATIONS: readonly string[] = readdirSync(fileURLToPath(new URL('../../migrations/', import.meta.url)))
  .filter((name) => name.endsWith('.sql'))
  .map((name) => name.slice(0, -'.sql'.length))
  .sort();

/**
 * Applies the migrations up to and including `last` (a name of {@link MIGRATIONS}) to `schema`, as
 * {@link migrate} would but stopping there: a database as an older release left it, for tests of
 * a migration that converts existing data.
 */
export async function migrateUpTo(pool: Pool, schema: string, last: string): Promise<void> {
  const count = MIGRATIONS.indexOf(last) + 1;
  if (count === 0) throw new Error(`no migration named ${last}`);
  await migrate(pool, schema, silentLogger, { count });
}
