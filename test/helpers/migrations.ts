import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The names of the migrations in migrations/ (without `.sql`), in the order they apply. */
export const MIGRATIONS: readonly string[] = readdirSync(fileURLToPath(new URL('../../migrations/', import.meta.url)))
  .filter((name) => name.endsWith('.sql'))
  .map((name) => name.slice(0, -'.sql'.length))
  .sort();
