/** Sync deps over a PostgreSQL pool, as the app layer builds them (a PgStore for the schema, its source's port). */
import type { Pool } from '../../src/db/pool.js';
import { DEFAULT_SOURCE } from '../../src/config.js';
import type { SyncDeps } from '../../src/sync/run/context.js';
import { PgStore } from '../../src/sync/store/pg/store.js';

/** `deps` with `pool` replaced by the PostgreSQL store of `deps.schema` for `deps.source`. */
export function pgDeps(deps: Omit<SyncDeps, 'store'> & { pool: Pool }): SyncDeps {
  const { pool, ...rest } = deps;
  const store = new PgStore({ pool, schema: deps.schema, tables: deps.tables, log: deps.log });
  return { ...rest, store: store.forSource(deps.source ?? DEFAULT_SOURCE, deps.log) };
}
