/**
 * The embedded default database: PGlite (PostgreSQL compiled to WebAssembly) persisted under
 * DATA_DIR and served on a loopback port by pglite-socket, so the same `pg` code runs against
 * it as against a real server.
 *
 * Limits, logged at start: every connection shares one backend (transactions of different
 * connections are serialised at query level, not isolated), and advisory locks do not exclude.
 * It is for one process trying things out; set DATABASE_URL for anything else.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { ExporterError } from '../errors.js';
import type { Logger } from '../log.js';

/** Connections the socket server multiplexes onto the one backend. */
export const EMBEDDED_MAX_CONNECTIONS = 8;

export interface EmbeddedDatabase {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`. */
  url: string;
  /** Absolute path of the data folder. */
  dataDir: string;
  /** Stops the socket server and closes PGlite (flushing it to disk). Idempotent. */
  close(): Promise<void>;
}

/**
 * Opens (creating if needed) the PGlite database in `dataDir` and serves it on 127.0.0.1.
 *
 * @throws {ExporterError} `ERR_DATABASE` when the folder cannot be created or PGlite cannot open it
 *   (for example, another process has it open).
 */
export async function startEmbeddedDatabase(dataDir: string, log: Logger): Promise<EmbeddedDatabase> {
  const dir = resolve(dataDir);
  let db: PGlite;
  try {
    mkdirSync(dir, { recursive: true });
    db = await PGlite.create(dir);
  } catch (err) {
    throw new ExporterError('ERR_DATABASE', `cannot open the embedded database in ${dir}: ${(err as Error).message}`, { cause: err });
  }
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: EMBEDDED_MAX_CONNECTIONS });
  await server.start();
  const conn = server.getServerConn(); // "127.0.0.1:PORT"
  log.warn(
    { dataDir: dir },
    'DATABASE_URL is unset: using the embedded PGlite database (one process only: connections share one backend and advisory locks do not exclude); set DATABASE_URL for production',
  );
  let closed: Promise<void> | undefined;
  return {
    url: `postgres://postgres@${conn}/postgres`,
    dataDir: dir,
    close: () =>
      (closed ??= (async () => {
        await server.stop().catch(() => undefined);
        await db.close().catch(() => undefined);
      })()),
  };
}
