/**
 * Database access, callback-scoped: every client is released in `finally`, every
 * transaction ends in COMMIT or ROLLBACK, every advisory lock is unlocked.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { AbortedError, DatabaseError } from '../errors.js';
import type { Logger } from '../log.js';
import { connectionAttempts, describeTls, fallsBack, isTlsFailure, resolveDatabaseTarget, type DatabaseTarget } from './tls.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/** Bound on opening one connection, in milliseconds. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Creates a pool with an `'error'` listener (an idle client's dropped connection must never
 * crash the process) and a recognisable `application_name` for `pg_stat_activity`.
 *
 * TLS is libpq's (src/db/tls.ts): each new connection makes the attempts of its `sslmode` in
 * order (`prefer`: TLS, then plain when the server refuses TLS; `allow`: plain, then TLS when
 * the server rejects plain). A pool remembers a fallback it made: the server's answer is not
 * expected to change while it runs. A certificate that is not accepted, or TLS refused where
 * the mode requires it, fails the connect with a {@link DatabaseError} naming the database and
 * the TLS settings.
 *
 * @param target a {@link DatabaseTarget} (URL without `ssl*` parameters plus resolved TLS, as
 *   the configuration holds it), or a libpq-style URL whose own `ssl*` parameters are read
 *   (libpq's PGSSL* variables are not: pass a target resolved from them).
 * @throws {ConfigError} for a URL string whose `ssl*` parameters are invalid (see {@link resolveDatabaseTarget}).
 */
export function createPool(target: string | DatabaseTarget, log: Logger, options: { max?: number } = {}): Pool {
  const { url, tls } = typeof target === 'string' ? resolveDatabaseTarget(target) : target;
  const attempts = connectionAttempts(tls);
  // The attempt new connections start with; it only moves forward (see fallsBack).
  const state = { attempt: 0 };
  class AttemptClient extends pg.Client {
    constructor(config: pg.ClientConfig) {
      super({ ...config, ssl: attempts[state.attempt]! });
    }
  }
  const where = describeDatabase(url);

  class LibpqPool extends pg.Pool {
    override connect(): Promise<PoolClient>;
    override connect(callback: (err: Error | undefined, client: PoolClient | undefined, done: (release?: unknown) => void) => void): void;
    override connect(
      callback?: (err: Error | undefined, client: PoolClient | undefined, done: (release?: unknown) => void) => void,
    ): Promise<PoolClient> | void {
      const connecting = this.#connectWithFallback();
      if (callback === undefined) return connecting;
      connecting.then(
        (client) => callback(undefined, client, (release?: unknown) => client.release(release as Error | boolean | undefined)),
        (err: Error) => callback(err, undefined, () => undefined),
      );
    }

    async #connectWithFallback(): Promise<PoolClient> {
      for (;;) {
        const index = state.attempt;
        try {
          return await super.connect();
        } catch (err) {
          if (index + 1 < attempts.length && fallsBack(tls.mode, attempts[index]!, err)) {
            state.attempt = Math.max(state.attempt, index + 1);
            continue;
          }
          if (isTlsFailure(err)) throw new DatabaseError(`TLS to ${where} failed (${describeTls(tls)}): ${describeTlsError(err)}`, { cause: err });
          throw err;
        }
      }
    }
  }

  const pool = new LibpqPool({
    connectionString: url,
    max: options.max ?? 4,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    application_name: 'analytics-exporter',
    // Detects half-open connections (a database host that vanished) instead of waiting forever.
    keepAlive: true,
    Client: AttemptClient as unknown as new () => pg.ClientBase,
  });
  pool.on('error', (err) => log.warn({ err }, 'idle database connection failed'));
  return pool;
}

/** OpenSSL's verdicts on a chain that ends in no root the client trusts. */
const UNTRUSTED_CHAIN_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
]);

/**
 * What went wrong with TLS, in words, with the setting that would fix it. pg's or Node's own
 * message stays in the error's `cause` (describeError shows both).
 */
