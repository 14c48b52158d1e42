/**
 * The embedded default database: PGlite persisted under DATA_DIR and served on a loopback port by
 * pglite-socket, so the same `pg` code runs against it. One process per DATA_DIR (an OS lock);
 * within it every connection shares one backend. WAL and dead tuples are bounded by
 * maintenance.ts. For trials and small single-process deployments; set DATABASE_URL otherwise.
 * Design: docs/design/embedded-database.md.
 */
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { DatabaseOpenError } from '../errors.js';
import type { Logger } from '../log.js';
import { errnoText, lockDataDir, type DataDirLock } from './datadir-lock.js';
import { pgliteOptions } from './pglite-options.js';
import { startMaintenance, type AutovacuumPass } from './maintenance.js';

const EMBEDDED_MAX_CONNECTIONS = 8;

export interface EmbeddedDatabase {
  /** `postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable`: the socket speaks no TLS. */
  url: string;
  /** Absolute. */
  dataDir: string;
  /** The once-a-second WAL check, now: whether it ran a CHECKPOINT. Never throws. */
  checkWal(): Promise<boolean>;
  /** The once-a-minute autovacuum pass, now. Never throws. */
  autovacuum(): Promise<AutovacuumPass>;
  /** Stops maintenance and the socket server, closes PGlite (flushing it to disk). Idempotent. */
  close(): Promise<void>;
}

/**
 * Opens (creating) PGlite in `dataDir`, served on 127.0.0.1; locks DATA_DIR unless the caller passes its `lock`.
 * @throws {DataDirLockedError} when another process holds DATA_DIR; {@link DatabaseOpenError} (`ERR_DATABASE`)
 *   when the folder cannot be created, locked or opened, naming the errno code.
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
  const conn = server.getServerConn();
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
