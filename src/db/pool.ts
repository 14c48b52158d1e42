/**
 * Database access, callback-scoped: every client is released in `finally`, every transaction ends
 * in COMMIT or ROLLBACK, every advisory lock is unlocked.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { AbortedError, DatabaseError, ReadOnlyDatabaseError } from '../errors.js';
import type { Logger } from '../log.js';
import { sessionEnded } from './session-end.js';
import { connectionAttempts, describeTls, fallsBack, isTlsFailure, resolveDatabaseTarget, type DatabaseTarget } from './tls.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/** Bound on opening one connection. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A pool with an `'error'` listener (an idle client's dropped connection must not crash the process) and libpq's
 * TLS attempts, a fallback remembered (docs/design/database-tls.md); a TLS failure is a {@link DatabaseError}.
 * @throws {ConfigError} for a URL string (its own `ssl*` read, not PGSSL*) with invalid `ssl*` parameters.
 */
export function createPool(target: string | DatabaseTarget, log: Logger, options: { max?: number } = {}): Pool {
  const { url, tls } = typeof target === 'string' ? resolveDatabaseTarget(target) : target;
  const attempts = connectionAttempts(tls);
  // The attempt new connections start with; it only moves forward.
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
    // Detects a database host that vanished.
    keepAlive: true,
    Client: AttemptClient as unknown as new () => pg.ClientBase,
  });
  pool.on('error', (err) => log.warn({ err }, 'idle database connection failed'));
  return pool;
}

const UNTRUSTED_CHAIN_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
]);

/** What went wrong, with the setting that would fix it; pg's own message stays in `cause`. */
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

/** A {@link DatabaseError} (`ERR_DATABASE`), the SQLSTATE kept in the message. */
export function databaseError(what: string, cause: unknown): DatabaseError {
  const e = cause as { message?: string; code?: string };
  const state = e?.code ? ` [${e.code}]` : '';
  if (e?.code === READ_ONLY_SQLSTATE) return new ReadOnlyDatabaseError(`${READ_ONLY_PREFIX}: ${what}: ${e.message ?? ''}${state}`, { cause });
  return new DatabaseError(`${what}: ${e?.message ?? String(cause)}${state}`, { cause });
}

/** read_only_sql_transaction. */
const READ_ONLY_SQLSTATE = '25006';
const READ_ONLY_PREFIX = 'the database is read-only (default_transaction_read_only / hot standby)';

/**
 * Refuses a database that cannot take writes, before a command that writes starts.
 * @throws {ReadOnlyDatabaseError} when `transaction_read_only` is on or `pg_is_in_recovery()`; the database's error.
 */
export async function assertWritable(pool: Pool): Promise<void> {
  const { rows } = await pool.query<{ ro: string; standby: boolean; db: string }>(
    `select current_setting('transaction_read_only') as ro, pg_is_in_recovery() as standby, current_database() as db`,
  );
  const { ro, standby, db } = rows[0]!;
  if (ro !== 'on' && !standby) return;
  throw new ReadOnlyDatabaseError(
    `${READ_ONLY_PREFIX}: transaction_read_only is ${ro}${standby ? ' and the server is a hot standby (pg_is_in_recovery())' : ''}, ` +
      `so nothing can be written: point DATABASE_URL at the primary, or run ALTER DATABASE ${quoteIdent(db)} SET default_transaction_read_only = off [${READ_ONLY_SQLSTATE}]`,
  );
}

/** `host:port/database`, never the user or password; `the configured database` when unparsable. */
export function describeDatabase(url: string): string {
  try {
    const parsed = new URL(url);
    const name = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || '(default database)';
    return `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}/${name}`;
  } catch {
    return 'the configured database';
  }
}

/** {@link describeDatabase} of DATABASE_URL, or the embedded database's folder. */
export function describeConfiguredDatabase(database: { url?: string | undefined; dataDir: string }): string {
  return database.url !== undefined ? describeDatabase(database.url) : `the embedded database in ${database.dataDir}`;
}

/** A checked-out client's first 'error' event: the FATAL of a session the server ended. */
const connectionErrors = new WeakMap<PoolClient, Error>();

/**
 * Runs `fn` with a client, released in `finally`; with the error after a throw, so pg discards it.
 * @throws what `fn` throws; a SessionEndedError (session-end.ts) when the server ended the session.
 */
export async function withClient<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failure: Error | undefined;
  // The pool listens on idle clients only: a checked-out client's 'error' would kill the process.
  const onError = (err: Error) => {
    failure ??= err;
    if (!connectionErrors.has(client)) connectionErrors.set(client, err);
  };
  client.on('error', onError);
  try {
    return await fn(client);
  } catch (err) {
    const ended = sessionEnded(err, connectionErrors.get(client));
    failure = err as Error;
    throw ended ?? err;
  } finally {
    client.off('error', onError);
    connectionErrors.delete(client);
    client.release(failure);
  }
}

/**
 * BEGIN … COMMIT around `fn`; a throw rolls back (a failed rollback is swallowed) and rethrows.
 * @throws what `fn` or the database throws; a SessionEndedError when the server ended the session.
 */
export async function withTransaction<T>(client: PoolClient, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const named = (err: unknown): unknown => sessionEnded(err, connectionErrors.get(client)) ?? err;
  await client.query('begin').catch((err: unknown) => {
    throw named(err);
  });
  try {
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw named(err);
  }
}

/** First key of our two-key advisory locks, apart from other applications'. */
export const ADVISORY_LOCK_NAMESPACE = 0x41455850; // "AEXP"

/** An interruptible wait polls: a blocking `pg_advisory_lock` ignores signals. */
const ADVISORY_LOCK_POLL_MS = 250;

/**
 * Runs `fn` under a session-level advisory lock `name`, unlocked in `finally`. `wait: false` returns
 * `{ acquired: false }` at once when it is held; `signal` makes the wait a poll, else it blocks in the database.
 * @throws {AbortedError} when `signal` aborts before the lock was taken (`fn` never ran).
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

/** Schema names come from configuration. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