function describeTlsError(err: unknown): string {
  const e = err as { message?: string; code?: string };
  if (e.message === 'The server does not support SSL connections')
    return 'the server does not accept TLS; enable ssl on the server, or use sslmode=prefer or disable';
  if (e.code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return "the server's certificate does not hold the host name; connect by a name it holds, or use sslmode=verify-ca to check the chain only";
  }
  if (UNTRUSTED_CHAIN_CODES.has(e.code ?? ''))
    return "the server's certificate does not chain to a trusted root; set sslrootcert (or PGSSLROOTCERT) to the CA that signed it";
  if (/^ERR_SSL_|^ERR_TLS_/.test(e.code ?? '')) return 'the TLS handshake failed';
  return "the server's certificate was not accepted";
}

/** Wraps a database failure as a {@link DatabaseError} (`ERR_DATABASE`), keeping the Postgres SQLSTATE in the message. */
export function databaseError(what: string, cause: unknown): DatabaseError {
  const e = cause as { message?: string; code?: string };
  const state = e?.code ? ` [${e.code}]` : '';
  return new DatabaseError(`${what}: ${e?.message ?? String(cause)}${state}`, { cause });
}

/**
 * Names a database for messages and logs: `host:port/database`, never the user or password.
 *
 * @param url a `postgres://` URL; an unparsable one gives `the configured database` (its text may hold a password).
 */
export function describeDatabase(url: string): string {
  try {
    const parsed = new URL(url);
    const name = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || '(default database)';
    return `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}/${name}`;
  } catch {
    return 'the configured database';
  }
}

/**
 * Names the database a configuration points at, for messages and logs: {@link describeDatabase}
 * of DATABASE_URL, or the embedded database's folder.
 */
export function describeConfiguredDatabase(database: { url?: string | undefined; dataDir: string }): string {
  return database.url !== undefined ? describeDatabase(database.url) : `the embedded database in ${database.dataDir}`;
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
 * How often a wait for an advisory lock that can be interrupted tries the lock again, in
 * milliseconds. A blocking `pg_advisory_lock` cannot be interrupted by a signal: only cancelling
 * the statement from another connection would, so an interruptible wait polls instead.
 */
export const ADVISORY_LOCK_POLL_MS = 250;

/**
 * Takes a session-level advisory lock named by `name` on `client`, runs `fn`, and unlocks in
 * `finally`. The lock lives as long as the connection: a crashed process releases it.
 *
 * @param options.wait true waits until the lock is free; false returns `{ acquired: false }` at once.
 * @param options.shared takes the lock in shared mode (`pg_advisory_lock_shared`): any number of
 *   shared holders at once, none while an exclusive holder has it.
 * @param options.signal makes the wait interruptible: the lock is then tried every
 *   {@link ADVISORY_LOCK_POLL_MS} until it is free or the signal aborts. Without it the wait
 *   blocks inside the database (first come, first served).
 * @returns `{ acquired: true, value }` after `fn`, or `{ acquired: false }` when held elsewhere.
 * @throws {AbortedError} when `options.signal` aborts before the lock was taken (`fn` never ran).
 */
export async function withAdvisoryLock<T>(
  client: PoolClient,
  name: string,
  options: { wait: boolean; signal?: AbortSignal; shared?: boolean },
  fn: () => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  const mode = options.shared === true ? '_shared' : '';
  const tryLock = async (): Promise<boolean> => {
    const { rows } = await client.query<{ locked: boolean }>(`select pg_try_advisory_lock${mode}($1, hashtext($2)) as locked`, [ADVISORY_LOCK_NAMESPACE, name]);
    return rows[0]?.locked === true;
  };
  if (options.wait && options.signal === undefined) {
    await client.query(`select pg_advisory_lock${mode}($1, hashtext($2))`, [ADVISORY_LOCK_NAMESPACE, name]);
  } else if (options.wait) {
    const signal = options.signal!;
    for (;;) {
      if (signal.aborted) throw new AbortedError(`stopped while waiting for the lock ${name}`);
      if (await tryLock()) break;
      await delay(ADVISORY_LOCK_POLL_MS, undefined, { signal }).catch(() => undefined);
    }
  } else if (!(await tryLock())) {
    return { acquired: false };
  }
  try {
    return { acquired: true, value: await fn() };
  } finally {
    await client.query(`select pg_advisory_unlock${mode}($1, hashtext($2))`, [ADVISORY_LOCK_NAMESPACE, name]).catch(() => undefined);
  }
}

/** Quotes an SQL identifier (schema names come from configuration). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
