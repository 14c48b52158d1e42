/**
 * The soak's database roles, created as docs/deploy.md's "Database roles" says: an owner role that
 * alone changes the schema and runs `migrate` once, a runtime role holding the owner's rights
 * (granted the owner, as partitions, RETENTION and rollup rebuilds are DDL) that runs both `serve`
 * replicas and the final `sync` with MIGRATE=off, and a reader role. Neither login role has CREATE
 * on the database. The harness's own connection stays the cluster's superuser.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import type pg from 'pg';
import { CLI_PATH, ROOT } from '../bench/lib/children.js';

export const OWNER_ROLE = 'analytics_owner';
export const RUNTIME_ROLE = 'exporter';
export const READER_ROLE = 'analytics_reader';

/** The roles' database URLs (the throwaway cluster trusts local connections; the passwords are set all the same, as in production). */
export interface SoakRoles {
  ownerUrl: string;
  runtimeUrl: string;
  readerUrl: string;
  /** The statements run, for the report (passwords shown as '…'). */
  statements: string[];
}

function urlAs(url: string, role: string, password: string): string {
  const u = new URL(url);
  u.username = role;
  u.password = password;
  return u.toString();
}

/**
 * Creates the three roles and the schema `schema` owned by the owner role, through `admin` (a
 * superuser's connection to the soak's database).
 *
 * @returns each role's URL of the database `databaseUrl` names.
 * @throws pg errors (a role that exists already: the cluster is the soak's own).
 */
export async function createRoles(admin: pg.Client, databaseUrl: string, schema: string): Promise<SoakRoles> {
  const id = (name: string) => admin.escapeIdentifier(name);
  const passwords = [OWNER_ROLE, RUNTIME_ROLE, READER_ROLE].map(() => randomBytes(12).toString('base64url'));
  const [owner, runtime, reader] = passwords as [string, string, string];
  const lit = (s: string) => admin.escapeLiteral(s);
  const statements = [
    `create role ${id(OWNER_ROLE)} login password ${lit(owner)}`,
    `create role ${id(RUNTIME_ROLE)} login password ${lit(runtime)}`,
    `create schema ${id(schema)} authorization ${id(OWNER_ROLE)}`,
    `grant ${id(OWNER_ROLE)} to ${id(RUNTIME_ROLE)}`,
    `create role ${id(READER_ROLE)} login password ${lit(reader)}`,
    `grant usage on schema ${id(schema)} to ${id(READER_ROLE)}`,
    `grant select on all tables in schema ${id(schema)} to ${id(READER_ROLE)}`,
    `alter default privileges for role ${id(OWNER_ROLE)} in schema ${id(schema)} grant select on tables to ${id(READER_ROLE)}`,
  ];
  for (const sql of statements) await admin.query(sql);
  return {
    ownerUrl: urlAs(databaseUrl, OWNER_ROLE, owner),
    runtimeUrl: urlAs(databaseUrl, RUNTIME_ROLE, runtime),
    readerUrl: urlAs(databaseUrl, READER_ROLE, reader),
    statements: statements.map((sql) => sql.replace(/password '[^']*'/, "password '…'")),
  };
}

/**
 * `analytics-exporter migrate` as the owner role, once, before the replicas start.
 *
 * @throws when it exits other than 0 (its stderr in the message).
 */
export async function migrateAsOwner(roles: SoakRoles, schema: string): Promise<void> {
  await promisify(execFile)(process.execPath, [CLI_PATH, 'migrate'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: roles.ownerUrl, DATABASE_SCHEMA: schema, LOG_LEVEL: 'warn' },
  });
}

/** Who owns `schema` and the table `records` in it, and whether the runtime role can create in the database (it must not). */
export async function describeOwnership(
  admin: pg.Client,
  schema: string,
): Promise<{ schemaOwner: string; recordsOwner: string; runtimeCreatesInDatabase: boolean }> {
  const { rows } = await admin.query<{ schemaOwner: string; recordsOwner: string | null; create: boolean }>(
    `select n.nspowner::regrole::text as "schemaOwner",
            (select c.relowner::regrole::text from pg_class c where c.relnamespace = n.oid and c.relname = 'records') as "recordsOwner",
            has_database_privilege($2, current_database(), 'CREATE') as create
       from pg_namespace n where n.nspname = $1`,
    [schema, RUNTIME_ROLE],
  );
  const row = rows[0];
  return { schemaOwner: row?.schemaOwner ?? '?', recordsOwner: row?.recordsOwner ?? '?', runtimeCreatesInDatabase: row?.create ?? true };
}
