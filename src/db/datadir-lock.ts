/**
 * One process per embedded database: the DATA_DIR of PGlite is held with an OS file lock (an
 * open-file-description lock on Linux, flock on macOS, LockFileEx on Windows, through the
 * `fs-native-extensions` package), which the kernel releases when its process ends in any way,
 * `kill -9` included: a lock can never be left stuck. The lock file also says who holds it.
 *
 * PGlite itself does not guard its folder, and every connection of one process shares one backend;
 * two processes on one folder overwrite each other's pages (committed rows lost, the ledger
 * disagreeing with the records). Several processes need a PostgreSQL server (DATABASE_URL).
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import fsx from 'fs-native-extensions';
import { DataDirLockedError, DatabaseOpenError } from '../errors.js';

/** Name of the lock file inside DATA_DIR. */
export const LOCK_FILE = 'analytics-exporter.lock';

/** Who holds a DATA_DIR, as its lock file says. */
export interface DataDirHolder {
  pid: number;
  /** The holder's command line (`analytics-exporter serve`, …); the CLI takes no secrets as arguments. */
  command: string;
  /** ISO 8601 UTC time the lock was taken. */
  since: string;
}

/** A held DATA_DIR; {@link release} lets it go (the process ending does too). */
export interface DataDirLock {
  /** Absolute path of the folder. */
  readonly dir: string;
  /** Unlocks and closes the lock file. Idempotent. */
  release(): void;
}

/**
 * Takes DATA_DIR for this process, creating the folder if needed. Synchronous, so that a caller
 * knows before it starts anything else.
 *
 * @param dataDir the folder (relative to the working directory, or absolute).
 * @returns the lock, held until {@link DataDirLock.release} or the end of the process.
 * @throws {DataDirLockedError} when another process holds it (naming that process, as far as its
 *   lock file says); {@link DatabaseOpenError} when the folder or the lock file cannot be created or
 *   opened, naming the errno code (`EROFS`, `EACCES`, `ENOTDIR`, …).
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const dir = resolve(dataDir);
  const file = join(dir, LOCK_FILE);
  let fd: number;
  try {
    mkdirSync(dir, { recursive: true });
    fd = openSync(file, 'a+');
  } catch (err) {
    throw new DatabaseOpenError(`cannot open the embedded database in ${dir}: ${errnoText(err)}`, { cause: err });
  }
  let locked: boolean;
  try {
    locked = fsx.tryLock(fd);
  } catch (err) {
    closeSync(fd);
    throw new DatabaseOpenError(`cannot lock the embedded database in ${dir} (${file}): ${errnoText(err)}`, { cause: err });
  }
  if (!locked) {
    closeSync(fd);
    throw new DataDirLockedError(dir, readHolder(file));
  }
  const holder: DataDirHolder = { pid: process.pid, command: commandLine(), since: new Date().toISOString() };
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${JSON.stringify(holder)}\n`, 0);
  } catch {
    // Who holds it is information only; the lock is what excludes.
  }
  let released = false;
  return {
    dir,
    release() {
      if (released) return;
      released = true;
      try {
        fsx.unlock(fd);
      } finally {
        closeSync(fd);
      }
    },
  };
}

/** What the lock file says of its holder, or undefined when it says nothing readable. */
export function readHolder(file: string): DataDirHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<DataDirHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.command === 'string' && typeof parsed.since === 'string') {
      return { pid: parsed.pid, command: parsed.command, since: parsed.since };
    }
  } catch {
    // Being written at this very moment, or not ours: the lock still holds.
  }
  return undefined;
}

/** `analytics-exporter serve --flag …`: the script's base name and the arguments. */
function commandLine(): string {
  const script = process.argv[1] ?? 'node';
  const name = /(?:^|[\\/])(?:dist[\\/])?cli\.[cm]?js$/.test(script) ? 'analytics-exporter' : script;
  return [name, ...process.argv.slice(2)].join(' ');
}

/** `EROFS: read-only file system` from an fs (or PGlite) error, whatever its shape: its errno code and message. */
export function errnoText(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = typeof e?.message === 'string' && e.message !== '' ? e.message : undefined;
  if (message === undefined) return code ?? String(err);
  if (code === undefined) return message;
  // Node's messages read "EROFS: read-only file system, open '/x/y'": keep them, they name the path.
  return message.startsWith(code) ? message : `${code}: ${message}`;
}
