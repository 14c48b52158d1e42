/**
 * How the embedded database starts PGlite: start parameters and, for a new folder, initdb's
 * arguments; apart so tests and the bench open folders exactly as the exporter does.
 * Design: docs/design/embedded-database.md ("Footprint").
 */
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

/** `-c` parameters after PGlite's own: a checkpoint deletes old segments rather than keep 80 MB for reuse. */
const EMBEDDED_SETTINGS: readonly string[] = ['wal_recycle=off'];

/** For a new folder: 1 MB WAL segments, not 16 MB (an existing folder keeps its own). */
const EMBEDDED_INITDB_ARGS: readonly string[] = ['--wal-segsize=1'];

/** PGlite's default start parameters plus ours, and initdb's for a first start. */
export function pgliteOptions(dataDir: string): PGliteOptions {
  return {
    dataDir,
    startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS.flatMap((setting) => ['-c', setting])],
    initDbStartParams: [...EMBEDDED_INITDB_ARGS],
  };
}
