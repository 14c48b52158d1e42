/**
 * How the embedded database starts PGlite: start parameters and, for a new folder, initdb's
 * arguments; apart so tests and the bench open folders exactly as the exporter does.
 * Design: docs/design/embedded-database.md ("Footprint").
 */
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';

/**
 * `-c` parameters after PGlite's own: a checkpoint deletes old segments rather than keep 80 MB for
 * reuse; 32 MB of shared buffers, not 128 MB, all of which the backend touches at start and keeps
 * in the process's WebAssembly heap (which never shrinks).
 */
const EMBEDDED_SETTINGS: readonly string[] = ['wal_recycle=off', 'shared_buffers=32MB'];

/**
 * For a new folder (an existing one keeps its own): 1 MB WAL segments, not 16 MB; no data
 * checksums, so the first read after a bulk load sets hint bits without logging each page whole.
 */
const EMBEDDED_INITDB_ARGS: readonly string[] = ['--wal-segsize=1', '--no-data-checksums'];

/** PGlite's default start parameters plus ours, and initdb's for a first start. */
export function pgliteOptions(dataDir: string): PGliteOptions {
  return {
    dataDir,
    startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS.flatMap((setting) => ['-c', setting])],
    initDbStartParams: [...EMBEDDED_INITDB_ARGS],
  };
}
