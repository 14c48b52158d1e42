/**
 * Schema migrations: the SQL files in `migrations/` (`YYYYMMDDhhmmssSSS_name.sql`), applied by
 * node-pg-migrate, each in its own transaction, into DATABASE_SCHEMA. A blocking advisory lock per
 * schema (not node-pg-migrate's try-lock) lets two processes starting at once take turns.
 */
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import { PendingMigrationsError } from '../errors.js';
import type { Logger } from '../log.js';
import { databaseError, quoteIdent, withAdvisoryLock, withClient, type Pool } from './pool.js';
import { asSchemaOwnerSession } from './schema-owner.js';

/** Shipped beside `dist/` and `src/`. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations', import.meta.url));
/** Inside the target schema. */
export const MIGRATIONS_TABLE = 'pgmigrations';

/**
 * Applies the pending migrations (or the first `count`) to `schema`, created if needed; returns their names.
 * @throws {ExporterError} `ERR_DATABASE` naming the failing step; a failed migration is rolled back.
 */
export async function migrate(pool: Pool, schema: string, log: Logger, options: { count?: number } = {}): Promise<string[]> {
  try {
    return await withClient(pool, async (client) => {
      const locked = await withAdvisoryLock(client, `migrate:${schema}`, { wait: true }, async () => {
        // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
        const { rows } = await client.query<{ exists: boolean }>('select exists (select from pg_namespace where nspname = $1) as exists', [schema]);
        if (!rows[0]!.exists) await client.query(`create schema ${quoteIdent(schema)}`);
        // Tables a member of the owner creates are still the owner's (schema-owner.ts).
        const applied = await asSchemaOwnerSession(client, schema, () =>
          runner({
            dbClient: client,
            dir: MIGRATIONS_DIR,
            direction: 'up',
            ...(options.count !== undefined ? { count: options.count } : {}),
            schema,
            migrationsSchema: schema,
            migrationsTable: MIGRATIONS_TABLE,
            noLock: true,
            singleTransaction: false,
            checkOrder: true,
            logger: { debug: () => undefined, info: (m: string) => log.debug(m), warn: (m: string) => log.warn(m), error: (m: string) => log.error(m) },
          }),
        );
        // The runner leaves search_path on the schema.
        await client.query('reset search_path');
        return applied.map((m) => m.name);
      });
      if (!locked.acquired) throw new Error('unreachable: a waiting advisory lock is always acquired');
      if (locked.value.length > 0) log.info({ schema, migrations: locked.value }, 'applied database migrations');
      return locked.value;
    });
  } catch (err) {
    throw databaseError(`migrating schema ${schema}`, err);
  }
}

/**
 * For the commands that write: {@link migrate} when a migration is pending and `mode` is `auto`
 * (MIGRATE); nothing when none is, so a role without CREATE on the database runs them.
 * @returns the migrations applied. @throws {PendingMigrationsError} with `mode` `off` and some pending;
 *   as {@link migrate}.
 */
export async function migratePending(pool: Pool, schema: string, log: Logger, mode: 'auto' | 'off'): Promise<string[]> {
  const pending = await readPending(pool, schema);
  if (pending.length === 0) return [];
  if (mode === 'off') throw new PendingMigrationsError(schema, pending);
  return migrate(pool, schema, log);
}

/**
 * For the commands that only read (`state show`, `fields`, `verify`): they never migrate.
 * @throws {PendingMigrationsError} naming what is pending; {@link ExporterError} `ERR_DATABASE` when it cannot be read.
 */
export async function requireMigrated(pool: Pool, schema: string): Promise<void> {
  const pending = await readPending(pool, schema);
  if (pending.length > 0) throw new PendingMigrationsError(schema, pending);
}

async function readPending(pool: Pool, schema: string): Promise<string[]> {
  try {
    return await pendingMigrations(pool, schema);
  } catch (err) {
    throw databaseError(`reading the migrations of schema ${schema}`, err);
  }
}

/** The shipped migrations not applied to `schema` (for `/readyz` and `check`). */
export async function pendingMigrations(pool: Pool, schema: string): Promise<string[]> {
  const { readdir } = await import('node:fs/promises');
  const shipped = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, ''));
  const { rows } = await pool.query<{ exists: boolean }>('select to_regclass($1) is not null as exists', [`${quoteIdent(schema)}.${MIGRATIONS_TABLE}`]);
  if (!rows[0]?.exists) return shipped;
  const applied = await pool.query<{ name: string }>(`select name from ${quoteIdent(schema)}.${MIGRATIONS_TABLE}`);
  const done = new Set(applied.rows.map((r) => r.name));
  return shipped.filter((name) => !done.has(name));
}
