/**
 * The embedded default database: PGlite (PostgreSQL compiled to WebAssembly) persisted under
 * DATA_DIR and served on a loopback port by pglite-socket, so the same `pg` code runs against
 * it as against a real server.
 *
 * One process at a time: DATA_DIR is held with an OS file lock for as long as the database is
 * open (datadir-lock.ts); a second process is refused at once, naming the holder. Within the
 * process every connection shares one backend (transactions of different connections are
 * serialised at query level, not isolated). It is for trying things out and small single-process
 * deployments; set DATABASE_URL for anything else.
 *
 * Footprint: PGlite runs PostgreSQL as a single-user backend (no checkpointer, no autovacuum), so
 * its WAL is removed only by checkpoints the process asks for, and PostgreSQL's checkpoints keep
 * old segments for reuse. With PostgreSQL's defaults (16 MB segments, min_wal_size 80 MB,
 * wal_recycle on, and only the checkpoint of close) a 30-day demo sync left 147 MB of WAL beside
 * 109 MB of data. Now: 1 MB segments for a new folder, wal_recycle off, and a checkpoint whenever
 * the WAL passes 64 MB (pglite-options.ts, maintenance.ts); at rest the WAL is one segment. Nor is
 * there autovacuum: maintenance.ts applies its rule once a minute, so that the rows each run's
 * lookback loads again do not pile up as dead tuples.
 *
 * Durability: none of this changes whether a commit is in the WAL before it returns
 * (synchronous_commit and full_page_writes stay on); a checkpoint only writes pages back sooner, so
 * a process that dies mid-run recovers as before, and from less WAL. PGlite itself starts
 * PostgreSQL with `-F` (fsync off, its default start parameters, kept as they are): a crash of the
 * process loses nothing the OS has, a crash of the machine can. That is PGlite's trade, and one more
 * reason for DATABASE_URL in production.
 */
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { DatabaseOpenError } from '../errors.js';
import type { Logger } from '../log.js';
import { errnoText, lockDataDir, type DataDirLock } from './datadir-lock.js';
import { pgliteOptions } from './pglite-options.js';
import { startMaintenance, type AutovacuumPass } from './maintenance.js';

/** Connections the socket server multiplexes onto the one backend. */
export const EMBEDDED_MAX_CONNECTIONS = 8;

export interface EmbeddedDatabase {
  /**
   * `postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable`: PGlite's socket server speaks
   * no TLS, and a connection that asks it for TLS (libpq's default `prefer`) hangs.
   */
  url: string;
  /** Absolute path of the data folder. */
  dataDir: string;
  /**
   * Checkpoints now if the WAL is over its bound (what the once-a-second timer does; maintenance.ts).
   * Never throws.
   *
   * @returns whether it ran a CHECKPOINT.
   */
  checkWal(): Promise<boolean>;
  /** Vacuums and analyses now what autovacuum would (what the once-a-minute timer does; maintenance.ts). Never throws. */
  autovacuum(): Promise<AutovacuumPass>;
  /** Stops the maintenance and the socket server and closes PGlite (flushing it to disk). Idempotent. */
  close(): Promise<void>;
}

/**
 * Opens (creating if needed) the PGlite database in `dataDir` and serves it on 127.0.0.1.
 *
 * @param lock DATA_DIR already locked by the caller ({@link lockDataDir}), who wanted to know before
 *   anything else started; otherwise it is locked here, before anything is read. Either way it is
 *   released by {@link EmbeddedDatabase.close}, or when opening fails.
 * @throws {DataDirLockedError} when another process holds DATA_DIR; {@link DatabaseOpenError}
 *   (`ERR_DATABASE`) when the folder cannot be created or locked, or PGlite cannot open it, naming
 *   the errno code (`EROFS`, `EACCES`) where there is one.
 */
export async function startEmbeddedDatabase(dataDir: string, log: Logger, lock?: DataDirLock): Promise<EmbeddedDatabase> {
  const held = lock ?? lockDataDir(dataDir);
  const dir = held.dir;
  let db: PGlite;
  try {
    db = await PGlite.create(pgliteOptions(dir));
  } catch (err) {
    held.release();
    throw new DatabaseOpenError(`cannot open the embedded database in ${dir}: ${errnoText(err)}`, { cause: err });
  }
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: EMBEDDED_MAX_CONNECTIONS });
  try {
    await server.start();
  } catch (err) {
    await db.close().catch(() => undefined);
    held.release();
    throw new DatabaseOpenError(`cannot serve the embedded database in ${dir} on 127.0.0.1: ${(err as Error).message}`, { cause: err });
  }
  const conn = server.getServerConn(); // "127.0.0.1:PORT"
  log.warn(
    { dataDir: dir },
    'DATABASE_URL is unset: using the embedded PGlite database, held by this process alone (a second process on DATA_DIR is refused); set DATABASE_URL for production',
  );
  const url = `postgres://postgres@${conn}/postgres?sslmode=disable`;
  const maintenance = startMaintenance(dir, url, log);
  let closed: Promise<void> | undefined;
  return {
    url,
    dataDir: dir,
    checkWal: () => maintenance.checkWal(),
    autovacuum: () => maintenance.autovacuum(),
    close: () =>
      (closed ??= (async () => {
        await maintenance.stop();
        await server.stop().catch(() => undefined);
        await db.close().catch(() => undefined);
        held.release();
      })()),
  };
}
