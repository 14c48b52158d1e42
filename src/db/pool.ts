/**
 * Database access, callback-scoped: every client is released in `finally`, every
 * transaction ends in COMMIT or ROLLBACK, every advisory lock is unlocked.
 */
import pg from 'pg';
import { ExporterError } from '../errors.js';
import type { Logger } from '../log.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/** Bound on opening one connection, in milliseconds. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Creates a pool with an `'error'` listener (an idle client's dropped connection must never
 * crash the process) and a recognisable `application_name` for `pg_stat_activity`.
 *
 * @param url libpq-style URL; `sslmode` in it is honoured by pg.
 */
export function createPool(url: string, log: Logger, options: { max?: number } = {}): Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 4,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    application_name: 'analytics-exporter',
    // Detects half-open connections (a database host that vanished) instead of waiting forever.
    keepAlive: true,
  });
  pool.on('error', (err) => log.warn({ err: { message: err.message, code: (err as { code?: string }).code } }, 'idle database connection failed'));
  return pool;
}

/** Wraps a database failure as `ERR_DATABASE`, keeping the Postgres SQLSTATE in the message. */
export function databaseError(what: string, cause: unknown): ExporterError {
  const e = cause as { message?: string; code?: string };
  const state = e?.code ? ` [${e.code}]` : '';
  return new ExporterError('ERR_DATABASE', `${what}: ${e?.message ?? String(cause)}${state}`, { cause });
}

/**
 * Runs `fn` with a client from the pool and releases it in `finally`. A client whose work
 * threw is released with the error, so pg discards it rather than reusing a broken session.
 */
export async function withClient<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failure: Error | undefined;
  // The pool listens for errors of idle clients only: a connection dropped while checked out
  // (failover, pg_terminate_backend) would otherwise be an unhandled 'error' event and kill the
  // process. The query in flight rejects with the same error, so noting it is enough here.
  const onError = (err: Error) => {
    failure ??= err;
  };
  client.on('error', onError);
  try {
    return await fn(client);
  } catch (err) {
    failure = err as Error;
    throw err;
  } finally {
    client.off('error', onError);
    client.release(failure);
  }
}

/**
 * Runs `fn` inside BEGIN … COMMIT on `client`; any throw rolls back and rethrows.
 * A rollback that fails (connection gone) is swallowed: the server discards the transaction anyway.
 */
export async function withTransaction<T>(client: PoolClient, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  await client.query('begin');
  try {
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  }
}

/** First key of the two-key advisory lock space, so our locks do not collide with other applications'. */
export const ADVISORY_LOCK_NAMESPACE = 0x41455850; // "AEXP"

/**
 * Takes a session-level advisory lock named by `name` on `client`, runs `fn`, and unlocks in
 * `finally`. The lock lives as long as the connection: a crashed process releases it.
 *
 * @param wait true blocks until the lock is free; false returns `{ acquired: false }` at once.
 * @returns `{ acquired: true, value }` after `fn`, or `{ acquired: false }` when held elsewhere.
 */
export async function withAdvisoryLock<T>(
  client: PoolClient,
  name: string,
  options: { wait: boolean },
  fn: () => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  if (options.wait) {
    await client.query('select pg_advisory_lock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, name]);
  } else {
    const { rows } = await client.query<{ locked: boolean }>('select pg_try_advisory_lock($1, hashtext($2)) as locked', [ADVISORY_LOCK_NAMESPACE, name]);
    if (!rows[0]?.locked) return { acquired: false };
  }
  try {
    return { acquired: true, value: await fn() };
  } finally {
    await client.query('select pg_advisory_unlock($1, hashtext($2))', [ADVISORY_LOCK_NAMESPACE, name]).catch(() => undefined);
  }
}

/** Quotes an SQL identifier (schema names come from configuration). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
