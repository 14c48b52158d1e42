/**
 * The background work a postmaster's helpers do for a PostgreSQL server, done for the embedded
 * database. PGlite runs PostgreSQL as a single-user backend: there is no checkpointer, no
 * autovacuum, and the backend requests no checkpoint when max_wal_size is passed (PostgreSQL does
 * that only under a postmaster). Without them WAL grows with every write until the database is
 * closed (about 150 MB for the 30-day demo sync, 0.75 kB a record), and the rows each run's lookback
 * deletes and loads again stay as dead tuples for ever (with the defaults, SYNC_LOOKBACK 1h every 15
 * minutes, an hour of records 96 times a day: at the demo's rate four dead rows for every new one).
 *
 * - WAL: once a second, the size of `pg_wal`; past {@link EMBEDDED_WAL_LIMIT_BYTES}, a CHECKPOINT
 *   (with `wal_recycle=off`, pglite-options.ts, it deletes the segments before it). The backend runs
 *   one statement at a time, so the WAL can pass the limit by what one statement writes: a sync's
 *   window transaction (about 70 MB for 40,000 records), or the first read of pages a bulk load left
 *   without hint bits, which with data checksums (initdb's default since PostgreSQL 18) logs each
 *   page whole: the ANALYZE after a 1,000,000-record sync, 270 MB. The next check removes it.
 * - Vacuum: once a minute, autovacuum's rule with its default settings: VACUUM a table whose dead
 *   tuples exceed 50 + 20% of its live ones, ANALYZE one whose changes since the last ANALYZE exceed
 *   50 + 10% of them (pg_stat_all_tables).
 *
 * Each statement goes through the socket server like any client's, so it waits for a transaction
 * another connection has open instead of running inside it.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from '../log.js';

/** WAL kept before a checkpoint (what max_wal_size does under a postmaster). */
export const EMBEDDED_WAL_LIMIT_BYTES = 64 * 1024 * 1024;

/** How often the size of `pg_wal` is read: a readdir and a stat per segment. */
export const EMBEDDED_WAL_CHECK_INTERVAL_MS = 1000;

/** How often the tables are looked at for vacuum and analyze: autovacuum_naptime's default. */
export const EMBEDDED_AUTOVACUUM_INTERVAL_MS = 60_000;

/**
 * The tables autovacuum would work on now, by its default settings (autovacuum_vacuum_threshold 50,
 * autovacuum_vacuum_scale_factor 0.2, autovacuum_analyze_threshold 50, autovacuum_analyze_scale_factor
 * 0.1), with their names quoted. TOAST tables are vacuumed with their own table.
 */
const DUE_SQL = `select format('%I.%I', schemaname, relname) as name,
    n_dead_tup > 50 + 0.2 * n_live_tup as vacuum,
    n_mod_since_analyze > 50 + 0.1 * n_live_tup as analyze
  from pg_stat_all_tables
  where schemaname <> 'pg_toast' and (n_dead_tup > 50 + 0.2 * n_live_tup or n_mod_since_analyze > 50 + 0.1 * n_live_tup)
  order by n_dead_tup desc`;

/** A WAL segment's file name: timeline, log and segment, 8 hex digits each. */
const SEGMENT_NAME = /^[0-9A-F]{24}$/;

/**
 * Bytes of the WAL segments in `dataDir`/pg_wal (their apparent size; PostgreSQL writes the whole
 * segment when it creates one, so that is also what they occupy).
 *
 * @throws the file system's error when `pg_wal` cannot be read.
 */
export function walBytes(dataDir: string): number {
  const wal = join(dataDir, 'pg_wal');
  let bytes = 0;
  for (const name of readdirSync(wal)) if (SEGMENT_NAME.test(name)) bytes += statSync(join(wal, name)).size;
  return bytes;
}

/** What one pass of {@link Maintenance.autovacuum} did: the tables it vacuumed and analysed (quoted names). */
export interface AutovacuumPass {
  vacuumed: string[];
  analyzed: string[];
}

export interface Maintenance {
  /**
   * Checkpoints when `pg_wal` holds more than the limit (what the once-a-second timer does).
   * Never throws: a failure is logged (warn) and the next check tries again.
   *
   * @returns whether it ran a CHECKPOINT.
   */
  checkWal(): Promise<boolean>;
  /**
   * Vacuums and analyses the tables autovacuum would (what the once-a-minute timer does). Never
   * throws: a failure is logged (warn) and the next pass tries again, with what it did by then.
   */
  autovacuum(): Promise<AutovacuumPass>;
  /** Stops the timers, waits for the work in flight and closes its connections. Idempotent. */
  stop(): Promise<void>;
}

/** A connection of its own for one kind of work, opened when first needed and again after a failure. */
class Session {
  private client: pg.Client | undefined;

  constructor(private readonly url: string) {}

  /** Runs `sql` on the connection. @throws the connection's or the statement's error (the connection is then dropped). */
  async query<R extends pg.QueryResultRow>(sql: string): Promise<pg.QueryResult<R>> {
    try {
      if (this.client === undefined) {
        const fresh = new pg.Client({ connectionString: this.url });
        // A connection the socket server drops is replaced at the next query.
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
 * Starts the maintenance of the embedded database in `dataDir`, served at `url`. The checkpoints
 * and the vacuum passes have a connection each: a pass waits for the gap between two of a sync's
 * window transactions before each of its statements, and the WAL must not wait for the whole pass
 * (a 1,000,000-record sync reached 400 MB of WAL behind one when they shared a connection).
 *
 * @param options.walLimitBytes WAL before a checkpoint (default {@link EMBEDDED_WAL_LIMIT_BYTES});
 *   `walIntervalMs` and `autovacuumIntervalMs` between timed passes (defaults
 *   {@link EMBEDDED_WAL_CHECK_INTERVAL_MS}, {@link EMBEDDED_AUTOVACUUM_INTERVAL_MS}; 0 for no timer,
 *   only explicit calls).
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
        // The names come from the catalogue, quoted by format('%I.%I').
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
