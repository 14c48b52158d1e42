/**
 * How the embedded database (embedded.ts) starts PGlite: its start parameters and, for a new folder,
 * initdb's arguments. A module of its own so that tests and the bench initialise and open folders
 * exactly as the exporter does without loading the rest of the embedded database.
 */
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

/**
 * Settings of the embedded database, as `-c name=value` start parameters appended to PGlite's own
 * (which stay in force): `wal_recycle=off`, so that a checkpoint deletes the segments it no longer
 * needs instead of renaming them for reuse (up to min_wal_size, 80 MB, or more after a backfill),
 * and only the current segment is left at rest.
 */
export const EMBEDDED_SETTINGS: readonly string[] = ['wal_recycle=off'];

/**
 * initdb's arguments for a new folder (appended to PGlite's own): WAL segments of 1 MB instead of
 * 16 MB, so the segment left at rest is 1 MB. The segment size is fixed when the folder is created;
 * an existing folder keeps its own.
 */
export const EMBEDDED_INITDB_ARGS: readonly string[] = ['--wal-segsize=1'];

/**
 * PGlite's options for the embedded database in `dataDir`: its default start parameters plus
 * {@link EMBEDDED_SETTINGS}, and {@link EMBEDDED_INITDB_ARGS} for a first start.
 */
export function pgliteOptions(dataDir: string): PGliteOptions {
  return {
    dataDir,
    startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS.flatMap((setting) => ['-c', setting])],
    initDbStartParams: [...EMBEDDED_INITDB_ARGS],
  };
}
