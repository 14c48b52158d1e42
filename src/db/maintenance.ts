/**
 * What a postmaster's checkpointer and autovacuum would do, done for the embedded database (PGlite
 * has neither): once a second a CHECKPOINT when `pg_wal` passes its limit; once a minute
 * autovacuum's rule with its default settings. Statements go through the socket server, so they
 * wait for other connections' transactions. Design: docs/design/embedded-database.md.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from '../log.js';

/** As max_wal_size under a postmaster. */
export const EMBEDDED_WAL_LIMIT_BYTES = 64 * 1024 * 1024;

const EMBEDDED_WAL_CHECK_INTERVAL_MS = 1000;

/** autovacuum_naptime's default. */
const EMBEDDED_AUTOVACUUM_INTERVAL_MS = 60_000;

/** The tables autovacuum's default thresholds pick now, names quoted; TOAST goes with its table. */
const DUE_SQL = `select format('%I.%I', schemaname, relname) as name,
    n_dead_tup > 50 + 0.2 * n_live_tup as vacuum,
    n_mod_since_analyze > 50 + 0.1 * n_live_tup as analyze
  from pg_stat_all_tables
  where schemaname <> 'pg_toast' and (n_dead_tup > 50 + 0.2 * n_live_tup or n_mod_since_analyze > 50 + 0.1 * n_live_tup)
  order by n_dead_tup desc`;

/** Timeline, log and segment, 8 hex digits each. */
const SEGMENT_NAME = /^[0-9A-F]{24}$/;

/** Bytes of the segments in `dataDir`/pg_wal. @throws the file system's error. */
export function walBytes(dataDir: string): number {
  const wal = join(dataDir, 'pg_wal');
  let bytes = 0;
  for (const name of readdirSync(wal)) if (SEGMENT_NAME.test(name)) bytes += statSync(join(wal, name)).size;
  return bytes;
}

/** Quoted table names. */
export interface AutovacuumPass {
  vacuumed: string[];
  analyzed: string[];
}

export interface Maintenance {
  /** Checkpoints when `pg_wal` is over the limit: whether it did. Never throws (logs a failure). */
  checkWal(): Promise<boolean>;
  /** One autovacuum pass: what it did. Never throws (logs a failure). */
  autovacuum(): Promise<AutovacuumPass>;
  /** Stops the timers, waits for work in flight, closes the connections. Idempotent. */
  stop(): Promise<void>;
}

/** A connection for one kind of work, opened when first needed and again after a failure. */
class Session {
  private client: pg.Client | undefined;

  constructor(private readonly url: string) {}

  /** @throws the connection's or statement's error; the connection is then dropped. */
  async query<R extends pg.QueryResultRow>(sql: string): Promise<pg.QueryResult<R>> {
    try {
      if (this.client === undefined) {
        const fresh = new pg.Client({ connectionString: this.url });
        fresh.on('error', () => {
          if (this.client === fresh) this.client = undefined;
        });
        this.client = fresh;
        await fresh.connect();
      }
      return await this.client.query<R>(sql);
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}

/**
 * Starts the maintenance of the embedded database in `dataDir`, served at `url`; a connection each for
 * checkpoints and vacuum. `options`: intervals in ms (0: no timer) and the WAL limit in bytes.
 */
export function startMaintenance(
  dataDir: string,
  url: string,
  log: Logger,
  options: { walLimitBytes?: number; walIntervalMs?: number; autovacuumIntervalMs?: number } = {},
): Maintenance {
  const limitBytes = options.walLimitBytes ?? EMBEDDED_WAL_LIMIT_BYTES;
  const walSession = new Session(url);
  const vacuumSession = new Session(url);
  let stopped = false;

  async function checkWalOnce(): Promise<boolean> {
    try {
      const before = walBytes(dataDir);
      if (before <= limitBytes || stopped) return false;
      await walSession.query('CHECKPOINT');
      log.debug({ walBytesBefore: before, walBytesAfter: walBytes(dataDir) }, 'embedded database: checkpoint to bound its WAL');
      return true;
    } catch (err) {
      log.warn({ err }, 'embedded database: the checkpoint that bounds its WAL failed; trying again at the next check');
      return false;
    }
  }

  async function autovacuumOnce(): Promise<AutovacuumPass> {
    const pass: AutovacuumPass = { vacuumed: [], analyzed: [] };
    if (stopped) return pass;
    try {
      const { rows } = await vacuumSession.query<{ name: string; vacuum: boolean; analyze: boolean }>(DUE_SQL);
      for (const row of rows) {
        if (stopped) break;
        // Names from the catalogue, quoted by format('%I.%I').
        await vacuumSession.query(row.vacuum ? `VACUUM ${row.analyze ? '(ANALYZE) ' : ''}${row.name}` : `ANALYZE ${row.name}`);
        if (row.vacuum) pass.vacuumed.push(row.name);
        if (row.analyze) pass.analyzed.push(row.name);
      }
      if (rows.length > 0) log.debug(pass, 'embedded database: autovacuum pass');
    } catch (err) {
      log.warn({ err }, 'embedded database: an autovacuum pass failed; trying again at the next pass');
    }
    return pass;
  }

  // A call while the same work runs shares it.
  let walPending: Promise<boolean> | undefined;
  const checkWal = (): Promise<boolean> =>
    (walPending ??= checkWalOnce().finally(() => {
      walPending = undefined;
    }));
  let vacuumPending: Promise<AutovacuumPass> | undefined;
  const autovacuum = (): Promise<AutovacuumPass> =>
    (vacuumPending ??= autovacuumOnce().finally(() => {
      vacuumPending = undefined;
    }));
  const timers = [
    [options.walIntervalMs ?? EMBEDDED_WAL_CHECK_INTERVAL_MS, checkWal],
    [options.autovacuumIntervalMs ?? EMBEDDED_AUTOVACUUM_INTERVAL_MS, autovacuum],
  ] as const;
  const running = timers.flatMap(([ms, work]) => (ms > 0 ? [setInterval(() => void work(), ms).unref()] : []));

  let ended: Promise<void> | undefined;
  return {
    checkWal,
    autovacuum,
    stop: () =>
      (ended ??= (async () => {
        stopped = true;
        for (const timer of running) clearInterval(timer);
        await Promise.all([walPending, vacuumPending]);
        await Promise.all([walSession.close(), vacuumSession.close()]);
      })()),
  };
}
